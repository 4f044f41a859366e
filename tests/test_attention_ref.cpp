// The CPU reference attention (engine/forward/attention_ref.h) against a
// direct double-precision computation of llama.cpp's semantics on fresh random
// inputs: sinks (unscaled logits in the max and the denominator, mass
// dropped), sliding windows (key j visible from p when p - j < window),
// grouped-query heads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/forward/attention_ref.h"
#include "tests/seed.h"

using namespace vkmoe;

namespace {

struct Case {
  int D, NH, NKV, p;
  uint32_t window;
  bool sinks;
  std::string str() const {
    return "D=" + std::to_string(D) + " heads=" + std::to_string(NH) + "/" + std::to_string(NKV) +
           " p=" + std::to_string(p) + " window=" + std::to_string(window) + (sinks ? " sinks" : "");
  }
};

// Straight from the definition, in double.
std::vector<double> direct(const Case& c, const std::vector<float>& q, const std::vector<float>& k,
                           const std::vector<float>& v, int stride, float scale, const std::vector<float>& sinks) {
  std::vector<double> out(size_t(c.NH) * c.D, 0.0);
  for (int h = 0; h < c.NH; ++h) {
    const int g = h / (c.NH / c.NKV);
    std::vector<double> s;
    std::vector<int> keys;
    for (int j = 0; j <= c.p; ++j) {
      if (c.window > 0 && c.p - j >= int(c.window)) continue;  // llama.cpp's is_masked_swa (standard)
      double d = 0;
      for (int i = 0; i < c.D; ++i) d += double(q[h * c.D + i]) * k[size_t(j) * stride + g * c.D + i];
      s.push_back(d * scale);
      keys.push_back(j);
    }
    double mx = -INFINITY;
    for (double x : s) mx = std::max(mx, x);
    if (c.sinks) mx = std::max(mx, double(sinks[h]));
    double den = c.sinks ? std::exp(double(sinks[h]) - mx) : 0.0;
    for (double x : s) den += std::exp(x - mx);
    for (size_t n = 0; n < keys.size(); ++n) {
      const double w = std::exp(s[n] - mx) / den;
      for (int i = 0; i < c.D; ++i) out[h * c.D + i] += w * v[size_t(keys[n]) * stride + g * c.D + i];
    }
  }
  return out;
}

}  // namespace

// float scores and weights, double denominator: relative error (to the
// largest output) measured up to about 1e-6; 1e-5 is the bound.
TEST(AttentionRef, MatchesDirectDoubleWithSinksWindowsAndGqa) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  double worst = 0;
  const int gqa[][2] = {{4, 4}, {8, 2}, {6, 1}};
  for (int D : {16, 64, 128})
    for (int gi = 0; gi < 3; ++gi)
      for (int p : {0, 5, 300})
        for (uint32_t window : {0u, 1u, 3u, 64u, 100000u})
          for (bool sinks : {false, true}) {
            const Case c{D, gqa[gi][0], gqa[gi][1], p, window, sinks};
            SCOPED_TRACE(c.str());
            const int stride = c.NKV * D + 3;  // padded rows
            std::vector<float> q(size_t(c.NH) * D), k(size_t(p + 1) * stride), v(k.size()), sk(c.NH);
            for (auto& x : q) x = 2 * nd(rng);
            for (auto& x : k) x = nd(rng);
            for (auto& x : v) x = nd(rng);
            for (auto& x : sk) x = 3 * nd(rng) + 1;
            if (sinks) sk[0] = 15;  // a sink above every score: the max is the sink's
            const float scale = 1.f / std::sqrt(float(D));
            AttentionRefShape s;
            s.head_dim = D;
            s.n_head = c.NH;
            s.n_head_kv = c.NKV;
            s.scale = scale;
            s.window = window;
            s.sinks = sinks ? sk.data() : nullptr;
            std::vector<float> got(size_t(c.NH) * D, NAN), scratch;
            attend_ref(q.data(), k.data(), v.data(), stride, p, s, got.data(), scratch);
            const auto want = direct(c, q, k, v, stride, scale, sk);
            double err = 0, mag = 1e-30;
            for (size_t i = 0; i < want.size(); ++i) {
              err = std::max(err, std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - want[i]));
              mag = std::max(mag, std::fabs(want[i]));
            }
            EXPECT_LT(err / mag, 1e-5);
            worst = std::max(worst, err / mag);
          }
  RecordProperty("worst_rel_err", std::to_string(worst));
  std::printf("worst relative error %.3g\n", worst);
}

TEST(AttentionRef, WindowEdgeCasesAreExact) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  const int D = 32, NH = 4, NKV = 2, p = 40, stride = NKV * D;
  std::vector<float> q(NH * D), k(size_t(p + 1) * stride), v(k.size());
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  // Keys before the window are never read: NaN there must not show.
  std::vector<float> kn = k, vn = v;
  for (int j = 0; j <= p - 7; ++j)
    for (int i = 0; i < stride; ++i) kn[size_t(j) * stride + i] = vn[size_t(j) * stride + i] = NAN;
  AttentionRefShape s{D, NH, NKV, 0.2f};
  std::vector<float> scratch, full(NH * D), wide(NH * D), one(NH * D), seven(NH * D), seven_nan(NH * D);
  attend_ref(q.data(), k.data(), v.data(), stride, p, s, full.data(), scratch);
  s.window = p + 1;  // covers 0..p: the same arithmetic as no window
  attend_ref(q.data(), k.data(), v.data(), stride, p, s, wide.data(), scratch);
  EXPECT_EQ(full, wide);
  s.window = 1;  // only the query's own position: its value row
  attend_ref(q.data(), k.data(), v.data(), stride, p, s, one.data(), scratch);
  for (int h = 0; h < NH; ++h)
    for (int i = 0; i < D; ++i) ASSERT_EQ(one[h * D + i], v[size_t(p) * stride + h / 2 * D + i]);
  s.window = 7;
  attend_ref(q.data(), k.data(), v.data(), stride, p, s, seven.data(), scratch);
  attend_ref(q.data(), kn.data(), vn.data(), stride, p, s, seven_nan.data(), scratch);
  EXPECT_EQ(seven, seven_nan);
  EXPECT_NE(seven, full);
  // A sink far below every score changes nothing; a sink far above leaves ~0.
  std::vector<float> low(NH, -1e4f), high(NH, 1e4f), with(NH * D);
  s.window = 0;
  s.sinks = low.data();
  attend_ref(q.data(), k.data(), v.data(), stride, p, s, with.data(), scratch);
  EXPECT_EQ(with, full);
  s.sinks = high.data();
  attend_ref(q.data(), k.data(), v.data(), stride, p, s, with.data(), scratch);
  for (float x : with) EXPECT_EQ(x, 0.f);
}

// Without window and sinks attend_ref keeps the arithmetic of the loop it
// replaced in CpuForward::eval (copied here): the same bits.
TEST(AttentionRef, PlainCausalKeepsFormerCpuForwardBits) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 1);
  const int D = 64, NH = 8, NKV = 2, KV = NKV * D, group = NH / NKV, n_ctx = 200;
  std::vector<float> q(NH * D), kc(size_t(n_ctx) * KV), vc(kc.size());
  for (auto& x : q) x = 2 * nd(rng);
  for (auto& x : kc) x = nd(rng);
  for (auto& x : vc) x = nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int p : {0, 1, 77, n_ctx - 1}) {
    std::vector<float> scores(n_ctx), att(NH * D), got(NH * D), scratch;
    for (int h = 0; h < NH; ++h) {  // the former inline loop
      const float* qh = &q[h * D];
      const int kvh = h / group;
      float mx = -INFINITY;
      for (int j = 0; j <= p; ++j) {
        const float* kj = kc.data() + size_t(j) * KV + kvh * D;
        float s = 0;
        for (int i = 0; i < D; ++i) s += qh[i] * kj[i];
        scores[j] = s * scale;
        mx = std::max(mx, scores[j]);
      }
      double sum = 0;
      for (int j = 0; j <= p; ++j) sum += scores[j] = std::exp(scores[j] - mx);
      float* out = &att[h * D];
      std::fill(out, out + D, 0.f);
      for (int j = 0; j <= p; ++j) {
        const float w = static_cast<float>(scores[j] / sum);
        const float* vj = vc.data() + size_t(j) * KV + kvh * D;
        for (int i = 0; i < D; ++i) out[i] += w * vj[i];
      }
    }
    AttentionRefShape s{D, NH, NKV, scale};
    attend_ref(q.data(), kc.data(), vc.data(), KV, p, s, got.data(), scratch);
    EXPECT_EQ(got, att) << "p " << p;
  }
}
