#include "cpu/expert_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/simd_kernels.h"
#include "cpu/thread_pool.h"
#include "base/error.h"

namespace vkmoe {

namespace {

void check_experts(const ExpertView* experts, int n) {
  const int n_embd = experts[0].n_embd, n_ff = experts[0].n_ff;
  if (n_embd <= 0 || n_ff <= 0)
    throw Error("moe_ffn_cpu: invalid expert shape " + std::to_string(n_embd) + "x" + std::to_string(n_ff));
  for (int k = 0; k < n; ++k) {
    const ExpertView& e = experts[k];
    if (e.n_embd != n_embd || e.n_ff != n_ff)
      throw Error("moe_ffn_cpu: expert " + std::to_string(k) + " has shape " + std::to_string(e.n_embd) + "x" +
                  std::to_string(e.n_ff) + ", expected " + std::to_string(n_embd) + "x" + std::to_string(n_ff));
    if (!e.gate || !e.up || !e.down) throw Error("moe_ffn_cpu: expert " + std::to_string(k) + " has no weights");
    // Validates the types and that the row lengths are whole blocks.
    activation_bytes(e.gate_type, n_embd);
    activation_bytes(e.up_type, n_embd);
    activation_bytes(e.down_type, n_ff);
    row_bytes(e.gate_type, n_embd);
    row_bytes(e.up_type, n_embd);
    row_bytes(e.down_type, n_ff);
  }
}

// Quantized copies of one vector, one per activation format, made on demand.
class ActivationCache {
 public:
  ActivationCache(const float* x, int64_t n) : x_(x), n_(n) {}
  const void* get(GgmlType weight_type) {
    const GgmlType at = activation_type(weight_type);
    for (auto& [type, buf] : entries_)
      if (type == at) return buf.data();
    entries_.emplace_back(at, std::vector<uint8_t>(activation_bytes(weight_type, n_)));
    quantize_activation(weight_type, x_, entries_.back().second.data(), n_);
    return entries_.back().second.data();
  }

 private:
  const float* x_;
  int64_t n_;
  std::vector<std::pair<GgmlType, std::vector<uint8_t>>> entries_;
};

// acc[r - begin] += w * (y[r - begin] + down_b[r]) for r in [begin, end).
void add_down(const ExpertView& e, float w, const float* y, float* acc, int64_t begin, int64_t end) {
  if (e.down_b) {
    for (int64_t r = begin; r < end; ++r) acc[r - begin] += w * (y[r - begin] + e.down_b[r]);
  } else {
    for (int64_t r = begin; r < end; ++r) acc[r - begin] += w * y[r - begin];
  }
}

// The summed rows go out in one store: out may be uncached, write-combined
// memory the GPU reads, where every read-modify-write would be a bus round trip.
void store_rows(const std::vector<float>& acc, float* out) { std::memcpy(out, acc.data(), acc.size() * sizeof(float)); }

// f32 activations: gate/up rows of all experts split across the pool, the
// hidden vector h = act(g + gate_b, u + up_b) kept in f32, then the down rows.
void moe_ffn_f32(const ExpertView* experts, const float* weights, int n, const float* x, float* out,
                 ThreadPool& pool) {
  const int64_t n_embd = experts[0].n_embd, n_ff = experts[0].n_ff;
  std::vector<float> h(n * n_ff), up_out(n * n_ff);
  pool.parallel_for(n * n_ff, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t k = i / n_ff, r0 = i % n_ff, r1 = std::min(n_ff, r0 + (end - i));
      const ExpertView& e = experts[k];
      float* g = h.data() + k * n_ff;
      float* u = up_out.data() + k * n_ff;
      matvec_rows_f32(e.gate_type, e.gate, x, g + r0, r0, r1, n_embd);
      matvec_rows_f32(e.up_type, e.up, x, u + r0, r0, r1, n_embd);
      glu_rows(e.act, g + r0, u + r0, r1 - r0, e.gate_b ? e.gate_b + r0 : nullptr, e.up_b ? e.up_b + r0 : nullptr);
      i += r1 - r0;
    }
  });
  pool.parallel_for(n_embd, [&](int64_t begin, int64_t end) {
    std::vector<float> y(end - begin), acc(end - begin, 0.f);
    for (int k = 0; k < n; ++k) {
      matvec_rows_f32(experts[k].down_type, experts[k].down, h.data() + k * n_ff, y.data(), begin, end, n_ff);
      add_down(experts[k], weights[k], y.data(), acc.data(), begin, end);
    }
    store_rows(acc, out + begin);
  });
}

}  // namespace

void moe_ffn_cpu(const ExpertView* experts, const float* weights, int n, const float* x, float* out,
                 ThreadPool& pool, CpuActivations activations) {
  if (n <= 0) return;
  check_experts(experts, n);
  if (activations == CpuActivations::F32) return moe_ffn_f32(experts, weights, n, x, out, pool);
  const int64_t n_embd = experts[0].n_embd, n_ff = experts[0].n_ff;

  ActivationCache xcache(x, n_embd);
  std::vector<const void*> xq_gate(n), xq_up(n);
  for (int k = 0; k < n; ++k) {
    xq_gate[k] = xcache.get(experts[k].gate_type);
    xq_up[k] = xcache.get(experts[k].up_type);
  }

  // h[k][r] = act(gate_k x + gate_b, up_k x + up_b)[r], rows of all experts split across the pool.
  std::vector<float> gate_out(n * n_ff), up_out(n * n_ff);
  pool.parallel_for(n * n_ff, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end;) {
      const int64_t k = i / n_ff, r0 = i % n_ff, r1 = std::min(n_ff, r0 + (end - i));
      const ExpertView& e = experts[k];
      float* g = gate_out.data() + k * n_ff;
      float* u = up_out.data() + k * n_ff;
      matvec_rows(e.gate_type, e.gate, xq_gate[k], g + r0, r0, r1, n_embd);
      matvec_rows(e.up_type, e.up, xq_up[k], u + r0, r0, r1, n_embd);
      glu_rows(e.act, g + r0, u + r0, r1 - r0, e.gate_b ? e.gate_b + r0 : nullptr, e.up_b ? e.up_b + r0 : nullptr);
      i += r1 - r0;
    }
  });

  std::vector<size_t> hq_offset(n + 1, 0);
  for (int k = 0; k < n; ++k) hq_offset[k + 1] = hq_offset[k] + activation_bytes(experts[k].down_type, n_ff);
  std::vector<uint8_t> hq(hq_offset[n]);
  // A few microseconds on one thread: cheaper than another parallel job.
  for (int k = 0; k < n; ++k)
    quantize_activation(experts[k].down_type, gate_out.data() + k * n_ff, hq.data() + hq_offset[k], n_ff);

  pool.parallel_for(n_embd, [&](int64_t begin, int64_t end) {
    std::vector<float> y(end - begin), acc(end - begin, 0.f);
    for (int k = 0; k < n; ++k) {
      matvec_rows(experts[k].down_type, experts[k].down, hq.data() + hq_offset[k], y.data(), begin, end, n_ff);
      add_down(experts[k], weights[k], y.data(), acc.data(), begin, end);
    }
    store_rows(acc, out + begin);
  });
}

}  // namespace vkmoe
