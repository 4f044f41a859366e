// CPU kernel benchmarks on Qwen3-30B-A3B expert shapes (n_embd 2048, n_ff 768):
// matvec per weight type (gate/up: 768 rows x 2048, down: 2048 rows x 768),
// single thread and thread pool, the same with f32 activations
// (matvec_rows_f32), and the full 8-expert moe_ffn_cpu with Q8 and F32 activations.
// Throughput is reported as weight bytes read per second.
// prompt_layer: one Qwen3-30B-A3B MoE layer over a 512-token ubatch (128
// experts, top-8, Q4_K gate/up + Q6_K down as in Q4_K_M), batched
// (expert_ffn_batched, each expert's weights read once) vs. moe_ffn_cpu per
// token; reports tokens/s and weight GB/s.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cpu/expert_batch.h"
#include "cpu/expert_ffn.h"
#include "cpu/finite_check.h"
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

// Decode's CPU experts: layers of kExperts expert FFNs (views, kExperts per
// layer, `bytes` of weights in all) applied to one token, layer after layer.
void run_moe_layers(benchmark::State& state, const std::vector<ExpertView>& views, size_t bytes, int threads,
                    CpuActivations act) {
  const std::vector<float> weights(kExperts, 1.f / kExperts);
  const auto x = random_vector(kEmbd);
  std::vector<float> out(kEmbd);
  ThreadPool pool(threads);
  for (auto _ : state) {
    for (size_t l = 0; l < views.size(); l += kExperts)
      moe_ffn_cpu(views.data() + l, weights.data(), kExperts, x.data(), out.data(), pool, act);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
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
  run_moe_layers(state, experts, bytes, threads, activations);
}

// One MoE layer for a prompt ubatch. Expert weights: 8 distinct random
// matrices per kind copied to 128 places in memory, so every expert is read
// from DRAM as in a real model.
constexpr int kLayerExperts = 128, kPromptTokens = 512, kTopK = 8;

struct PromptLayer {
  std::vector<uint8_t> gate, up, down;  // kLayerExperts matrices each
  size_t gate_bytes = 0, down_bytes = 0;
  std::vector<ExpertView> experts;
  std::vector<std::vector<int32_t>> tokens;  // per expert
  std::vector<std::vector<float>> weights;   // per expert
  std::vector<std::vector<int>> routed;      // per token: its experts
  std::vector<float> x;
};

const PromptLayer& prompt_layer() {
  static const PromptLayer layer = [] {
    PromptLayer l;
    auto replicate = [](GgmlType t, int64_t rows, int64_t cols, uint32_t seed, size_t& bytes) {
      std::vector<uint8_t> all;
      for (int k = 0; k < kLayerExperts; ++k) {
        const auto& m = cached_matrix(t, rows, cols, seed + k % 8);
        bytes = m.size();
        all.insert(all.end(), m.begin(), m.end());
      }
      return all;
    };
    size_t up_bytes = 0;
    l.gate = replicate(GgmlType::Q4_K, kFf, kEmbd, 100, l.gate_bytes);
    l.up = replicate(GgmlType::Q4_K, kFf, kEmbd, 200, up_bytes);
    l.down = replicate(GgmlType::Q6_K, kEmbd, kFf, 300, l.down_bytes);
    for (int k = 0; k < kLayerExperts; ++k)
      l.experts.push_back({GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, l.gate.data() + k * l.gate_bytes,
                           l.up.data() + k * l.gate_bytes, l.down.data() + k * l.down_bytes, kEmbd, kFf});
    std::mt19937 rng(11);
    l.tokens.resize(kLayerExperts);
    l.weights.resize(kLayerExperts);
    l.routed.resize(kPromptTokens);
    std::vector<int> ids(kLayerExperts);
    for (int t = 0; t < kPromptTokens; ++t) {
      for (int k = 0; k < kLayerExperts; ++k) ids[k] = k;
      std::shuffle(ids.begin(), ids.end(), rng);
      for (int j = 0; j < kTopK; ++j) {
        l.tokens[ids[j]].push_back(t);
        l.weights[ids[j]].push_back(1.f / kTopK);
        l.routed[t].push_back(ids[j]);
      }
    }
    l.x = random_vector(int64_t{kPromptTokens} * kEmbd);
    return l;
  }();
  return layer;
}

void bm_prompt_layer(benchmark::State& state, bool batched, CpuActivations act, int threads) {
  const PromptLayer& l = prompt_layer();
  const size_t expert_bytes = 2 * l.gate_bytes + l.down_bytes;
  std::vector<ExpertBatch> batches;
  size_t bytes_per_iter = 0;
  for (int k = 0; k < kLayerExperts; ++k) {
    batches.push_back({l.experts[k], l.tokens[k].data(), l.weights[k].data(), static_cast<int>(l.tokens[k].size())});
    if (!l.tokens[k].empty()) bytes_per_iter += expert_bytes;
  }
  if (!batched) bytes_per_iter = size_t{kPromptTokens} * kTopK * expert_bytes;
  std::vector<float> out(size_t{kPromptTokens} * kEmbd);
  ThreadPool pool(threads);
  std::vector<ExpertView> views(kTopK);
  const std::vector<float> weights(kTopK, 1.f / kTopK);
  for (auto _ : state) {
    if (batched) {
      std::fill(out.begin(), out.end(), 0.f);
      expert_ffn_batched(batches.data(), kLayerExperts, l.x.data(), kEmbd, out.data(), kEmbd, pool, act);
    } else {
      for (int t = 0; t < kPromptTokens; ++t) {
        for (int j = 0; j < kTopK; ++j) views[j] = l.experts[l.routed[t][j]];
        moe_ffn_cpu(views.data(), weights.data(), kTopK, l.x.data() + int64_t{t} * kEmbd, out.data() + int64_t{t} * kEmbd,
                    pool, act);
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes_per_iter));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kPromptTokens, benchmark::Counter::kIsRate);
  state.SetLabel(simd_target_name());
}

// The host's read bandwidth: the pool sums a 2 GiB buffer (8x the L3 of the
// largest CPUs), the ceiling for experts streamed from DRAM.
void bm_memory_read(benchmark::State& state, int threads) {
  const size_t n = (size_t{2} << 30) / sizeof(uint64_t);
  static std::vector<uint64_t> buf(n, 1);
  ThreadPool pool(threads);
  std::vector<uint64_t> sums(64 * 16);
  for (auto _ : state) {
    pool.parallel_for(64, [&](int64_t b, int64_t e) {
      for (int64_t part = b; part < e; ++part) {
        const uint64_t* p = buf.data() + part * (n / 64);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i < n / 64; i += 4) {
          s0 += p[i];
          s1 += p[i + 1];
          s2 += p[i + 2];
          s3 += p[i + 3];
        }
        sums[part * 16] = s0 + s1 + s2 + s3;
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n * sizeof(uint64_t)));
}

// One decoded token's experts as in Qwen3-30B-A3B Q4_K_M: 48 layers of 8
// experts (Q4_K gate/up, Q6_K down), each at its own address (1.2 GB), so the
// weights stream from DRAM as they do in the engine's cpu-moe decode.
void bm_decode_token(benchmark::State& state, CpuActivations act, int threads) {
  constexpr int kLayers = 48;
  static const auto weights = [] {
    std::vector<std::vector<uint8_t>> m;
    for (int k = 0; k < kLayers * kExperts; ++k) {
      for (auto [t, rows, cols, seed] : {std::tuple{GgmlType::Q4_K, kFf, kEmbd, 100}, {GgmlType::Q4_K, kFf, kEmbd, 200},
                                         {GgmlType::Q6_K, kEmbd, kFf, 300}})
        m.push_back(cached_matrix(t, rows, cols, seed + k % kExperts));
    }
    return m;
  }();
  std::vector<ExpertView> views;
  size_t bytes = 0;
  for (int k = 0; k < kLayers * kExperts; ++k) {
    const auto& g = weights[3 * k];
    const auto& u = weights[3 * k + 1];
    const auto& d = weights[3 * k + 2];
    views.push_back({GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, g.data(), u.data(), d.data(), kEmbd, kFf});
    bytes += g.size() + u.size() + d.size();
  }
  run_moe_layers(state, views, bytes, threads, act);
}

// The check every token's logits get (vocabulary of Qwen3).
void bm_logits_finite_check(benchmark::State& state) {
  std::vector<float> logits(151936);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 4);
  for (float& x : logits) x = nd(rng);
  for (auto _ : state) benchmark::DoNotOptimize(all_finite(logits.data(), logits.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * int64_t(logits.size() * 4));
}

}  // namespace

int main(int argc, char** argv) {
  const GgmlType types[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0,
                            GgmlType::F16,  GgmlType::BF16, GgmlType::F32};
  const int pool_size = pool_threads();
  std::vector<int> thread_counts = {1};
  if (pool_size > 1) thread_counts.push_back(pool_size);
  for (GgmlType t : types) {
    for (const auto& shape : {std::pair<int64_t, int64_t>{kFf, kEmbd}, {kEmbd, kFf}}) {
      const int64_t rows = shape.first, cols = shape.second;  // lambdas cannot capture bindings in clang 14
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
    for (const auto& shape : {std::pair<int64_t, int64_t>{kFf, kEmbd}, {kEmbd, kFf}}) {
      const int64_t rows = shape.first, cols = shape.second;  // lambdas cannot capture bindings in clang 14
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
  for (const auto& types : ffn_types) {
    const GgmlType gu = types.first, dn = types.second;
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
  for (int threads : thread_counts) {
    for (bool batched : {true, false}) {
      for (CpuActivations act : {CpuActivations::F32, CpuActivations::Q8}) {
        const std::string name = std::string("prompt_layer/") + (batched ? "batched" : "per_token") + "/" +
                                 (act == CpuActivations::F32 ? "f32" : "q8") + "/128x2048x768/Q4_K+Q6_K/tokens:" +
                                 std::to_string(kPromptTokens) + "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_prompt_layer(s, batched, act, threads); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  for (int threads : thread_counts) {
    benchmark::RegisterBenchmark(("memory_read/2GiB/threads:" + std::to_string(threads)).c_str(),
                                 [=](benchmark::State& s) { bm_memory_read(s, threads); })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    for (CpuActivations act : {CpuActivations::Q8, CpuActivations::F32}) {
      const std::string name = std::string("decode_token/") + (act == CpuActivations::F32 ? "f32" : "q8") +
                               "/48x8x2048x768/Q4_K+Q6_K/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { bm_decode_token(s, act, threads); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RegisterBenchmark("logits_finite_check/151936", bm_logits_finite_check)->Unit(benchmark::kMicrosecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
