#pragma once
// Fresh random inputs for every test run, replayable: tests print the seed
// they use (SCOPED_TRACE) and VKMOE_TEST_SEED=N runs them with N instead.
#include <cstdint>
#include <cstdlib>
#include <random>

namespace vkmoe::test {

inline uint64_t test_seed() {
  if (const char* s = std::getenv("VKMOE_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

}  // namespace vkmoe::test
