// Batched prompt processing (the GPU engine's ubatch forward pass, on lavapipe
// in CI) against token-by-token decode and the scalar CPU reference, for every
// architecture and expert placement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <random>

#include "engine/forward/cpu_forward.h"
#include "engine/forward/engine_select.h"
#include "engine/offload/plan_model.h"
#include "tests/test_util.h"

using namespace vkmoe;

namespace {

using test::max_rel_diff;
using test::synth;
using test::argmax;
using test::budget_for_slots;

std::vector<float> one_by_one(Engine& e, const std::vector<int32_t>& prompt) {
  std::vector<float> logits;
  for (int32_t t : prompt) logits = e.eval({t});
  return logits;
}

std::vector<int32_t> greedy_after(Engine& e, std::vector<float> logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    logits = e.eval({out.back()});
  }
  return out;
}

// How many of the n greedy tokens after `logits` the reference picks from
// routes clear of ties (token i is picked from the step that ate token i - 1).
int clear_greedy_steps(CpuForward& ref, std::vector<float> logits, int n) {
  int clear = 1;
  for (; clear < n; ++clear) {
    logits = ref.eval({argmax(logits)});
    if (!test::routes_clear_of_ties(ref, "token " + std::to_string(clear - 1))) break;
  }
  return clear;
}

struct Mode {
  const char* name;
  PlanMode mode;
  int slots;  // per layer, from the budget (expert-cache); 0: no budget given
};

// F32 activations and KV in both passes: only summation order differs.
constexpr double kTol = 2e-3;

}  // namespace

class PrefillArch : public ::testing::TestWithParam<std::string> {};

// A 37-token prompt in one ubatch, in ubatches of 8 (not a divisor) and token
// by token give the same logits and the same greedy continuation; all three
// match the CPU reference.
TEST_P(PrefillArch, BatchedEqualsTokenByToken) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth(GetParam(), seed);
  std::mt19937 rng(seed);
  const auto prompt = test::random_tokens(rng, 37, 512);
  EngineOptions o;
  o.n_ctx = 64;
  o.kv_type = "f32";
  o.gemm = "tiled";
  o.threads = 2;
  CpuForward ref(*m, o.n_ctx);
  const auto want = ref.eval(prompt);
  // Where the reference routes within rounding of a tie, the batched and the
  // token-by-token passes may legitimately pick different experts: nothing is
  // compared past that step.
  if (!test::routes_clear_of_ties(ref, "prompt")) return;
  const int n_greedy = clear_greedy_steps(ref, want, 6);
  const bool moe = m->config().is_moe();
  for (Mode md : {Mode{"resident", PlanMode::Resident, 0}, Mode{"expert-cache", PlanMode::ExpertCache, 3},
                  Mode{"cpu-moe", PlanMode::CpuMoe, 0}}) {
    if (!moe && md.mode != PlanMode::Resident) continue;
    SCOPED_TRACE(md.name);
    EngineOptions oi = o;
    oi.mode = md.mode;
    if (md.slots) oi.vram_budget = budget_for_slots(*m, o.n_ctx, md.slots);
    auto batched = make_engine(*m, oi);
    oi.n_ubatch = 8;
    auto eights = make_engine(*m, oi);
    oi.n_ubatch = 1;
    auto single = make_engine(*m, oi);
    SCOPED_TRACE(batched->describe());
    const auto lb = batched->eval(prompt);
    const auto l8 = eights->eval(prompt);
    const auto l1 = one_by_one(*single, prompt);
    EXPECT_LT(max_rel_diff(lb, l1), kTol);
    EXPECT_LT(max_rel_diff(l8, l1), kTol);
    EXPECT_LT(max_rel_diff(lb, want), kTol);
    const auto gb = greedy_after(*batched, lb, n_greedy);
    EXPECT_EQ(gb, greedy_after(*single, l1, n_greedy));
    EXPECT_EQ(gb, greedy_after(*eights, l8, n_greedy));
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, PrefillArch,
                         ::testing::Values("arch=qwen3moe", "arch=olmoe", "arch=qwen2moe", "arch=glm4moe,n_layer=3,n_layer_dense_lead=1,n_rot=32,expert_weights_scale=2.5", "arch=gpt-oss,n_layer=4,n_swa=3,yarn_factor=32,n_ctx_orig=64,quant=MXFP4_MOE",
                                           "arch=llama,n_expert=4,n_expert_used=2", "arch=llama,n_expert=0",
                                           "arch=qwen3", "arch=qwen3moe,quant=Q8_0", "arch=qwen3moe,quant=Q5_K_M",
                                           "arch=olmoe,quant=F16", "arch=qwen2moe,quant=BF16",
                                           // latent attention: q bottleneck, sigmoid group routing; plain q, YaRN
                                           "arch=deepseek2,n_layer=3,q_lora=96,kv_lora=64,n_rot=32,head_k_mla=80,head_v_mla=48,n_layer_dense_lead=1,n_expert=16,n_expert_used=4,n_ff_shexp=256,sigmoid_router=1,n_group=4,topk_group=2,expert_weights_scale=2.5",
                                           "arch=deepseek2,quant=Q8_0,yarn_factor=8,n_ctx_orig=64,yarn_log_mul=0.0707",
                                           // DeepSeek's cached row (512 + 64) and head sizes
                                           "arch=deepseek2,n_layer=2,q_lora=64,kv_lora=512,n_rot=64,head_k_mla=192,head_v_mla=128,quant=Q8_0"));

// A ubatch whose experts exceed the VRAM slots: forced eviction, with staging
// uploads and CPU experts both in play, still gives the resident result.
TEST(Prefill, OffloadWithEvictionAndStagingMatchesResident) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth("arch=qwen3moe,n_layer=3,n_expert=16,n_expert_used=4", seed);
  std::mt19937 rng(seed);
  const auto prompt = test::random_tokens(rng, 50, 512);
  EngineOptions o;
  o.n_ctx = 96;
  o.kv_type = "f32";
  o.gemm = "tiled";
  o.threads = 2;
  o.mode = PlanMode::Resident;
  auto resident = make_engine(*m, o);
  const auto want = resident->eval(prompt);
  const auto want_text = greedy_after(*resident, want, 8);
  for (int slots : {5, 12}) {
    for (PlanMode mode : {PlanMode::ExpertCache, PlanMode::CpuMoe}) {
      EngineOptions oi = o;
      oi.mode = mode;
      oi.vram_budget = budget_for_slots(*m, o.n_ctx, slots);
      oi.expert_stats = true;
      auto e = make_engine(*m, oi);
      SCOPED_TRACE(e->describe());
      const auto got = e->eval(prompt);
      EXPECT_LT(max_rel_diff(got, want), kTol);
      EXPECT_EQ(greedy_after(*e, got, 8), want_text);
      EXPECT_NE(e->stats_report().find("prompt processing"), std::string::npos) << e->stats_report();
    }
  }
}

namespace {

// Relative L2 error of logits against the f32 CPU reference, for the prompt
// and the decode steps after it, with the given KV type and otherwise default
// precision (int8 or cooperative-matrix GEMMs where the device has them).
std::vector<double> errors_against_reference(const std::string& kv_type, uint64_t seed) {
  std::vector<double> errs;
  for (const char* arch : {"arch=qwen3moe", "arch=qwen3moe,quant=Q8_0", "arch=qwen2moe,quant=Q5_K_M",
                           "arch=deepseek2,quant=Q8_0"}) {
    auto m = synth(arch, seed);
    std::mt19937 rng(seed);
    const auto prompt = test::random_tokens(rng, 30, 512);
    EngineOptions o;
    o.n_ctx = 64;
    o.kv_type = kv_type;
    auto e = make_engine(*m, o);
    CpuForward ref(*m, o.n_ctx);
    auto got = e->eval(prompt), want = ref.eval(prompt);
    for (int step = 0; step < 3; ++step) {
      double d2 = 0, r2 = 0;
      for (size_t i = 0; i < want.size(); ++i)
        d2 += double(got[i] - want[i]) * (got[i] - want[i]), r2 += double(want[i]) * want[i];
      errs.push_back(std::sqrt(d2 / r2));
      const int32_t next = argmax(want);  // both continue with the reference's token
      got = e->eval({next});
      want = ref.eval({next});
    }
  }
  return errs;
}

// Typically ~1% per comparison (lavapipe's int8 path). A routing flip near a
// tie (random synthetic routers) moves one comparison further: over 143 seeds
// (1001-1143) the largest of the 12 reached 0.39 (8 seeds above 0.12) while
// the second largest stayed below 0.033. A wrong kernel or architecture
// spoils the prompt and the decode steps after it, so: the median within 3%,
// all but the largest within 10%, the largest finite.
void expect_close_to_reference(std::vector<double> errs) {
  std::sort(errs.begin(), errs.end());
  std::string all;
  for (double e : errs) all += std::to_string(e) + " ";
  EXPECT_LT(errs[errs.size() / 2], 3e-2) << all;
  EXPECT_LT(errs[errs.size() - 2], 0.1) << all;
  EXPECT_TRUE(std::isfinite(errs.back())) << all;
}

}  // namespace

TEST(Prefill, DefaultPrecisionCloseToReference) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  expect_close_to_reference(errors_against_reference("f16", seed));
}

// A Q8_0 KV cache (int8 keys and values, an f16 scale per 32 values).
TEST(Prefill, Q8KvCacheCloseToReference) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  expect_close_to_reference(errors_against_reference("q8_0", seed));
}

TEST(Prefill, PromptLongerThanContextIsAClearError) {
  auto m = synth("arch=qwen3moe", 7);
  EngineOptions o;
  o.n_ctx = 16;
  auto e = make_engine(*m, o);
  std::vector<int32_t> prompt(17, 3);
  try {
    e->eval(prompt);
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("raise --ctx"), std::string::npos) << err.what();
  }
  EXPECT_NO_THROW(e->eval(std::vector<int32_t>(16, 3)));
}
