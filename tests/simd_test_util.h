#pragma once
// Helpers shared by the CPU kernel tests (test_simd.cpp, test_simd_f32.cpp).
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cpu/expert_ffn.h"
#include "cpu/quant.h"
#include "cpu/simd_kernels.h"

namespace vkmoe::test {

inline std::vector<float> gaussian(std::mt19937& rng, int64_t n, float sigma = 1.f, float mean = 0.f) {
  std::normal_distribution<float> g(mean, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

// Runs body once per Highway target compiled into the binary and supported
// by this CPU, with dispatch forced to it.
template <class Body>
void for_each_target(Body body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    ASSERT_STREQ(simd_target_name(), hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

struct RandomExpert {
  GgmlType gate_type, up_type, down_type;
  std::vector<uint8_t> gate, up, down;
  std::vector<float> gate_f, up_f, down_f;  // dequantized weights
  ExpertView view(int n_embd, int n_ff) const {
    return {gate_type, up_type, down_type, gate.data(), up.data(), down.data(), n_embd, n_ff};
  }
};

inline std::vector<uint8_t> quantize_matrix(GgmlType t, const std::vector<float>& m, int64_t rows, int64_t cols,
                                            std::vector<float>& dequant) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> q(rows * rb);
  dequant.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(t, m.data() + r * cols, q.data() + r * rb, cols);
    dequantize_row(t, q.data() + r * rb, dequant.data() + r * cols, cols);
  }
  return q;
}

// Gaussian weights scaled by 1/sqrt(fan-in), quantized, with their dequantized copies.
inline RandomExpert make_expert(std::mt19937& rng, GgmlType g, GgmlType u, GgmlType d, int n_embd, int n_ff) {
  RandomExpert e{g, u, d, {}, {}, {}, {}, {}, {}};
  const float s_in = 1.f / std::sqrt(float(n_embd)), s_out = 1.f / std::sqrt(float(n_ff));
  e.gate = quantize_matrix(g, gaussian(rng, int64_t(n_ff) * n_embd, s_in), n_ff, n_embd, e.gate_f);
  e.up = quantize_matrix(u, gaussian(rng, int64_t(n_ff) * n_embd, s_in), n_ff, n_embd, e.up_f);
  e.down = quantize_matrix(d, gaussian(rng, int64_t(n_embd) * n_ff, s_out), n_embd, n_ff, e.down_f);
  return e;
}

}  // namespace vkmoe::test
