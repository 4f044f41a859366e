// MoE router (cpu/moe_route.h): values worked out by hand for each gating,
// selection bias, group-limited selection, renormalization (and its clamp)
// and scaling, and a brute-force check of the softmax top-k on fresh random
// rows (seed printed).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/moe_route.h"
#include "tests/seed.h"

using namespace vkmoe;

namespace {

struct Routed {
  std::vector<int> ids;
  std::vector<float> w;
};
Routed route(const std::vector<float>& l, const std::vector<float>& bias, int k, const RouterParams& p) {
  Routed r{std::vector<int>(k), std::vector<float>(k)};
  route_topk(l.data(), bias.empty() ? nullptr : bias.data(), int(l.size()), k, p, r.ids.data(), r.w.data());
  return r;
}
void expect_weights(const Routed& r, const std::vector<double>& want) {
  ASSERT_EQ(r.w.size(), want.size());
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(r.w[j], want[j], 1e-6 * std::fabs(want[j])) << "rank " << j;
}
using Ids = std::vector<int>;

TEST(MoeRoute, SigmoidBiasChangesSelectionNotWeights) {
  // sigmoid(ln 3) = 0.75, sigmoid(0) = 0.5, sigmoid(-ln 3) = 0.25.
  const float l3 = std::log(3.f);
  const std::vector<float> l = {l3, 0.f, -l3, 0.f};
  const RouterParams p{Gating::Sigmoid};
  Routed r = route(l, {}, 2, p);
  EXPECT_EQ(r.ids, (Ids{0, 1}));  // 1 and 3 tie: lower index
  expect_weights(r, {0.75, 0.5});
  // Scores with bias: 0.75, 0.5, 0.85, 0.6; weights stay the unbiased sigmoids.
  r = route(l, {0.f, 0.f, 0.6f, 0.1f}, 2, p);
  EXPECT_EQ(r.ids, (Ids{2, 0}));
  expect_weights(r, {0.25, 0.75});
  r = route(l, {0.f, 0.f, 0.6f, 0.1f}, 3, p);
  EXPECT_EQ(r.ids, (Ids{2, 0, 3}));
  expect_weights(r, {0.25, 0.75, 0.5});
}

TEST(MoeRoute, NormalizeAndScale) {
  const float l3 = std::log(3.f);
  const std::vector<float> l = {l3, 0.f, -l3, -1.f};
  expect_weights(route(l, {}, 2, RouterParams{Gating::Sigmoid, true}), {0.6, 0.4});
  expect_weights(route(l, {}, 2, RouterParams{Gating::Sigmoid, true, 2.5f}), {1.5, 1.0});
  expect_weights(route(l, {}, 2, RouterParams{Gating::Sigmoid, false, 2.5f}), {1.875, 1.25});
  expect_weights(route(l, {}, 2, RouterParams{Gating::Sigmoid, false, 0.f}), {0.75, 0.5});  // 0: unset
  // Softmax over e^ln3, e^0, e^-ln3, e^-1: probs 3/z, 1/z, ...
  const double z = 3 + 1 + 1 / 3.0 + std::exp(-1.0);
  expect_weights(route(l, {}, 2, RouterParams{Gating::Softmax}), {3 / z, 1 / z});
  expect_weights(route(l, {}, 2, RouterParams{Gating::Softmax, true}), {0.75, 0.25});
  expect_weights(route(l, {}, 2, RouterParams{Gating::Softmax, true, 4.f}), {3.0, 1.0});
}

TEST(MoeRoute, NormalizeClampsTheSum) {
  // Sigmoid weights summing below 6.103515625e-5 are divided by that, not by their sum.
  const double s20 = 1 / (1 + std::exp(20.0)), s21 = 1 / (1 + std::exp(21.0));
  const Routed r = route({-20.f, -21.f, -30.f, -40.f}, {}, 2, RouterParams{Gating::Sigmoid, true});
  EXPECT_EQ(r.ids, (Ids{0, 1}));
  expect_weights(r, {s20 / 6.103515625e-5, s21 / 6.103515625e-5});
  // Softmax with a bias that selects two improbable experts: probs e^-20 / z each.
  const double z = 1 + std::exp(-10.0) + 2 * std::exp(-20.0), p = std::exp(-20.0) / z;
  const Routed b = route({10.f, 0.f, -10.f, -10.f}, {0.f, 0.f, 2.f, 2.f}, 2, RouterParams{Gating::Softmax, true});
  EXPECT_EQ(b.ids, (Ids{2, 3}));
  expect_weights(b, {p / 6.103515625e-5, p / 6.103515625e-5});
}

TEST(MoeRoute, SoftmaxWeightIsOverTheSelected) {
  // softmax(3, 2) = (e / (e + 1), 1 / (e + 1)), whatever the other logits.
  const double e = std::exp(1.0);
  for (float other : {0.f, 1.9f, -50.f}) {
    const Routed r = route({other, 3.f, 2.f, other}, {}, 2, RouterParams{Gating::SoftmaxWeight});
    EXPECT_EQ(r.ids, (Ids{1, 2}));
    expect_weights(r, {e / (e + 1), 1 / (e + 1)});
  }
  // Bias picks expert 0 (scores 3.5, 3, 2, 1.9); its weight comes from its logit 1.5.
  const Routed r = route({1.5f, 3.f, 2.f, 1.9f}, {2.f, 0.f, 0.f, 0.f}, 2, RouterParams{Gating::SoftmaxWeight, true});
  EXPECT_EQ(r.ids, (Ids{0, 1}));
  const double a = std::exp(-1.5);
  expect_weights(r, {a / (1 + a), 1 / (1 + a)});
}

TEST(MoeRoute, GroupLimitedSelection) {
  // 4 groups of 2 (scores = logits): group sums 0, 2, 3, -2; the 2 best are groups 2 and 1,
  // so expert 0 (the best score) is out.
  const std::vector<float> l = {5, -5, 1, 1, 3, 0, -1, -1};
  RouterParams p{Gating::SoftmaxWeight};
  p.n_group = 4;
  p.topk_group = 2;
  Routed r = route(l, {}, 2, p);
  EXPECT_EQ(r.ids, (Ids{4, 2}));
  const double e2 = std::exp(2.0);
  expect_weights(r, {e2 / (e2 + 1), 1 / (e2 + 1)});
  r = route(l, {}, 4, p);
  EXPECT_EQ(r.ids, (Ids{4, 2, 3, 5}));
  // Groups of 3 score their 2 best: 5 + -5 = 0 < 1.5 + 1.5 = 3 < 2 + 2 = 4: only group 1 stays.
  p.n_group = 3;
  p.topk_group = 1;
  r = route({5, -5, -5, 2, 2, -9, 1.5f, 1.5f, 1.5f}, {}, 2, p);
  EXPECT_EQ(r.ids, (Ids{3, 4}));
  expect_weights(r, {0.5, 0.5});
  // Groups rank by the biased sigmoid scores: bias lifts group 0 (0.5 + 0.5 + 2 * 0.3).
  RouterParams s{Gating::Sigmoid};
  s.n_group = 2;
  s.topk_group = 1;
  const float l3 = std::log(3.f);
  r = route({0, 0, l3, l3}, {0.3f, 0.3f, 0, 0}, 1, s);
  EXPECT_EQ(r.ids, (Ids{0}));
  expect_weights(r, {0.5});
  r = route({0, 0, l3, l3}, {}, 1, s);
  EXPECT_EQ(r.ids, (Ids{2}));
  expect_weights(r, {0.75});
}

// The margin is the gap a rounding difference would have to close to change
// the choice: k-th against (k+1)-th expert score, and with groups also the
// last kept group against the first dropped one.
TEST(MoeRoute, MarginToATie) {
  auto margin = [](const std::vector<float>& l, int k, const RouterParams& p) {
    std::vector<int> ids(k);
    std::vector<float> w(k);
    float m = -1;
    route_topk(l.data(), nullptr, int(l.size()), k, p, ids.data(), w.data(), &m);
    return m;
  };
  const RouterParams soft{Gating::Softmax};
  EXPECT_FLOAT_EQ(margin({0.5f, 2.f, 1.25f, -1.f}, 2, soft), 0.75f);  // 1.25 against 0.5
  EXPECT_FLOAT_EQ(margin({0.5f, 2.f, 1.25f, -1.f}, 1, soft), 0.75f);  // 2 against 1.25
  EXPECT_EQ(margin({3.f, 3.f, 1.f}, 1, soft), 0.f);                   // an exact tie
  EXPECT_EQ(margin({3.f, 1.f}, 2, soft), std::numeric_limits<float>::infinity());  // nothing left out
  // Groups of 2 (sums 0, 2, 3, -2): groups 2 and 1 kept, group 0 (0) the best dropped, so
  // 2 - 0 = 2; inside the kept groups the experts 4, 2 (3, 1) against 3 (1): 0.
  RouterParams g{Gating::SoftmaxWeight};
  g.n_group = 4;
  g.topk_group = 2;
  EXPECT_EQ(margin({5, -5, 1, 1, 3, 0, -1, -1}, 2, g), 0.f);
  EXPECT_FLOAT_EQ(margin({5, -5, 1, 1.5f, 3, 0, -1, -1}, 2, g), 0.5f);  // 1.5 against 1
  EXPECT_FLOAT_EQ(margin({5, -5, 1, 1.5f, 3, 0, -1, -1}, 1, g), 1.5f);  // 3 against 1.5
  g.topk_group = 1;  // group 2 (3) kept against group 1 (2.5)
  EXPECT_FLOAT_EQ(margin({5, -5, 1, 1.5f, 3, 0, -1, -1}, 1, g), 0.5f);
}

TEST(MoeRoute, NonFiniteLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // All NaN reads as all -inf: every p is 1 (l == max), ids in index order.
  Routed r = route(std::vector<float>(8, nan), {}, 2, RouterParams{});
  EXPECT_EQ(r.ids, (Ids{0, 1}));
  expect_weights(r, {0.125, 0.125});
  expect_weights(route(std::vector<float>(8, nan), {}, 2, RouterParams{Gating::Softmax, true}), {0.5, 0.5});
  // Two +inf share the mass.
  r = route({1.f, inf, nan, inf}, {}, 3, RouterParams{});
  EXPECT_EQ(r.ids, (Ids{1, 3, 0}));
  expect_weights(r, {0.5, 0.5, 0.0});
  r = route({-inf, nan, 0.f, -inf}, {}, 2, RouterParams{Gating::Sigmoid});
  EXPECT_EQ(r.ids, (Ids{2, 0}));
  expect_weights(r, {0.5, 0.0});
}

TEST(MoeRoute, TopKMatchesBruteForce) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 2);
  for (int iter = 0; iter < 200; ++iter) {
    const int n = 4 + rng() % 60, k = 1 + rng() % std::min(n, 8);
    std::vector<float> l(n);
    for (auto& v : l) v = nd(rng);
    if (iter % 10 == 0) l[1] = l[0];  // ties: lower index first
    for (bool norm : {false, true}) {
      const Routed r = route(l, {}, k, RouterParams{Gating::Softmax, norm});
      double z = 0;
      for (float v : l) z += std::exp(double(v));
      std::vector<bool> used(n);
      double sel = 0;
      for (int j = 0; j < k; ++j) {
        int best = -1;
        for (int e = 0; e < n; ++e)
          if (!used[e] && (best < 0 || l[e] > l[best])) best = e;
        used[best] = true;
        ASSERT_EQ(r.ids[j], best);
        sel += std::exp(double(l[best]));
      }
      for (int j = 0; j < k; ++j) EXPECT_NEAR(r.w[j], std::exp(double(l[r.ids[j]])) / (norm ? sel : z), 1e-5);
    }
  }
}

}  // namespace
