// vkmoe synth's routing options. router_skew: row norms spread as asked, and
// the routes of random hidden states concentrate on fewer experts than
// without it. branch_scale: only the matrices writing the residual stream shrink.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "base/error.h"
#include "cpu/moe_route.h"
#include "engine/model/gguf.h"
#include "engine/offload/route_stats.h"
#include "tools/synth_model.h"
#include "tests/seed.h"

namespace vkmoe {
namespace {

constexpr int kExperts = 64, kUsed = 8, kEmbd = 256;

std::unique_ptr<GgufFile> router_file(const std::string& extra) {
  SynthSpec s;
  s.n_vocab = 512;
  apply_synth_overrides(s, "n_layer=1,fast=1,n_embd=256,n_expert=64,n_expert_used=8" + extra);
  return GgufFile::from_memory(synth_model_bytes(s), "synth");
}

const float* router(const GgufFile& f) {
  const GgufTensor* t = f.tensor("blk.0.ffn_gate_inp.weight");
  if (!t || t->type != GgmlType::F32 || t->ne[0] != kEmbd || t->ne[1] != kExperts) throw Error("bad router");
  return reinterpret_cast<const float*>(t->data);
}

// Standard deviation of the log row norms.
double log_norm_sd(const float* w) {
  double sum = 0, sq = 0;
  for (int r = 0; r < kExperts; ++r) {
    double n2 = 0;
    for (int i = 0; i < kEmbd; ++i) n2 += double(w[r * kEmbd + i]) * w[r * kEmbd + i];
    const double l = 0.5 * std::log(n2);
    sum += l;
    sq += l * l;
  }
  const double mean = sum / kExperts;
  return std::sqrt(sq / kExperts - mean * mean);
}

// Top-quarter share of the routes of n random unit-variance hidden states.
double top_quarter_share(const float* w, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  RouteStats st(1, kExperts);
  std::vector<float> x(kEmbd), logits(kExperts), wts(kUsed);
  std::vector<int> ids(kUsed);
  for (int t = 0; t < n; ++t) {
    for (float& v : x) v = nd(rng);
    for (int r = 0; r < kExperts; ++r) {
      float a = 0;
      for (int i = 0; i < kEmbd; ++i) a += w[r * kEmbd + i] * x[size_t(i)];
      logits[size_t(r)] = a;
    }
    route_topk(logits.data(), nullptr, kExperts, kUsed, RouterParams{}, ids.data(), wts.data());
    st.record_route(0, ids);
  }
  return st.top_quarter_share(0);
}

double rms(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.tensor(name);
  if (!t || t->type != GgmlType::F32) throw Error("no F32 " + name);
  const float* v = reinterpret_cast<const float*>(t->data);
  double sq = 0;
  for (int64_t i = 0; i < t->nelements(); ++i) sq += double(v[i]) * v[i];
  return std::sqrt(sq / double(t->nelements()));
}

}  // namespace

TEST(SynthRouter, BranchScaleShrinksOnlyResidualWriters) {
  const auto plain = router_file(",quant=F32"), scaled = router_file(",quant=F32,branch_scale=0.5");
  for (const char* n : {"blk.0.attn_output.weight", "blk.0.ffn_down_exps.weight"})
    EXPECT_NEAR(rms(*scaled, n) / rms(*plain, n), 0.5, 0.02) << n;
  for (const char* n : {"blk.0.attn_q.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_gate_inp.weight"})
    EXPECT_NEAR(rms(*scaled, n) / rms(*plain, n), 1.0, 0.02) << n;
}

TEST(SynthRouter, SkewSpreadsRowNormsAndConcentratesRoutes) {
  const auto flat = router_file(""), skewed = router_file(",router_skew=1.0");
  // Without skew the row norms of 256 N(0, s^2) draws differ by ~4% (sd of
  // the log norm 1/sqrt(2 * 256)); with it by the asked 1.0 (64 draws: +-0.3).
  EXPECT_LT(log_norm_sd(router(*flat)), 0.1);
  EXPECT_NEAR(log_norm_sd(router(*skewed)), 1.0, 0.3);
  // 4000 tokens x 8 of 64 experts: uniform routing gives a top quarter of
  // 25% plus noise (~27%); skew 1.0 gives well over half.
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  const double flat_share = top_quarter_share(router(*flat), 4000, seed);
  const double skewed_share = top_quarter_share(router(*skewed), 4000, seed);
  EXPECT_LT(flat_share, 0.32);
  EXPECT_GT(skewed_share, 0.5);
  SynthSpec s;
  EXPECT_THROW(apply_synth_overrides(s, "router_skew=-1"), Error);
}

}  // namespace vkmoe
