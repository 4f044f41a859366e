// all_finite against std::isfinite: every length up to past one unrolled
// block, a NaN / Inf / huge finite value at every position.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/finite_check.h"
#include "tests/seed.h"

namespace vkmoe {
namespace {

TEST(FiniteCheck, MatchesIsfiniteAtEveryPosition) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 100);
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, -std::nanf("7")};
  for (size_t n = 0; n <= 80; ++n) {
    std::vector<float> x(n + 1);
    for (float& v : x) v = nd(rng);
    x[n] = NAN;  // past the end: must not be read
    EXPECT_TRUE(all_finite(x.data(), n)) << n;
    for (size_t i = 0; i < n; ++i) {
      const float keep = x[i];
      x[i] = kBad[rng() % 4];
      EXPECT_FALSE(all_finite(x.data(), n)) << "n " << n << " at " << i;
      x[i] = std::numeric_limits<float>::max();  // finite extremes stay finite
      EXPECT_TRUE(all_finite(x.data(), n)) << "n " << n << " at " << i;
      x[i] = keep;
    }
  }
}

}  // namespace
}  // namespace vkmoe
