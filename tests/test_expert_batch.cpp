// Tests of the batched CPU experts: matmul_rows_f32 (one weight tile against
// several vectors) and expert_ffn_batched, against scalar double references
// and against moe_ffn_cpu run token by token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "base/error.h"
#include "cpu/expert_batch.h"
#include "cpu/expert_ffn.h"
#include "tests/test_util.h"
#include "cpu/quant.h"
#include "cpu/simd_batch.h"
#include "cpu/simd_kernels.h"
#include "cpu/thread_pool.h"
#include "tests/simd_test_util.h"

using namespace vkmoe;
using namespace vkmoe::test;

namespace {

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::IQ4_NL,
                                 GgmlType::MXFP4, GgmlType::Q2_K,  GgmlType::Q3_K,   GgmlType::IQ4_XS};

std::vector<uint8_t> random_rows(std::mt19937& rng, GgmlType t, int64_t rows, int64_t n) {
  const size_t rb = row_bytes(t, n);
  std::vector<uint8_t> m(rows * rb);
  for (int64_t r = 0; r < rows; ++r) {
    const auto w = gaussian(rng, n, 0.05f, (r % 2) ? 0.03f : 0.f);  // offsets make Q4_K/Q5_K mins large
    quantize_row(t, w.data(), m.data() + r * rb, n);
  }
  return m;
}

}  // namespace

// Every (row, vector) result is within 1e-5 of sum |w x| of the scalar
// dequantize-and-dot reference, and bit-identical to the same pair computed
// alone (one row, one vector), for all tile/remainder shapes and targets.
TEST(MatmulRowsF32, MatchesReferenceAndIsShapeInvariant) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int64_t rows = 9;  // two 4-row tiles and a remainder row
  for_each_target([&] {
    for (GgmlType t : kWeightTypes) {
      const bool float_weights = type_traits(t).block_size == 1;
      for (int64_t n : {int64_t{256}, int64_t{float_weights ? 269 : 768}}) {
        const size_t rb = row_bytes(t, n);
        const auto w = random_rows(rng, t, rows, n);
        const int max_tok = 9;
        std::vector<std::vector<float>> xs;
        std::vector<const float*> xp;
        for (int k = 0; k < max_tok; ++k) xs.push_back(gaussian(rng, n));
        for (auto& v : xs) xp.push_back(v.data());
        // Each pair alone.
        std::vector<float> single(rows * max_tok);
        for (int64_t r = 0; r < rows; ++r)
          for (int k = 0; k < max_tok; ++k) matmul_rows_f32(t, w.data(), &xp[k], 1, &single[r * max_tok + k], 1, r, r + 1, n);
        std::vector<float> wd(n);
        for (int64_t r = 0; r < rows; ++r) {
          dequantize_row(t, w.data() + r * rb, wd.data(), n);
          for (int k = 0; k < max_tok; ++k) {
            double mag = 0;
            for (int64_t i = 0; i < n; ++i) mag += std::fabs(double(wd[i]) * xs[k][i]);
            const float ref = dot_row_f32(t, w.data() + r * rb, xs[k].data(), n);
            ASSERT_NEAR(single[r * max_tok + k], ref, 1e-5 * mag + 1e-6)
                << type_name(t) << " n=" << n << " row " << r << " vec " << k << " seed " << seed;
          }
        }
        for (int n_tok : {1, 2, 3, 5, 8, 9}) {
          for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {2, 7}, {5, 6}}) {
            const int64_t y_stride = rows + 3;
            std::vector<float> y(n_tok * y_stride, -777.f);
            matmul_rows_f32(t, w.data(), xp.data(), n_tok, y.data(), y_stride, r0, r1, n);
            for (int k = 0; k < n_tok; ++k) {
              for (int64_t j = 0; j < y_stride; ++j) {
                const float want = j < r1 - r0 ? single[(r0 + j) * max_tok + k] : -777.f;
                ASSERT_EQ(y[k * y_stride + j], want)
                    << type_name(t) << " n=" << n << " n_tok " << n_tok << " rows " << r0 << ".." << r1 << " vec " << k
                    << " out " << j;
              }
            }
          }
        }
      }
    }
  });
}

TEST(MatmulRowsF32, RejectsUnsupportedTypesAndShapes) {
  std::vector<uint8_t> buf(8192);
  std::vector<float> x(512, 1.f), y(4, 7.f);
  const float* xp = x.data();
  EXPECT_THROW(matmul_rows_f32(GgmlType::Q8_1, buf.data(), &xp, 1, y.data(), 4, 0, 1, 256), Error);
  EXPECT_THROW(matmul_rows_f32(GgmlType::Q8_K, buf.data(), &xp, 1, y.data(), 4, 0, 1, 256), Error);
  EXPECT_THROW(matmul_rows_f32(GgmlType::Q4_K, buf.data(), &xp, 1, y.data(), 4, 0, 1, 100), Error);
  matmul_rows_f32(GgmlType::Q4_K, buf.data(), &xp, 0, y.data(), 4, 0, 1, 256);  // no vectors
  matmul_rows_f32(GgmlType::Q4_K, buf.data(), &xp, 1, y.data(), 4, 3, 3, 256);  // no rows
  for (float v : y) EXPECT_EQ(v, 7.f);
}

namespace {

constexpr int kEmbd = 256, kFf = 256, kTokens = 70;

// Thirteen experts: every supported type appears as gate, as up and as down.
const GgmlType kExpertTypes[13][3] = {
    {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0},     {GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4},
    {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS},   {GgmlType::Q5_0, GgmlType::Q4_0, GgmlType::Q4_1},
    {GgmlType::MXFP4, GgmlType::Q5_1, GgmlType::IQ4_NL},  {GgmlType::IQ4_XS, GgmlType::Q2_K, GgmlType::Q3_K},
    {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K}, {GgmlType::Q5_K, GgmlType::Q8_0, GgmlType::Q4_K},
    {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0},  {GgmlType::Q6_K, GgmlType::F32, GgmlType::Q5_K},
    {GgmlType::F32, GgmlType::F16, GgmlType::BF16},   {GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::F32},
    {GgmlType::BF16, GgmlType::Q5_K, GgmlType::F16}};

// Batches of n = 1 .. 64 (and 0) tokens over the thirteen experts, tokens
// drawn without repetition within a batch, so most tokens meet several experts.
struct Problem {
  std::vector<RandomExpert> experts;
  std::vector<int> expert_of;  // per batch
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> weights;
  std::vector<float> x;  // kTokens x kEmbd
  std::vector<ExpertBatch> batches;
};

Problem make_problem(std::mt19937& rng) {
  Problem p;
  for (const auto& t : kExpertTypes) p.experts.push_back(make_expert(rng, t[0], t[1], t[2], kEmbd, kFf));
  const int sizes[] = {1, 3, 17, 64, 5, 17, 3, 64, 1, 9, 33, 2, 7, 0, 0};
  std::uniform_real_distribution<float> wdist(0.05f, 0.5f);
  for (size_t b = 0; b < std::size(sizes); ++b) {
    std::vector<int32_t> all(kTokens);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(sizes[b]);
    std::vector<float> w(sizes[b]);
    for (float& v : w) v = wdist(rng);
    p.expert_of.push_back(static_cast<int>(b % p.experts.size()));
    p.tokens.push_back(all);
    p.weights.push_back(w);
  }
  p.x = gaussian(rng, int64_t{kTokens} * kEmbd);
  for (size_t b = 0; b < p.tokens.size(); ++b) {
    ExpertBatch eb{p.experts[p.expert_of[b]].view(kEmbd, kFf), p.tokens[b].data(), p.weights[b].data(),
                   static_cast<int>(p.tokens[b].size())};
    if (eb.n == 0) eb = ExpertBatch{};  // empty batches may carry no pointers at all
    p.batches.push_back(eb);
  }
  return p;
}

std::vector<float> through_activation(GgmlType wt, const std::vector<float>& v) {
  const GgmlType at = activation_type(wt);
  if (at == GgmlType::F32) return v;
  std::vector<uint8_t> q(row_bytes(at, v.size()));
  quantize_row(at, v.data(), q.data(), v.size());
  std::vector<float> out(v.size());
  dequantize_row(at, q.data(), out.data(), v.size());
  return out;
}

// Double reference of out = base + sum over entries of weight * down(silu(gate x) * up x)
// on the dequantized weights, with a per-element bound tol:
// - quantized_acts = false: f32 rounding, 1e-5 of each dot's magnitude sum,
//   propagated from g, u through h = silu(g) * u into the down projection;
// - quantized_acts = true: x and h pass through the activation quantization
//   of the Q8 path; tol adds one quant step times |down| for each h value
//   within 2e-3 (plus its own and its block scale's f32 error) of a rounding
//   midpoint (it may round either way).
std::vector<double> reference(const Problem& p, const std::vector<float>& base, bool quantized_acts,
                              std::vector<double>& tol) {
  constexpr double kRel = 1e-5;
  std::vector<double> out(base.begin(), base.end());
  tol.assign(out.size(), 0.0);
  for (size_t i = 0; i < out.size(); ++i) tol[i] = 1e-6 + 1e-7 * std::fabs(base[i]);
  for (size_t b = 0; b < p.tokens.size(); ++b) {
    const RandomExpert& e = p.experts[p.expert_of[b]];
    for (size_t k = 0; k < p.tokens[b].size(); ++k) {
      const int32_t tok = p.tokens[b][k];
      const std::vector<float> x(p.x.begin() + int64_t{tok} * kEmbd, p.x.begin() + int64_t{tok + 1} * kEmbd);
      const auto xg = quantized_acts ? through_activation(e.gate_type, x) : x;
      const auto xu = quantized_acts ? through_activation(e.up_type, x) : x;
      std::vector<float> h(kFf);
      std::vector<double> hd(kFf), dh(kFf), flip(kFf, 0.0);
      for (int r = 0; r < kFf; ++r) {
        double g = 0, u = 0, g_mag = 0, u_mag = 0;
        for (int c = 0; c < kEmbd; ++c) {
          const double gw = double(e.gate_f[size_t(r) * kEmbd + c]) * xg[c];
          const double uw = double(e.up_f[size_t(r) * kEmbd + c]) * xu[c];
          g += gw, u += uw, g_mag += std::fabs(gw), u_mag += std::fabs(uw);
        }
        const double sig = 1 / (1 + std::exp(-g)), silu = g * sig, dsilu = sig * (1 + g * (1 - sig));
        hd[r] = silu * u;
        h[r] = static_cast<float>(hd[r]);
        dh[r] = kRel * (std::fabs(dsilu * u) * g_mag + std::fabs(silu) * u_mag + std::fabs(hd[r]));
      }
      const GgmlType at = activation_type(e.down_type);
      if (quantized_acts && at != GgmlType::F32) {
        const auto hq = through_activation(e.down_type, h);
        const int bs = type_traits(at).block_size;
        for (int b0 = 0; b0 < kFf; b0 += bs) {
          double amax = 0, damax = 0;
          for (int c = b0; c < b0 + bs; ++c)
            if (std::fabs(double(h[c])) > amax) amax = std::fabs(double(h[c])), damax = dh[c];
          const double step = amax / 127;
          for (int c = b0; c < b0 + bs && step > 0; ++c) {
            // t moves by h's own error and by the block scale's (through amax).
            const double t = std::fabs(h[c]) / step;
            const double window = 2e-3 + 2 * (dh[c] / step + t * damax / amax);
            if (std::fabs(t - std::floor(t) - 0.5) < window) flip[c] = step * 1.01;
          }
        }
        for (int c = 0; c < kFf; ++c) hd[c] = hq[c], dh[c] = 0;  // h's own rounding is inside the flip window
      }
      const double w = p.weights[b][k];
      for (int r = 0; r < kEmbd; ++r) {
        double s = 0, mag = 0, prop = 0;
        for (int c = 0; c < kFf; ++c) {
          const double wd = e.down_f[size_t(r) * kFf + c];
          s += wd * hd[c], mag += std::fabs(wd * hd[c]), prop += std::fabs(wd) * (dh[c] + flip[c]);
        }
        out[int64_t{tok} * kEmbd + r] += w * s;
        tol[int64_t{tok} * kEmbd + r] += std::fabs(w) * (kRel * mag + prop);
      }
    }
  }
  return out;
}

// base + moe_ffn_cpu for each token over the batches that contain it.
std::vector<float> per_token(const Problem& p, const std::vector<float>& base, ThreadPool& pool, CpuActivations act) {
  std::vector<float> out = base, tmp(kEmbd);
  for (int32_t tok = 0; tok < kTokens; ++tok) {
    std::vector<ExpertView> views;
    std::vector<float> w;
    for (size_t b = 0; b < p.tokens.size(); ++b)
      for (size_t k = 0; k < p.tokens[b].size(); ++k)
        if (p.tokens[b][k] == tok) views.push_back(p.batches[b].expert), w.push_back(p.weights[b][k]);
    if (views.empty()) continue;
    moe_ffn_cpu(views.data(), w.data(), static_cast<int>(views.size()), p.x.data() + int64_t{tok} * kEmbd, tmp.data(),
                pool, act);
    for (int r = 0; r < kEmbd; ++r) out[int64_t{tok} * kEmbd + r] += tmp[r];
  }
  return out;
}

std::vector<float> batched(const Problem& p, const std::vector<float>& base, ThreadPool& pool, CpuActivations act) {
  std::vector<float> out = base;
  expert_ffn_batched(p.batches.data(), static_cast<int>(p.batches.size()), p.x.data(), kEmbd, out.data(), kEmbd, pool,
                     act);
  return out;
}

}  // namespace

// F32 activations: batched == double reference within f32 rounding (per
// element bound above, ~1e-5 relative), == moe_ffn_cpu token by token within
// twice that, on every target; bit-identical across thread counts and runs.
TEST(ExpertFfnBatched, F32MatchesReferenceAndPerToken) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const Problem p = make_problem(rng);
  const auto base = gaussian(rng, int64_t{kTokens} * kEmbd, 0.1f);
  std::vector<double> tol;
  const auto ref = reference(p, base, false, tol);
  ThreadPool pool1(1), pool3(3);
  const auto tok_out = per_token(p, base, pool3, CpuActivations::F32);
  for_each_target([&] {
    const auto out = batched(p, base, pool3, CpuActivations::F32);
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], ref[i], tol[i]) << "token " << i / kEmbd << " row " << i % kEmbd << " seed " << seed;
      ASSERT_NEAR(out[i], tok_out[i], 2 * tol[i]) << "token " << i / kEmbd << " row " << i % kEmbd << " seed " << seed;
    }
    EXPECT_EQ(batched(p, base, pool1, CpuActivations::F32), out);
    EXPECT_EQ(batched(p, base, pool3, CpuActivations::F32), out);
  });
}

// Q8 activations: batched == the quantized-activation reference within its
// bound (f32 rounding plus one quant step per ambiguous h value), within twice
// that of moe_ffn_cpu token by token, and within the Q8 error of the exact
// reference (4% relative L2, as the existing moe_ffn_cpu test).
TEST(ExpertFfnBatched, Q8MatchesReferenceAndPerToken) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const Problem p = make_problem(rng);
  const std::vector<float> base(int64_t{kTokens} * kEmbd, 0.f);
  std::vector<double> tol_q, tol;
  const auto ref_q = reference(p, base, true, tol_q);
  const auto ref = reference(p, base, false, tol);
  ThreadPool pool1(1), pool3(3);
  const auto tok_out = per_token(p, base, pool3, CpuActivations::Q8);
  const auto out = batched(p, base, pool3, CpuActivations::Q8);
  double err_sq = 0, ref_sq = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], ref_q[i], tol_q[i]) << "token " << i / kEmbd << " row " << i % kEmbd << " seed " << seed;
    ASSERT_NEAR(out[i], tok_out[i], 2 * tol_q[i]) << "token " << i / kEmbd << " row " << i % kEmbd << " seed " << seed;
    err_sq += (out[i] - ref[i]) * (out[i] - ref[i]);
    ref_sq += ref[i] * ref[i];
  }
  ASSERT_GT(ref_sq, 0.0);
  EXPECT_LT(std::sqrt(err_sq / ref_sq), 0.04) << "seed " << seed;
  EXPECT_EQ(batched(p, base, pool1, CpuActivations::Q8), out);
}

// No batches, or only empty ones (even without pointers), leave out untouched.
TEST(ExpertFfnBatched, EmptyBatchesAreNoOps) {
  ThreadPool pool(2);
  std::vector<float> x(kEmbd, 1.f), out(kEmbd, 3.f);
  expert_ffn_batched(nullptr, 0, x.data(), kEmbd, out.data(), kEmbd, pool);
  const ExpertBatch empty[3] = {};
  expert_ffn_batched(empty, 3, x.data(), kEmbd, out.data(), kEmbd, pool, CpuActivations::Q8);
  for (float v : out) EXPECT_EQ(v, 3.f);
}

TEST(ExpertFfnBatched, RejectsBadBatches) {
  std::mt19937 rng(5);
  const RandomExpert a = make_expert(rng, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, kEmbd, kFf);
  const RandomExpert b = make_expert(rng, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, kEmbd, 512);
  ThreadPool pool(2);
  std::vector<float> x(4 * kEmbd, 1.f), out(4 * kEmbd, 0.f);
  const int32_t tokens[2] = {0, 3}, bad_tokens[2] = {0, -1};
  const float weights[2] = {0.5f, 0.5f};
  auto run = [&](std::vector<ExpertBatch> batches, int64_t stride = kEmbd) {
    expert_ffn_batched(batches.data(), static_cast<int>(batches.size()), x.data(), stride, out.data(), stride, pool);
  };
  const ExpertBatch good{a.view(kEmbd, kFf), tokens, weights, 2};
  run({good});
  ExpertBatch mismatched{b.view(kEmbd, 512), tokens, weights, 2};
  EXPECT_THROW(run({good, mismatched}), Error);
  ExpertBatch negative = good;
  negative.tokens = bad_tokens;
  EXPECT_THROW(run({negative}), Error);
  ExpertBatch no_weights = good;
  no_weights.weights = nullptr;
  EXPECT_THROW(run({no_weights}), Error);
  ExpertBatch bad_n = good;
  bad_n.n = -1;
  EXPECT_THROW(run({bad_n}), Error);
  ExpertBatch bad_type = good;
  bad_type.expert.down_type = GgmlType::Q8_1;
  EXPECT_THROW(run({bad_type}), Error);
  EXPECT_THROW(run({good}, kEmbd - 1), Error);
}
