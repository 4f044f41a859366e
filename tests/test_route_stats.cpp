#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "base/error.h"
#include "engine/offload/route_stats.h"
#include "tests/seed.h"

using namespace vkmoe;

TEST(RouteStats, KnownCase) {
  RouteStats st(2, 10);
  const int pred[] = {1, 2, 3, 4}, actual[] = {3, 4, 5, 6};
  st.record_routing(0, pred, actual);
  const int pred2[] = {7, 7, 8}, actual2[] = {8, 9};  // duplicates count once
  st.record_routing(1, pred2, actual2);
  st.record_cache(0, 3, 1);
  st.record_upload(0, 3u << 20);
  st.record_upload(1, 1u << 20);
  st.record_compute(1, 5, 3);
  st.add_tokens(2);
  EXPECT_DOUBLE_EQ(st.layer(0).precision(), 0.5);
  EXPECT_DOUBLE_EQ(st.layer(0).recall(), 0.5);
  EXPECT_DOUBLE_EQ(st.layer(1).precision(), 0.5);
  EXPECT_DOUBLE_EQ(st.layer(1).recall(), 0.5);
  EXPECT_DOUBLE_EQ(st.layer(0).hit_rate(), 0.75);
  EXPECT_DOUBLE_EQ(st.layer(1).hit_rate(), 0.0);  // no lookups
  const auto t = st.total();
  EXPECT_EQ(t.correct, 3u);
  EXPECT_EQ(t.predicted, 6u);
  EXPECT_EQ(t.actual, 6u);
  EXPECT_EQ(t.gpu_experts, 5u);
  EXPECT_EQ(t.cpu_experts, 3u);
  EXPECT_DOUBLE_EQ(st.mib_per_token(), 2.0);
  const std::string r = st.report();
  EXPECT_NE(r.find("2 tokens, 2 layers"), std::string::npos) << r;
  EXPECT_NE(r.find("50.0%"), std::string::npos) << r;
  EXPECT_NE(r.find("75.0%"), std::string::npos) << r;
  EXPECT_NE(r.find("total"), std::string::npos) << r;
  EXPECT_NE(r.find("2.000"), std::string::npos) << r;  // MiB per token
  EXPECT_THROW(st.record_upload(2, 1), Error);
  EXPECT_THROW(st.record_cache(-1, 1, 1), Error);
  st.reset();
  EXPECT_EQ(st.total().routings, 0u);
  EXPECT_EQ(st.tokens(), 0u);
}

TEST(RouteStats, RandomizedAgainstSets) {
  const unsigned seed = unsigned(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int n_layer = uni(1, 8), n_expert = uni(4, 64), k = uni(1, std::min(8, n_expert));
  RouteStats st(n_layer, n_expert);
  const size_t nl = size_t(n_layer);
  std::vector<uint64_t> correct(nl), pred_n(nl), act_n(nl), hits(nl), misses(nl), bytes(nl);
  const int tokens = uni(1, 200);
  for (int t = 0; t < tokens; ++t) {
    for (int l = 0; l < n_layer; ++l) {
      std::set<int> p, a;
      std::vector<int> pv, av;
      while (int(a.size()) < k) a.insert(uni(0, n_expert - 1));
      const int n_pred = uni(0, k + 2);
      for (int i = 0; i < n_pred; ++i) pv.push_back(uni(0, n_expert - 1));
      p.insert(pv.begin(), pv.end());
      av.assign(a.rbegin(), a.rend());
      st.record_routing(l, pv, av);
      for (int e : p) correct[size_t(l)] += a.count(e);
      pred_n[size_t(l)] += p.size();
      act_n[size_t(l)] += a.size();
      const int h = uni(0, k);
      st.record_cache(l, uint64_t(h), uint64_t(k - h));
      hits[size_t(l)] += uint64_t(h);
      misses[size_t(l)] += uint64_t(k - h);
      const uint64_t up = uint64_t(k - h) * uint64_t(uni(1, 5000));
      st.record_upload(l, up);
      bytes[size_t(l)] += up;
    }
    st.add_tokens();
  }
  uint64_t all_correct = 0, all_pred = 0, all_act = 0, all_bytes = 0;
  for (int l = 0; l < n_layer; ++l) {
    const auto& t = st.layer(l);
    EXPECT_EQ(t.routings, uint64_t(tokens));
    EXPECT_EQ(t.correct, correct[size_t(l)]);
    EXPECT_EQ(t.predicted, pred_n[size_t(l)]);
    EXPECT_EQ(t.actual, uint64_t(tokens) * uint64_t(k));
    if (pred_n[size_t(l)]) {
      EXPECT_NEAR(t.precision(), double(correct[size_t(l)]) / double(pred_n[size_t(l)]), 1e-12);
    } else {
      EXPECT_EQ(t.precision(), 0.0);
    }
    EXPECT_NEAR(t.recall(), double(correct[size_t(l)]) / double(act_n[size_t(l)]), 1e-12);
    EXPECT_NEAR(t.hit_rate(), double(hits[size_t(l)]) / double(hits[size_t(l)] + misses[size_t(l)]), 1e-12);
    all_correct += correct[size_t(l)];
    all_pred += pred_n[size_t(l)];
    all_act += act_n[size_t(l)];
    all_bytes += bytes[size_t(l)];
  }
  const auto total = st.total();
  EXPECT_EQ(total.correct, all_correct);
  EXPECT_EQ(total.predicted, all_pred);
  EXPECT_EQ(total.actual, all_act);
  EXPECT_EQ(total.bytes_uploaded, all_bytes);
  EXPECT_NEAR(st.mib_per_token(), double(all_bytes) / (1 << 20) / tokens, 1e-12);
  // One row per layer plus header lines and the total.
  const std::string r = st.report();
  EXPECT_EQ(std::count(r.begin(), r.end(), '\n'), n_layer + 3) << r;
}

TEST(RouteStats, ReuseAndPopularityKnownCase) {
  RouteStats st(1, 8);
  const int a[] = {0, 1, 2}, b[] = {2, 1, 5}, c[] = {5, 5, 6};  // duplicates count once
  st.record_route(0, a);
  st.record_route(0, b);
  st.record_route(0, c);
  const auto& t = st.layer(0);
  EXPECT_EQ(t.reuse_pairs, 2u);
  EXPECT_EQ(t.reused, 3u);    // {1, 2} then {5}
  EXPECT_EQ(t.reuse_of, 5u);  // 3 then 2 distinct
  EXPECT_DOUBLE_EQ(t.reuse(), 0.6);
  // chosen: 0:1 1:2 2:2 5:2 6:1 of 8 routes; the top quarter (2 experts) took 4
  EXPECT_DOUBLE_EQ(st.top_quarter_share(0), 0.5);
  EXPECT_DOUBLE_EQ(st.total_top_quarter_share(), 0.5);
  EXPECT_NE(st.report().find("60.0%"), std::string::npos) << st.report();
  const int bad[] = {8};
  EXPECT_THROW(st.record_route(0, bad), Error);
  EXPECT_THROW(st.top_quarter_share(1), Error);
  st.reset();
  EXPECT_EQ(st.top_quarter_share(0), 0.0);
  st.record_route(0, a);  // the first route after a reset has no predecessor
  EXPECT_EQ(st.layer(0).reuse_pairs, 0u);
}

TEST(RouteStats, ReuseAndPopularityRandomized) {
  const unsigned seed = unsigned(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int n_layer = uni(1, 6), n_expert = uni(4, 160), k = uni(1, std::min(8, n_expert));
  RouteStats st(n_layer, n_expert);
  const size_t nl = size_t(n_layer);
  std::vector<std::vector<uint64_t>> chosen(nl, std::vector<uint64_t>(size_t(n_expert)));
  std::vector<std::set<int>> last(nl);
  std::vector<uint64_t> reused(nl), of(nl);
  const int tokens = uni(1, 300);
  for (int t = 0; t < tokens; ++t) {
    for (int l = 0; l < n_layer; ++l) {
      std::set<int> now;
      while (int(now.size()) < k) now.insert(uni(0, n_expert - 1) / uni(1, 3));  // skewed to low ids
      st.record_route(l, std::vector<int>(now.begin(), now.end()));
      for (int e : now) chosen[size_t(l)][size_t(e)]++;
      if (t > 0) {
        for (int e : now) reused[size_t(l)] += last[size_t(l)].count(e);
        of[size_t(l)] += now.size();
      }
      last[size_t(l)] = now;
    }
  }
  uint64_t top_all = 0, all = 0;
  for (int l = 0; l < n_layer; ++l) {
    EXPECT_EQ(st.layer(l).reused, reused[size_t(l)]);
    EXPECT_EQ(st.layer(l).reuse_of, of[size_t(l)]);
    std::vector<uint64_t> c = chosen[size_t(l)];
    std::sort(c.rbegin(), c.rend());
    const size_t q = std::max(1, n_expert / 4);
    uint64_t top = 0, sum = 0;
    for (size_t i = 0; i < c.size(); ++i) (i < q ? top : sum) += c[i];
    sum += top;
    EXPECT_NEAR(st.top_quarter_share(l), double(top) / double(sum), 1e-12);
    top_all += top;
    all += sum;
  }
  EXPECT_NEAR(st.total_top_quarter_share(), double(top_all) / double(all), 1e-12);
}
