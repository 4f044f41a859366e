#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/sample/sampler.h"
#include "tests/seed.h"

namespace vkmoe {
namespace {

uint64_t fresh_seed() {
  const uint64_t s = test::test_seed();
  return s == 0 ? 1 : s;
}

std::vector<float> random_logits(std::mt19937_64& rng, int n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> l(n);
  for (float& x : l) x = d(rng);
  return l;
}

int argmax_lowest(const std::vector<float>& l) {
  int best = 0;
  for (int k = 1; k < static_cast<int>(l.size()); ++k)
    if (l[k] > l[best]) best = k;
  return best;
}

TEST(SamplerGreedy, PicksArgmaxWithLowestIdOnTies) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Sampler s(SamplerParams{});  // temperature 0: greedy
  for (int trial = 0; trial < 50; ++trial) {
    auto l = random_logits(rng, 5000, -10.f, 10.f);
    if (trial % 2 == 0) {  // plant a tie for the maximum
      std::uniform_int_distribution<int> pos(0, 4999);
      const int a = pos(rng), b = pos(rng);
      l[a] = l[b] = 20.f;
    }
    EXPECT_EQ(s.sample(l.data(), 5000), argmax_lowest(l));
  }
  EXPECT_THROW(s.sample(nullptr, 0), Error);
}

TEST(SamplerRandom, FixedSeedIsDeterministic) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const auto l = random_logits(rng, 1000, -1.f, 1.f);
  SamplerParams p;
  p.temperature = 1.f;
  p.top_k = 0;
  p.top_p = 1.f;
  p.seed = seed;
  Sampler a(p), b(p);
  p.seed = seed + 1;
  Sampler c(p);
  std::vector<int32_t> da, db, dc;
  for (int k = 0; k < 200; ++k) {
    da.push_back(a.sample(l.data(), 1000));
    db.push_back(b.sample(l.data(), 1000));
    dc.push_back(c.sample(l.data(), 1000));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);  // 200 draws over ~1000 near-uniform choices: equal with negligible odds
  EXPECT_EQ(a.seed(), seed);
  EXPECT_NE(Sampler(SamplerParams{}).seed(), 0u);  // seed 0 picks a random one
}

TEST(SamplerRandom, TopK1EqualsGreedy) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  SamplerParams p;
  p.temperature = 2.f;
  p.top_k = 1;
  p.seed = seed;
  Sampler s(p);
  for (int trial = 0; trial < 100; ++trial) {
    const auto l = random_logits(rng, 300, -1.f, 1.f);
    EXPECT_EQ(s.sample(l.data(), 300), argmax_lowest(l));
  }
}

// Pearson chi-square of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& prob, int n) {
  double chi2 = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const double e = prob[k] * n;
    chi2 += (counts[k] - e) * (counts[k] - e) / e;
  }
  return chi2;
}

TEST(SamplerRandom, FrequenciesMatchTemperatureSoftmax) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  constexpr int kVocab = 8, kDraws = 100000;
  const auto l = random_logits(rng, kVocab, -2.f, 2.f);
  for (float temperature : {0.7f, 1.5f}) {
    SamplerParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.f;
    p.seed = seed;
    Sampler s(p);
    std::vector<double> prob(kVocab);
    double sum = 0;
    for (int k = 0; k < kVocab; ++k) sum += prob[k] = std::exp(l[k] / temperature);
    for (double& x : prob) x /= sum;
    std::vector<int> counts(kVocab, 0);
    for (int d = 0; d < kDraws; ++d) ++counts[s.sample(l.data(), kVocab)];
    // 7 degrees of freedom: P(chi2 > 45) < 2e-7 for a correct sampler.
    EXPECT_LT(chi_square(counts, prob, kDraws), 45.0) << "temperature " << temperature;
  }
}

// Probabilities 0.5, 0.3, 0.15, 0.05 (logits are their logs, temperature 1).
std::vector<float> four_way_logits() {
  return {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
}

TEST(SamplerRandom, TopPExcludesTheTail) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto l = four_way_logits();
  SamplerParams p;
  p.temperature = 1.f;
  p.top_k = 0;
  p.top_p = 0.7f;  // 0.5 < 0.7 <= 0.8: keeps the two most likely
  p.seed = seed;
  Sampler s(p);
  const auto dist = s.distribution(l.data(), 4);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_EQ(dist[0].first, 0);
  EXPECT_NEAR(dist[0].second, 0.625f, 1e-5f);
  constexpr int kDraws = 20000;
  std::vector<int> counts(4, 0);
  for (int d = 0; d < kDraws; ++d) ++counts[s.sample(l.data(), 4)];
  EXPECT_EQ(counts[2] + counts[3], 0);
  // Token 0 should come 62.5% of the time; allow 6 standard deviations.
  const double sd = std::sqrt(kDraws * 0.625 * 0.375);
  EXPECT_NEAR(counts[0], kDraws * 0.625, 6 * sd);
}

TEST(SamplerRandom, MinPAndTopKCut) {
  const auto l = four_way_logits();
  SamplerParams p;
  p.temperature = 1.f;
  p.top_k = 0;
  p.top_p = 1.f;
  p.min_p = 0.2f;  // floor 0.1: drops the 0.05 token
  EXPECT_EQ(Sampler(p).distribution(l.data(), 4).size(), 3u);
  p.min_p = 0.f;
  p.top_k = 2;
  const auto dist = Sampler(p).distribution(l.data(), 4);
  ASSERT_EQ(dist.size(), 2u);
  EXPECT_NEAR(dist[1].second, 0.375f, 1e-5f);
}

TEST(SamplerGreedy, RepeatPenaltyDemotesRecentTokens) {
  SamplerParams p;
  p.repeat_penalty = 1.5f;
  p.repeat_last_n = 1;
  {
    Sampler s(p);
    const float l[] = {2.0f, 1.9f, -5.f};  // 2.0 / 1.5 < 1.9
    EXPECT_EQ(s.sample(l, 3), 0);
    s.accept(0);
    EXPECT_EQ(s.sample(l, 3), 1);
    s.accept(1);  // only the last token is remembered now
    EXPECT_EQ(s.sample(l, 3), 0);
  }
  {
    Sampler s(p);
    const float l[] = {-1.0f, -1.2f};  // negative logits are multiplied: -1.5 < -1.2
    s.accept(0);
    EXPECT_EQ(s.sample(l, 2), 1);
  }
}

}  // namespace
}  // namespace vkmoe
