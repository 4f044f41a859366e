#include "cpu/expert_ffn_exact.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/moe_route.h"
#include "cpu/thread_pool.h"
#include "engine/common.h"

namespace vkmoe {

float dot_row_dequant(GgmlType t, const uint8_t* row, const float* x, int64_t n, float* scratch) {
  const float* w = scratch;
  if (t == GgmlType::F32)
    w = reinterpret_cast<const float*>(row);
  else
    dequantize_row(t, row, scratch, n);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += w[i + j] * x[i + j];
  for (; i < n; ++i) acc[0] += w[i] * x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void moe_ffn_cpu_exact(const ExpertView* experts, const float* weights, int n, const float* x, float* out,
                       ThreadPool& pool) {
  if (n <= 0) return;
  const int64_t E = experts[0].n_embd, F = experts[0].n_ff;
  for (int k = 0; k < n; ++k)
    if (experts[k].n_embd != E || experts[k].n_ff != F) throw Error("moe_ffn_cpu_exact: experts differ in shape");
  std::vector<float> h(n * F);
  pool.parallel_for(n * F, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(E);
    for (int64_t i = begin; i < end; ++i) {
      const ExpertView& e = experts[i / F];
      const int64_t r = i % F;
      const float g = dot_row_dequant(e.gate_type, e.gate + r * row_bytes(e.gate_type, E), x, E, scratch.data());
      const float u = dot_row_dequant(e.up_type, e.up + r * row_bytes(e.up_type, E), x, E, scratch.data());
      h[i] = silu(g) * u;
    }
  });
  pool.parallel_for(E, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(F);
    for (int64_t r = begin; r < end; ++r) {
      float acc = 0;
      for (int k = 0; k < n; ++k) {
        const ExpertView& e = experts[k];
        acc += weights[k] * dot_row_dequant(e.down_type, e.down + r * row_bytes(e.down_type, F), &h[k * F], F,
                                            scratch.data());
      }
      out[r] = acc;
    }
  });
}

}  // namespace vkmoe
