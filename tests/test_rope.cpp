// RoPE (cpu/rope.h) with ggml's semantics: values worked out by hand for a
// tiny head (adjacent and NeoX pairs, partial rotary), plain RoPE as the
// neutral YaRN, and YaRN's interpolation, ramp and magnitude scaling at
// chosen dims computed from the formulas in double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu/rope.h"
#include "tests/seed.h"

using namespace vkmoe;

namespace {

// head_dim 6, n_rot 4, theta 100: theta_scale 0.1, so at pos 3 pair 0 turns by
// 3 rad and pair 1 by 0.3 rad; dims 4 and 5 pass through.
TEST(Rope, PartialAdjacentPairs) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  RopeParams p;
  p.n_rot = 4;
  p.theta = 100;
  rope(v.data(), 6, 3, p);
  const double c0 = std::cos(3.0), s0 = std::sin(3.0), c1 = std::cos(0.3), s1 = std::sin(0.3);
  const double want[] = {1 * c0 - 2 * s0, 1 * s0 + 2 * c0, 3 * c1 - 4 * s1, 3 * s1 + 4 * c1, 5, 6};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << "dim " << i;
  EXPECT_EQ(v[4], 5.f);
  EXPECT_EQ(v[5], 6.f);
}

TEST(Rope, PartialNeoxPairs) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  RopeParams p;
  p.n_rot = 4;
  p.neox = true;
  p.theta = 100;
  rope(v.data(), 6, 3, p);
  const double c0 = std::cos(3.0), s0 = std::sin(3.0), c1 = std::cos(0.3), s1 = std::sin(0.3);
  // Pairs (0, 2) by 3 rad and (1, 3) by 0.3 rad.
  const double want[] = {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 1 * s0 + 3 * c0, 2 * s1 + 4 * c1, 5, 6};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << "dim " << i;
  EXPECT_EQ(v[4], 5.f);
  EXPECT_EQ(v[5], 6.f);
}

TEST(Rope, FullRotaryPlain) {
  // head_dim 4, theta 10^4: angles pos and pos / 100.
  std::vector<float> v = {0.5f, -1, 2, 0.25f};
  RopeParams p;
  p.n_rot = 4;
  rope(v.data(), 4, 2, p);
  const double c0 = std::cos(2.0), s0 = std::sin(2.0), c1 = std::cos(0.02), s1 = std::sin(0.02);
  const double want[] = {0.5 * c0 + s0, 0.5 * s0 - c0, 2 * c1 - 0.25 * s1, 2 * s1 + 0.25 * c1};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << "dim " << i;
  // Position 0 is the identity.
  std::vector<float> u = {0.5f, -1, 2, 0.25f};
  rope(u.data(), 4, 0, p);
  EXPECT_EQ(u, (std::vector<float>{0.5f, -1, 2, 0.25f}));
}

TEST(Rope, NeutralYarnIsPlain) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  for (int iter = 0; iter < 50; ++iter) {
    const int D = 2 * (1 + rng() % 64), pos = rng() % 100000;
    RopeParams plain;
    plain.n_rot = 2 * (1 + rng() % (D / 2));
    plain.neox = rng() % 2;
    plain.theta = iter % 2 ? 1e6f : 1e4f;
    RopeParams yarn = plain;  // ext_factor 0, freq_scale 1: the YaRN fields change nothing
    yarn.beta_fast = 16;
    yarn.beta_slow = 2;
    yarn.n_ctx_orig = 4096;
    std::vector<float> a(D);
    for (float& x : a) x = nd(rng);
    std::vector<float> b = a;
    rope(a.data(), D, pos, plain);
    rope(b.data(), D, pos, yarn);
    ASSERT_EQ(a, b) << "D " << D << " n_rot " << plain.n_rot << " pos " << pos;
  }
}

// ggml applies attn_factor to cos and sin even without YaRN; linear scaling
// (freq_scale, ext_factor 0) divides the angles.
TEST(Rope, LinearScalingAndAttnFactor) {
  std::vector<float> v = {1, 2, 3, 4};
  RopeParams p;
  p.n_rot = 2;
  p.freq_scale = 0.25f;
  p.attn_factor = 0.5f;
  rope(v.data(), 4, 8, p);  // angle 8 * 0.25 = 2
  EXPECT_NEAR(v[0], 0.5 * (std::cos(2.0) - 2 * std::sin(2.0)), 1e-6);
  EXPECT_NEAR(v[1], 0.5 * (std::sin(2.0) + 2 * std::cos(2.0)), 1e-6);
  EXPECT_EQ(v[2], 3.f);
  EXPECT_EQ(v[3], 4.f);
}

// YaRN (n_rot 64, theta 10^4, n_ctx_orig 4096, betas 32 / 1): correction dims
// floor(64 ln(4096 / (32 * 2 pi)) / (2 ln 10^4)) = 10 and ceil(... / (1 * 2 pi) ...) = 23.
// Below dim 10 the angle is extrapolated (pos * freq), above 23 interpolated
// (freq_scale * pos * freq), linear in between; cos and sin scale by
// attn_factor * (1 + 0.1 ln(1 / freq_scale)).
TEST(Rope, YarnKnownValues) {
  RopeParams p;
  p.n_rot = 64;
  p.theta = 10000;
  p.freq_scale = 0.25f;
  p.ext_factor = 1;
  p.attn_factor = 0.9f;
  p.n_ctx_orig = 4096;
  const double pi = 3.14159265358979323846;
  auto corr_dim = [&](double beta) { return 64 * std::log(4096 / (beta * 2 * pi)) / (2 * std::log(10000.0)); };
  const double lo = std::floor(corr_dim(32)), hi = std::ceil(corr_dim(1));
  ASSERT_EQ(lo, 10);
  ASSERT_EQ(hi, 23);
  const RopeConsts c = rope_consts(p);
  EXPECT_EQ(c.corr0, 10.f);
  EXPECT_EQ(c.corr1, 23.f);
  const double mscale = 0.9 * (1 + 0.1 * std::log(4.0));
  EXPECT_NEAR(c.mscale, mscale, 1e-6);

  const int pos = 1000;
  std::vector<float> v(64);
  for (int i = 0; i < 64; ++i) v[i] = 1 + 0.01f * i;
  std::vector<float> r = v;
  rope(r.data(), 64, pos, p);
  for (int i : {5, 15, 28}) {
    const double extrap = pos * std::pow(10000.0, -2.0 * i / 64), interp = 0.25 * extrap;
    const double ramp = 1 - std::min(1.0, std::max(0.0, (i - lo) / (hi - lo)));  // 1, 8/13, 0
    const double ang = interp * (1 - ramp) + extrap * ramp;
    const double x0 = v[2 * i], x1 = v[2 * i + 1];
    // The float angle (i successive products) is within i ulps: |ang| 10^3 * 3e-6.
    const double tol = 2e-5 * (1 + std::fabs(ang));
    EXPECT_NEAR(r[2 * i], mscale * (x0 * std::cos(ang) - x1 * std::sin(ang)), tol) << "pair " << i;
    EXPECT_NEAR(r[2 * i + 1], mscale * (x0 * std::sin(ang) + x1 * std::cos(ang)), tol) << "pair " << i;
  }
}

}  // namespace
