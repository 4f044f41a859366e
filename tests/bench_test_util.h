#pragma once
// Runs `vkmoe bench-shaders` in-process for the benchmark tests.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tools/bench_shaders.h"

namespace vkmoe::test {

// bench_shaders_main over args (args[0] is the command name): its exit status
// and what it printed on stdout.
inline std::pair<int, std::string> run_bench_shaders(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  const int rc = bench_shaders_main(static_cast<int>(argv.size()), argv.data());
  return {rc, ::testing::internal::GetCapturedStdout()};
}

}  // namespace vkmoe::test
