#pragma once
// `vkmoe bench`: prompt-processing and generation throughput measured the way
// llama-bench does it (independent tests, warm-up, mean ± sd over repetitions).
#include <string>
#include <utility>
#include <vector>

#include "engine/forward/engine_select.h"
#include "engine/model/model.h"

namespace vkmoe {

struct BenchParams {
  std::vector<int> n_prompt{512};       // one ppN test each (0: none)
  std::vector<int> n_gen{128};          // one tgN test each (0: none)
  std::vector<std::pair<int, int>> pg;  // ppN+tgM tests: prompt then generation
  std::vector<int> n_depth{0};          // every test runs at each depth
  int repetitions = 5;
  std::string output = "md";  // md | json | jsonl | csv
  std::string model_path;     // empty: the built-in synthetic model
  bool expert_stats = false;
  bool progress = false;  // each run and its wall time on stderr
};

// Most tokens one bench test may name (-p, -n, -d, -pg values).
constexpr int kMaxBenchTokens = 1 << 30;

// "512,128" -> {512, 128}; both must be positive.
std::pair<int, int> parse_pg(const std::string& text);
// Checks md | json | jsonl | csv.
std::string parse_bench_output(const std::string& text);

// The context the tests need (largest depth + prompt + generation), or
// `ctx_option` when given (> 0); throws Error when that is smaller than needed
// or the need exceeds the model's training context.
int bench_context_size(const BenchParams& p, long ctx_option, int n_ctx_train);

// Runs every test on one engine built from `o` and prints the results to
// stdout in p.output format.
void run_bench(const Model& m, const EngineOptions& o, const BenchParams& p);

}  // namespace vkmoe
