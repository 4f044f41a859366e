#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "base/error.h"
#include "engine/offload/route_stats.h"

using namespace vkmoe;

TEST(RouteStats, KnownCase) {
  RouteStats st(2);
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
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int n_layer = uni(1, 8), n_expert = uni(4, 64), k = uni(1, std::min(8, n_expert));
  RouteStats st(n_layer);
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
