// Tests of the f32-activation kernels (matvec_rows_f32) and of the expert FFN
// with CpuActivations::F32, against scalar float/double references.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "cpu/expert_ffn.h"
#include "cpu/quant.h"
#include "cpu/simd_kernels.h"
#include "cpu/thread_pool.h"
#include "base/error.h"
#include "tests/simd_test_util.h"
#include "tests/seed.h"

using namespace vkmoe;
using namespace vkmoe::test;

namespace {

const GgmlType kQuantTypes[] = {GgmlType::Q8_0, GgmlType::Q4_K,   GgmlType::Q5_K,  GgmlType::Q6_K,
                                GgmlType::Q4_0, GgmlType::Q4_1,   GgmlType::Q5_0,  GgmlType::Q5_1,
                                GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K,
                                GgmlType::IQ4_XS};
const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::IQ4_NL,
                                 GgmlType::MXFP4, GgmlType::Q2_K,  GgmlType::Q3_K,   GgmlType::IQ4_XS};

// rows x n matrix of type t from Gaussian rows; odd rows get a mean offset so
// the Q4_K/Q5_K mins are large.
std::vector<uint8_t> random_matrix(std::mt19937& rng, GgmlType t, int64_t rows, int64_t n, float sigma) {
  const size_t rb = row_bytes(t, n);
  std::vector<uint8_t> m(rows * rb);
  for (int64_t r = 0; r < rows; ++r) {
    const auto w = gaussian(rng, n, sigma, (r % 2) ? 0.7f * sigma : 0.f);
    quantize_row(t, w.data(), m.data() + r * rb, n);
  }
  return m;
}

// Random bytes in every quant/scale field (all bit patterns), with random
// finite fp16 super-block scales in [2^-10, 2^-4) of either sign.
std::vector<uint8_t> random_bytes_matrix(std::mt19937& rng, GgmlType t, int64_t rows, int64_t n) {
  std::vector<uint8_t> m(rows * row_bytes(t, n));
  for (auto& b : m) b = static_cast<uint8_t>(rng());
  const int bs = type_traits(t).type_size;
  auto random_half = [&] {
    return static_cast<uint16_t>(((rng() & 1) << 15) | ((5 + rng() % 6) << 10) | (rng() & 0x3FF));
  };
  for (size_t off = 0; off < m.size(); off += bs) {
    const uint16_t d = random_half(), dmin = random_half();
    switch (t) {
      case GgmlType::Q6_K: std::memcpy(&m[off + offsetof(BlockQ6_K, d)], &d, 2); break;
      case GgmlType::Q3_K: std::memcpy(&m[off + offsetof(BlockQ3_K, d)], &d, 2); break;
      case GgmlType::Q2_K:
        std::memcpy(&m[off + offsetof(BlockQ2_K, d)], &d, 2);
        std::memcpy(&m[off + offsetof(BlockQ2_K, dmin)], &dmin, 2);
        break;
      case GgmlType::MXFP4: m[off] = static_cast<uint8_t>(118 + rng() % 8); break;  // 2^-10 .. 2^-3
      case GgmlType::Q8_0:
      case GgmlType::Q4_0:
      case GgmlType::Q5_0:
      case GgmlType::IQ4_NL:
      case GgmlType::IQ4_XS: std::memcpy(&m[off], &d, 2); break;
      default:  // Q4_K, Q5_K, Q4_1, Q5_1: d then dmin / m
        std::memcpy(&m[off], &d, 2);
        std::memcpy(&m[off + 2], &dmin, 2);
    }
  }
  return m;
}

// Checks rows [0, rows) of matvec_rows_f32 against dot_row_f32 (dequantize +
// double sum): |got - ref| <= 1e-5 * sum_i |w_i x_i| + 1e-6.
void expect_rows_match(GgmlType t, const std::vector<uint8_t>& w, const std::vector<float>& x, int64_t rows,
                       int64_t n, uint32_t seed) {
  const size_t rb = row_bytes(t, n);
  std::vector<float> y(rows);
  matvec_rows_f32(t, w.data(), x.data(), y.data(), 0, rows, n);
  std::vector<float> wd(n);
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(t, w.data() + r * rb, wd.data(), n);
    double mag = 0;
    for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(wd[i]) * x[i]);
    const float ref = dot_row_f32(t, w.data() + r * rb, x.data(), n);
    ASSERT_NEAR(y[r], ref, 1e-5 * mag + 1e-6) << type_name(t) << " n=" << n << " row " << r << " seed " << seed;
  }
}

}  // namespace

TEST(SimdF32, MatchesReferenceOnAllTargets) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  for_each_target([&] {
    for (GgmlType t : kWeightTypes) {
      const bool float_weights = type_traits(t).block_size == 1;
      // 131328: the group sums of x (Q4_K, Q5_K, Q4_1, Q5_1, Q2_K) no longer fit the kernel's stack buffer.
      const bool k4 = t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q4_1 || t == GgmlType::Q5_1 ||
                      t == GgmlType::Q2_K;
      for (int64_t n : {int64_t{256}, int64_t{2048}, int64_t{float_weights ? 269 : 768}, int64_t{k4 ? 131328 : 4352}}) {
        const int64_t rows = n > 4096 ? 1 : 4;
        const auto w = random_matrix(rng, t, rows, n, 0.05f);
        auto x = gaussian(rng, n);
        x[rng() % n] *= 20.f;  // an outlier
        expect_rows_match(t, w, x, rows, n, seed);
      }
    }
  });
}

// Every bit pattern of quants and sub-block scales/mins (random bytes), so a
// wrong bit extraction shows even where quantize_row would not produce it.
TEST(SimdF32, RandomBitPatternsOnAllTargets) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int64_t rows = 8, n = 1024;
  for_each_target([&] {
    for (GgmlType t : kQuantTypes) {
      const auto w = random_bytes_matrix(rng, t, rows, n);
      const auto x = gaussian(rng, n);
      expect_rows_match(t, w, x, rows, n, seed);
    }
  });
}

// The integer-activation kernels on the same random bit patterns: matvec_rows
// against the scalar integer reference vec_dot_ref (same integer math, float
// summation order aside).
TEST(SimdQ8, RandomBitPatternsMatchIntegerReference) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int64_t rows = 8, n = 1024;
  for_each_target([&] {
    for (GgmlType t : kQuantTypes) {
      const auto w = random_bytes_matrix(rng, t, rows, n);
      const auto x = gaussian(rng, n);
      std::vector<uint8_t> xq(activation_bytes(t, n));
      quantize_activation(t, x.data(), xq.data(), n);
      std::vector<float> y(rows), wd(n), xd(n);
      dequantize_row(activation_type(t), xq.data(), xd.data(), n);
      matvec_rows(t, w.data(), xq.data(), y.data(), 0, rows, n);
      const size_t rb = row_bytes(t, n);
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(t, w.data() + r * rb, wd.data(), n);
        double mag = 0;
        for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(wd[i]) * xd[i]);
        const float ref = vec_dot_ref(t, w.data() + r * rb, xq.data(), n);
        ASSERT_NEAR(y[r], ref, 1e-5 * mag + 1e-6) << type_name(t) << " row " << r << " seed " << seed;
      }
    }
  });
}

// Sub-ranges write exactly r1 - r0 outputs, each equal (bit for bit) to the
// same row computed alone.
TEST(SimdF32, OddRowRanges) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int64_t rows = 37, n = 512;
  for (GgmlType t : kWeightTypes) {
    const size_t rb = row_bytes(t, n);
    const auto w = random_matrix(rng, t, rows, n, 0.1f);
    const auto x = gaussian(rng, n);
    std::vector<float> single(rows);
    for (int64_t r = 0; r < rows; ++r) matvec_rows_f32(t, w.data(), x.data(), &single[r], r, r + 1, n);
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {5, 6}, {13, 29}, {36, 37}, {7, 7}, {1, 36}}) {
      std::vector<float> y(rows + 2, -12345.f);
      matvec_rows_f32(t, w.data(), x.data(), y.data(), r0, r1, n);
      for (int64_t r = r0; r < r1; ++r) ASSERT_EQ(y[r - r0], single[r]) << type_name(t) << " row " << r;
      for (size_t i = r1 - r0; i < y.size(); ++i) ASSERT_EQ(y[i], -12345.f) << type_name(t) << " wrote past end";
    }
    // A row on its own is also a plain dot with the row's own address.
    std::vector<float> y1(1);
    matvec_rows_f32(t, w.data() + 20 * rb, x.data(), y1.data(), 0, 1, n);
    EXPECT_EQ(y1[0], single[20]) << type_name(t);
    expect_rows_match(t, w, x, rows, n, seed);
  }
}

TEST(SimdF32, RejectsUnsupportedTypesAndShapes) {
  std::vector<uint8_t> buf(8192);
  std::vector<float> x(2048, 1.f), y(4, 7.f);
  EXPECT_THROW(matvec_rows_f32(GgmlType::Q8_1, buf.data(), x.data(), y.data(), 0, 1, 256), Error);
  EXPECT_THROW(matvec_rows_f32(GgmlType::Q8_K, buf.data(), x.data(), y.data(), 0, 1, 256), Error);
  EXPECT_THROW(matvec_rows_f32(GgmlType::Q4_K, buf.data(), x.data(), y.data(), 0, 1, 100), Error);
  EXPECT_THROW(matvec_rows_f32(GgmlType::Q8_0, buf.data(), x.data(), y.data(), 0, 1, 48), Error);
  matvec_rows_f32(GgmlType::Q4_K, buf.data(), x.data(), y.data(), 3, 3, 256);  // empty range
  matvec_rows_f32(GgmlType::Q4_K, buf.data(), x.data(), y.data(), 3, 1, 256);
  for (float v : y) EXPECT_EQ(v, 7.f);
}

namespace {

// Double reference on the dequantized weights. tol[r] bounds f32 rounding:
// 1e-5 of each dot's magnitude sum (sum |w x|), propagated from g and u
// through h = silu(g) * u into the down projection.
std::vector<double> ffn_reference(const std::vector<RandomExpert>& experts, const std::vector<float>& weights,
                                  const std::vector<float>& x, int n_embd, int n_ff, std::vector<double>& tol) {
  constexpr double kRel = 1e-5;
  std::vector<double> out(n_embd, 0.0), h(n_ff), dh(n_ff);
  tol.assign(n_embd, 1e-6);
  for (size_t k = 0; k < experts.size(); ++k) {
    const RandomExpert& e = experts[k];
    for (int r = 0; r < n_ff; ++r) {
      double g = 0, u = 0, g_mag = 0, u_mag = 0;
      for (int c = 0; c < n_embd; ++c) {
        const double gw = double(e.gate_f[size_t(r) * n_embd + c]) * x[c];
        const double uw = double(e.up_f[size_t(r) * n_embd + c]) * x[c];
        g += gw;
        u += uw;
        g_mag += std::fabs(gw);
        u_mag += std::fabs(uw);
      }
      const double sig = 1 / (1 + std::exp(-g)), silu = g * sig;
      const double dsilu = sig * (1 + g * (1 - sig));  // d silu / dg
      h[r] = silu * u;
      dh[r] = kRel * (std::fabs(dsilu * u) * g_mag + std::fabs(silu) * u_mag + std::fabs(h[r]));
    }
    for (int r = 0; r < n_embd; ++r) {
      double s = 0, mag = 0, prop = 0;
      for (int c = 0; c < n_ff; ++c) {
        const double w = e.down_f[size_t(r) * n_ff + c];
        s += w * h[c];
        mag += std::fabs(w * h[c]);
        prop += std::fabs(w) * dh[c];
      }
      out[r] += weights[k] * s;
      tol[r] += std::fabs(weights[k]) * (kRel * mag + prop);
    }
  }
  return out;
}

}  // namespace

// moe_ffn_cpu(..., F32) vs. the double reference within float rounding
// (per-element bound from ffn_reference, ~1e-5 relative), and the same result
// whatever the thread count.
TEST(ExpertFfnF32, MatchesFloatReference) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int n_embd = 512, n_ff = 256;
  std::vector<RandomExpert> experts;
  experts.push_back(make_expert(rng, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, n_embd, n_ff));
  experts.push_back(make_expert(rng, GgmlType::Q5_K, GgmlType::Q8_0, GgmlType::Q4_K, n_embd, n_ff));
  experts.push_back(make_expert(rng, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, n_embd, n_ff));
  experts.push_back(make_expert(rng, GgmlType::Q6_K, GgmlType::F32, GgmlType::Q5_K, n_embd, n_ff));
  const std::vector<float> weights = {0.4f, 0.3f, 0.2f, 0.1f};
  const auto x = gaussian(rng, n_embd);
  std::vector<ExpertView> views;
  for (const auto& e : experts) views.push_back(e.view(n_embd, n_ff));
  std::vector<double> tol;
  const auto ref = ffn_reference(experts, weights, x, n_embd, n_ff, tol);
  double ref_sq = 0;
  for (double v : ref) ref_sq += v * v;
  ASSERT_GT(ref_sq, 0.0);

  std::vector<float> out_serial;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(n_embd, std::nanf(""));
    moe_ffn_cpu(views.data(), weights.data(), static_cast<int>(views.size()), x.data(), out.data(), pool,
                CpuActivations::F32);
    double err_sq = 0;
    for (int i = 0; i < n_embd; ++i) {
      ASSERT_NEAR(out[i], ref[i], tol[i]) << "row " << i << " threads " << threads << " seed " << seed;
      err_sq += (out[i] - ref[i]) * (out[i] - ref[i]);
    }
    EXPECT_LT(std::sqrt(err_sq / ref_sq), 1e-5) << "threads " << threads << " seed " << seed;
    if (out_serial.empty()) out_serial = out;
    else EXPECT_EQ(out, out_serial);
  }
}

// Routing weights scale the output linearly (powers of two exactly), zero
// weights give zero (out overwritten), bad experts are rejected.
TEST(ExpertFfnF32, LinearInRoutingWeightsAndValidates) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int n_embd = 256, n_ff = 512;
  const RandomExpert e = make_expert(rng, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, n_embd, n_ff);
  const ExpertView v = e.view(n_embd, n_ff);
  const auto x = gaussian(rng, n_embd);
  ThreadPool pool(2);
  std::vector<float> full(n_embd, 5.f), half(n_embd, 5.f), zero(n_embd, 5.f);
  const float w1 = 1.f, w_half = 0.5f, w0 = 0.f;
  moe_ffn_cpu(&v, &w1, 1, x.data(), full.data(), pool, CpuActivations::F32);
  moe_ffn_cpu(&v, &w_half, 1, x.data(), half.data(), pool, CpuActivations::F32);
  moe_ffn_cpu(&v, &w0, 1, x.data(), zero.data(), pool, CpuActivations::F32);
  for (int i = 0; i < n_embd; ++i) {
    ASSERT_EQ(half[i], 0.5f * full[i]) << i;
    ASSERT_EQ(zero[i], 0.f) << i;
  }
  const RandomExpert other = make_expert(rng, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, n_embd, 256);
  const ExpertView views[2] = {v, other.view(n_embd, 256)};
  const float w[2] = {0.5f, 0.5f};
  EXPECT_THROW(moe_ffn_cpu(views, w, 2, x.data(), full.data(), pool, CpuActivations::F32), Error);
  ExpertView bad = v;
  bad.down_type = GgmlType::Q8_1;
  EXPECT_THROW(moe_ffn_cpu(&bad, w, 1, x.data(), full.data(), pool, CpuActivations::F32), Error);
}
