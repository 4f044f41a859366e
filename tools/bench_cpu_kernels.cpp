// CPU kernel benchmarks on Qwen3-30B-A3B expert shapes (n_embd 2048, n_ff 768):
// matvec per weight type (gate/up: 768 rows x 2048, down: 2048 rows x 768),
// single thread and thread pool, the same with f32 activations
// (matvec_rows_f32), and the full 8-expert moe_ffn_cpu with Q8 and F32 activations.
// Throughput is reported as weight bytes read per second.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cpu/expert_ffn.h"
#include "cpu/quant.h"
#include "cpu/simd_kernels.h"
#include "cpu/thread_pool.h"

using namespace vkmoe;

namespace {

constexpr int kEmbd = 2048, kFf = 768, kExperts = 8;

std::vector<uint8_t> random_matrix(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 0.02f);
  std::vector<float> row(cols);
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> m(rows * rb);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = g(rng);
    quantize_row(t, row.data(), m.data() + r * rb, cols);
  }
  return m;
}

// Weights are built once per (type, shape, seed) and shared by benchmarks.
const std::vector<uint8_t>& cached_matrix(GgmlType t, int64_t rows, int64_t cols, uint32_t seed = 1) {
  static std::map<std::tuple<GgmlType, int64_t, int64_t, uint32_t>, std::vector<uint8_t>> cache;
  auto key = std::make_tuple(t, rows, cols, seed);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, random_matrix(t, rows, cols, seed)).first;
  return it->second;
}

std::vector<float> random_vector(int64_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = g(rng);
  return v;
}

int pool_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

void bm_matvec(benchmark::State& state, GgmlType t, int64_t rows, int64_t cols, int threads) {
  const auto& w = cached_matrix(t, rows, cols);
  const auto x = random_vector(cols);
  std::vector<uint8_t> xq(activation_bytes(t, cols));
  std::vector<float> y(rows);
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  for (auto _ : state) {
    quantize_activation(t, x.data(), xq.data(), cols);
    if (pool) {
      pool->parallel_for(rows, [&](int64_t b, int64_t e) { matvec_rows(t, w.data(), xq.data(), y.data() + b, b, e, cols); });
    } else {
      matvec_rows(t, w.data(), xq.data(), y.data(), 0, rows, cols);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
  state.SetLabel(simd_target_name());
}

// matvec_rows_f32: f32 activations, no quantization step.
void bm_matvec_f32(benchmark::State& state, GgmlType t, int64_t rows, int64_t cols, int threads) {
  const auto& w = cached_matrix(t, rows, cols);
  const auto x = random_vector(cols);
  std::vector<float> y(rows);
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  for (auto _ : state) {
    if (pool) {
      pool->parallel_for(rows, [&](int64_t b, int64_t e) { matvec_rows_f32(t, w.data(), x.data(), y.data() + b, b, e, cols); });
    } else {
      matvec_rows_f32(t, w.data(), x.data(), y.data(), 0, rows, cols);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.size()));
  state.SetLabel(simd_target_name());
}

void bm_moe_ffn(benchmark::State& state, GgmlType gate_up, GgmlType down, int threads,
                CpuActivations activations = CpuActivations::Q8) {
  std::vector<ExpertView> experts;
  size_t bytes = 0;
  for (int k = 0; k < kExperts; ++k) {
    const auto& g = cached_matrix(gate_up, kFf, kEmbd, 100 + k);
    const auto& u = cached_matrix(gate_up, kFf, kEmbd, 200 + k);
    const auto& d = cached_matrix(down, kEmbd, kFf, 300 + k);
    experts.push_back({gate_up, gate_up, down, g.data(), u.data(), d.data(), kEmbd, kFf});
    bytes += g.size() + u.size() + d.size();
  }
  const std::vector<float> weights(kExperts, 1.f / kExperts);
  const auto x = random_vector(kEmbd);
  std::vector<float> out(kEmbd);
  ThreadPool pool(threads);
  for (auto _ : state) {
    moe_ffn_cpu(experts.data(), weights.data(), kExperts, x.data(), out.data(), pool, activations);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.SetLabel(simd_target_name());
}

}  // namespace

int main(int argc, char** argv) {
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0,
                            GgmlType::F16,  GgmlType::BF16, GgmlType::F32};
  const int pool_size = pool_threads();
  std::vector<int> thread_counts = {1};
  if (pool_size > 1) thread_counts.push_back(pool_size);
  for (GgmlType t : types) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{kFf, kEmbd}, {kEmbd, kFf}}) {
      for (int threads : thread_counts) {
        const std::string name = std::string("matvec/") + type_name(t) + "/" + std::to_string(rows) + "x" +
                                 std::to_string(cols) + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_matvec(s, t, rows, cols, threads); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{kFf, kEmbd}, {kEmbd, kFf}}) {
      for (int threads : thread_counts) {
        const std::string name = std::string("matvec_f32/") + type_name(t) + "/" + std::to_string(rows) + "x" +
                                 std::to_string(cols) + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_matvec_f32(s, t, rows, cols, threads); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  const std::pair<GgmlType, GgmlType> ffn_types[] = {{GgmlType::Q4_K, GgmlType::Q6_K}, {GgmlType::Q8_0, GgmlType::Q8_0}};
  for (auto [gu, dn] : ffn_types) {
    for (int threads : thread_counts) {
      const std::string name = std::string("moe_ffn_cpu/8x") + std::to_string(kEmbd) + "x" + std::to_string(kFf) + "/" +
                               type_name(gu) + "+" + type_name(dn) + "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_moe_ffn(s, gu, dn, threads); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      const std::string name_f32 = std::string("moe_ffn_cpu_f32/8x") + std::to_string(kEmbd) + "x" +
                                   std::to_string(kFf) + "/" + type_name(gu) + "+" + type_name(dn) +
                                   "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name_f32.c_str(),
                                   [=](benchmark::State& s) { bm_moe_ffn(s, gu, dn, threads, CpuActivations::F32); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
