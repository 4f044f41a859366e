// Vulkan forward pass (on lavapipe in CI) against the CPU reference, and
// identical greedy output with and without expert offload / prefetch.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/forward/cpu_forward.h"
#include "engine/forward/engine_select.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/offload/plan_model.h"
#include "tests/test_util.h"
#include "tools/synth_model.h"

using namespace vkmoe;

namespace {

using test::max_rel_diff;
using test::synth;

int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

std::vector<int32_t> greedy(Engine& e, std::vector<int32_t> prompt, int n) {
  std::vector<int32_t> out;
  auto logits = e.eval(prompt);
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    logits = e.eval({out.back()});
  }
  return out;
}

// Budget giving `slots` expert slots per layer on top of the trunk, KV and scratch.
uint64_t budget_for_slots(const Model& m, int n_ctx, int slots) {
  PlanInput in = plan_input_for(m, n_ctx, ~0ull >> 2);
  Plan p = make_plan(in);
  return p.vram_bytes() - p.expert_cache_bytes + uint64_t(slots) * m.config().n_layer * p.slot_bytes;
}

}  // namespace

class GpuForwardArch : public ::testing::TestWithParam<std::string> {};

// Logits of the GPU path match the scalar CPU reference token by token.
TEST_P(GpuForwardArch, LogitsMatchCpuReference) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth(GetParam(), seed);
  EngineOptions o;
  o.n_ctx = 32;
  o.kv_type = "f32";  // the reference keeps f32 keys and values
  o.gemm = "tiled";   // and f32 activations
  auto gpu = make_engine(*m, o);
  CpuForward ref(*m, 32);
  std::mt19937 rng(seed);
  std::vector<int32_t> prompt = {int32_t(rng() % 512), int32_t(rng() % 512), int32_t(rng() % 512)};
  // These shapes stay on the f32-activation matvecs on every device (the
  // int8-x path starts at 16384 rows), so only float summation order differs.
  const double tol = 2e-3;
  auto g = gpu->eval(prompt);
  auto r = ref.eval(prompt);
  EXPECT_LT(max_rel_diff(g, r), tol);
  for (int i = 0; i < 4; ++i) {
    int32_t t = argmax(r);
    g = gpu->eval({t});
    r = ref.eval({t});
    ASSERT_LT(max_rel_diff(g, r), tol) << "token " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, GpuForwardArch,
                         ::testing::Values("arch=qwen3moe", "arch=olmoe", "arch=qwen2moe",
                                           "arch=llama,n_expert=4,n_expert_used=2", "arch=llama,n_expert=0",
                                           "arch=qwen3", "arch=qwen3moe,quant=Q8_0", "arch=qwen3moe,quant=Q5_K_M",
                                           "arch=olmoe,quant=F16", "arch=qwen2moe,quant=BF16",
                                           // norm weights and biases stored as F16 / Q8_0 / BF16 (legal GGUF,
                                           // once uploaded raw and read as f32 by the GPU)
                                           "arch=qwen2moe,vec_type=F16", "arch=olmoe,vec_type=Q8_0",
                                           "arch=qwen3,vec_type=BF16"));

// Offloaded experts (SLRU slots with forced eviction, predictive prefetch, or
// all on the CPU) give the same greedy tokens as fully resident experts.
TEST(GpuOffload, GreedyOutputIdenticalAtAnyBudget) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth("arch=qwen3moe,n_layer=3,n_expert=16,n_expert_used=2", seed);
  const int n_ctx = 64;
  EngineOptions base;
  base.n_ctx = n_ctx;
  base.backend = "gpu";
  base.mode = PlanMode::Resident;
  base.gemm = "tiled";  // f32 activations in the prompt's GEMMs, like the CPU experts
  auto resident = make_engine(*m, base);
  const std::vector<int32_t> prompt = {11, 42, 7};
  const auto want = greedy(*resident, prompt, 12);

  struct Case {
    PlanMode mode;
    int slots;
    bool predict;
    int pin;
  };
  for (Case c : {Case{PlanMode::ExpertCache, 4, false, 0}, Case{PlanMode::ExpertCache, 4, true, 0},
                 Case{PlanMode::ExpertCache, 16, true, 0}, Case{PlanMode::ExpertCache, 5, false, 2},
                 Case{PlanMode::CpuMoe, 0, false, 0}, Case{PlanMode::CpuMoe, 3, false, 3}}) {
    EngineOptions o = base;
    o.mode = c.mode;
    o.predict_prefetch = c.predict;
    o.pin_per_layer = c.pin;
    o.expert_stats = true;
    o.threads = 2;
    o.vram_budget = budget_for_slots(*m, n_ctx, c.slots);
    auto e = make_engine(*m, o);
    SCOPED_TRACE(e->describe());
    EXPECT_EQ(greedy(*e, prompt, 12), want);
  }
}

// Types with CPU kernels only: the GPU engine refuses the model up front with
// one line naming the type and a tensor, in every MoE mode.
TEST(GpuForward, CpuOnlyWeightTypesAreAClearError) {
  for (const char* q : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "IQ4_NL", "Q3_K", "Q2_K", "IQ4_XS", "MXFP4"}) {
    auto m = synth(std::string("arch=qwen3moe,quant=") + q, 1);
    for (PlanMode mode : {PlanMode::Resident, PlanMode::CpuMoe}) {
      EngineOptions o;
      o.n_ctx = 32;
      o.mode = mode;
      try {
        make_engine(*m, o);
        ADD_FAILURE() << q << ": expected Error";
      } catch (const Error& e) {
        const std::string msg = e.what();
        // (Q2_K, IQ4_XS, MXFP4 are mixes; their first GPU-less tensor has that type.)
        EXPECT_NE(msg.find(std::string("no kernels for tensor type ") + q + " (tensor 'blk."), std::string::npos) << msg;
        EXPECT_NE(msg.find("--backend cpu"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      }
    }
  }
}
