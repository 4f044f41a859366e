// Vulkan forward pass (on lavapipe in CI) against the CPU reference, and
// identical greedy output with and without expert offload / prefetch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <random>

#include "engine/forward/cpu_forward.h"
#include "engine/forward/engine_select.h"
#include "engine/forward/gpu_engine.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/offload/plan_model.h"
#include "engine/vulkan/vk_moe_fused.h"
#include "engine/vulkan/weight_types.h"
#include "tests/test_util.h"
#include "tools/synth_model.h"

using namespace vkmoe;

namespace {

using test::max_rel_diff;
using test::synth;
using test::argmax;
using test::budget_for_slots;
using test::routes_clear_of_ties;

std::vector<int32_t> greedy(Engine& e, std::vector<int32_t> prompt, int n) {
  std::vector<int32_t> out;
  auto logits = e.eval(prompt);
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    logits = e.eval({out.back()});
  }
  return out;
}

// GPU logits (f32 KV cache, f32-activation GEMMs, as the reference keeps
// them) against the scalar CPU reference: a prompt of n_prompt random tokens,
// then n_decode tokens the reference picks, one at a time. Another cache
// type comes with its tolerance and the route margin that rounding needs.
void expect_logits_match_cpu(const std::string& spec, int n_ctx, int n_prompt, int n_decode,
                             const std::string& kv_type = "f32", double tol = 2e-3,
                             float margin = test::kRouteTieMargin) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth(spec, seed);
  EngineOptions o;
  o.n_ctx = n_ctx;
  o.kv_type = kv_type;
  o.gemm = "tiled";
  auto gpu = make_engine(*m, o);
  CpuForward ref(*m, n_ctx);
  std::mt19937 rng(seed);
  const std::vector<int32_t> prompt = test::random_tokens(rng, n_prompt, 512);
  // EngineOptions keeps the one-token products on f32 activations on every
  // device (gpu_q8 Off), so with an f32 cache only float summation order differs.
  auto g = gpu->eval(prompt);
  auto r = ref.eval(prompt);
  if (!routes_clear_of_ties(ref, "prompt", margin)) return;
  EXPECT_LT(max_rel_diff(g, r), tol);
  for (int i = 0; i < n_decode; ++i) {
    const int32_t t = argmax(r);
    g = gpu->eval({t});
    r = ref.eval({t});
    if (!routes_clear_of_ties(ref, "token " + std::to_string(i), margin)) return;
    ASSERT_LT(max_rel_diff(g, r), tol) << "token " << i;
  }
}

}  // namespace

// Decoding after 300 positions splits each attention over the keys (and the
// engine's counters let the last split workgroup combine them): logits still
// match the CPU reference.
TEST(GpuForward, LongContextSplitDecodeMatchesCpuReference) { expect_logits_match_cpu("arch=qwen3moe", 320, 300, 3); }

using TokenEval = std::function<std::vector<float>(int32_t)>;

// Six tokens the CPU reference picks after `prompt`, decoded by a GPU engine
// on int8 activations (the prompt already given to it): `tested`'s logits stay
// within that rounding of the f32 reference while the reference routes clear
// of it. With `other` (a second engine, given the prompt too), returns the
// largest relative difference between the two engines' logits; else 0.
double int8_decode_near_cpu(CpuForward& ref, const std::vector<int32_t>& prompt, const TokenEval& tested,
                            const TokenEval& other = {}) {
  // The int8 rounding of x (<= 1/254 of a block's largest value) moves the
  // final logits by 0.4-1.4% and router logits by more, growing with the
  // positions behind a token: on lavapipe a route flipped at a reference
  // margin of 0.050 (Mixtral, seed 15591632917019159510, token 3); 50 other
  // seeds flipped at 0.007 and 0.016. Compare only while the reference routed
  // twice that far from a tie.
  const float margin = 1e-1f;
  const double tol = 3e-2;
  auto r = ref.eval(prompt);
  double differs = 0;
  for (int i = 0; i < 6; ++i) {
    const int32_t t = argmax(r);
    r = ref.eval({t});
    const auto g = tested(t);
    if (other) differs = std::max(differs, max_rel_diff(g, other(t)));
    if (!routes_clear_of_ties(ref, "token " + std::to_string(i), margin)) break;
    const double diff = max_rel_diff(g, r);
    EXPECT_LT(diff, tol) << "token " << i << " (the reference routed " << ref.min_route_margin() << " from a tie)";
    if (diff >= tol) break;
  }
  return differs;
}

// Whether every Vulkan device has a shader device clock (VKMOE_FUSED_CLOCKS).
bool devices_have_clocks() {
  const std::vector<vk::DeviceInfo> devs = vk::list_devices();
  return std::all_of(devs.begin(), devs.end(), [](const vk::DeviceInfo& d) { return d.device_clock; });
}

// With int8 activations (the CLI's default where the device accelerates
// integer dot products), the one-token products of K-quant weights quantize
// their input per 32 values: decode logits stay within that rounding of the
// f32 CPU reference, and do differ from the f32-activation GPU path.
TEST(GpuForward, Int8ActivationDecodeStaysNearCpuReference) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth("arch=qwen3moe,quant=Q4_K_M", seed);
  EngineOptions o;
  o.n_ctx = 32;
  o.kv_type = "f32";
  o.gemm = "tiled";
  auto gpu_f32 = make_engine(*m, o);
  o.gpu_q8 = EngineOptions::GpuQ8::On;
  auto gpu_q8 = make_engine(*m, o);
  CpuForward ref(*m, o.n_ctx);
  const std::vector<int32_t> prompt = {5, 77, 301};
  gpu_f32->eval(prompt);
  gpu_q8->eval(prompt);  // the prompt's GEMMs keep f32 activations
  const double differs = int8_decode_near_cpu(
      ref, prompt, [&](int32_t t) { return gpu_q8->eval({t}); }, [&](int32_t t) { return gpu_f32->eval({t}); });
  EXPECT_GT(differs, 1e-5) << "the int8-activation products did not run";
}

// The whole MoE block of a decoded token in one dispatch (vk_moe_fused.h; a
// grid of one workgroup here, as lavapipe runs workgroups one after another):
// logits stay within the int8 rounding of the f32 CPU reference, as the
// separate int8 dispatches do, and differ from theirs (the fused path ran).
// Then with the output projection before the block and the next layer's
// q/k/v after it in the same dispatch, and with an F16 cache the attention in
// it too for the positions up to VKMOE_FUSED_ATTENTION_MAX (6 here: three
// tokens so, the others past it in their own attention): near the reference
// too, and the profile's step names say those steps ran.
// Qwen3 (normalized softmax), OLMoE (softmax over all experts) and Mixtral.
class GpuForwardFusedMoe : public ::testing::TestWithParam<std::string> {};
TEST_P(GpuForwardFusedMoe, DecodeStaysNearCpuReference) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth(GetParam() + ",quant=Q4_K_M", seed);
  EngineOptions o;
  o.n_ctx = 32;
  o.kv_type = "f32";
  o.gemm = "tiled";
  o.gpu_q8 = EngineOptions::GpuQ8::On;
  auto fused = make_engine(*m, o);
  auto apart = make_engine(*m, o);
  CpuForward ref(*m, o.n_ctx);
  // The grid and the extra steps are read as each token is recorded; grid 0:
  // the block's four dispatches.
  auto with_grid = [](Engine& e, const char* grid, bool steps) {
    return [&e, grid, steps](int32_t t) {
      setenv("VKMOE_MOE_FUSED_GRID", grid, 1);
      setenv("VKMOE_FUSED_OUT_PROJ", steps ? "1" : "0", 1);
      setenv("VKMOE_FUSED_QKV", steps ? "1" : "0", 1);
      auto l = e.eval({t});
      for (const char* v : {"VKMOE_MOE_FUSED_GRID", "VKMOE_FUSED_OUT_PROJ", "VKMOE_FUSED_QKV"}) unsetenv(v);
      return l;
    };
  };
  const std::vector<int32_t> prompt = {9, 40, 222};
  {
    fused->eval(prompt);
    apart->eval(prompt);
    const double differs =
        int8_decode_near_cpu(ref, prompt, with_grid(*fused, "1", false), with_grid(*apart, "0", false));
    EXPECT_GT(differs, 0.0) << "the fused MoE dispatch did not run";
  }
  // The profile's step names say what the fused dispatch took; with clocks,
  // its timeline has the steps' edges, and with an F16 cache (the attention
  // folds the rope and stamps too) the attention's timeline follows.
  setenv("VKMOE_PROFILE", "1", 1);
  o.kv_type = "f16";
  const bool clocks = devices_have_clocks();
  if (clocks) setenv("VKMOE_FUSED_CLOCKS", "1", 1);
  setenv("VKMOE_MOE_FUSED_GRID", "1", 1);
  fused = make_engine(*m, o);
  for (const char* v : {"VKMOE_PROFILE", "VKMOE_FUSED_CLOCKS", "VKMOE_MOE_FUSED_GRID"}) unsetenv(v);
  CpuForward ref2(*m, o.n_ctx);
  fused->eval(prompt);
  setenv("VKMOE_FUSED_ATTENTION_MAX", "6", 1);
  int8_decode_near_cpu(ref2, prompt, with_grid(*fused, "1", true));
  // Past the limit whether or not the comparison stopped early (a route near a tie).
  for (int i = 0; i < 6; ++i) with_grid(*fused, "1", true)(int32_t(i + 1));
  unsetenv("VKMOE_FUSED_ATTENTION_MAX");
  const std::string steps = fused->stats_report();
  if (clocks) {
    EXPECT_NE(steps.find("one layer's timeline"), std::string::npos) << steps;
    EXPECT_NE(steps.find("gate/up: released"), std::string::npos) << steps;
    EXPECT_NE(steps.find("attention between them"), std::string::npos) << steps;
    EXPECT_NE(steps.find("rope prologue"), std::string::npos) << steps;
  }
  if (steps.find("GPU time per decoded token") == std::string::npos) {
    std::printf("no GPU timestamps on this device: the fused steps are not named\n");
    return;
  }
  EXPECT_NE(steps.find("out proj + MoE block"), std::string::npos) << steps;
  // OLMoE's q/k norms span all heads: its q/k/v stay apart, and so does its attention.
  const bool qkv = GetParam() != "arch=olmoe";
  EXPECT_EQ(steps.find("MoE block + next q/k/v") != std::string::npos, qkv) << steps;
  EXPECT_EQ(steps.find("attention + out proj + MoE block") != std::string::npos, qkv) << steps;
  EXPECT_NE(steps.find("\n  out proj + MoE block"), std::string::npos) << "no token past the limit: " << steps;
}
// A fused grid larger than the device runs at once (lavapipe: more workgroups
// than its threads): the waits give up and every decoded token fails with one
// clear error, whatever reached its logits.
TEST(GpuForwardFusedMoe, AGridThatCannotGatherFailsTheToken) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth("arch=qwen3moe,quant=Q4_K_M", seed);
  EngineOptions o;
  o.n_ctx = 32;
  o.gemm = "tiled";
  o.gpu_q8 = EngineOptions::GpuQ8::On;
  auto e = make_engine(*m, o);
  e->eval({9, 40, 222});  // a prompt has no fused block
  const std::vector<vk::DeviceInfo> devs = vk::list_devices();
  const uint32_t own = devs.empty() ? 0 : vk::moe_fused_grid(devs[0]);
  // lavapipe runs a dispatch's workgroups on its threads (one per core, at
  // most a few dozen), so a grid of two can gather there: 256 cannot.
  setenv("VKMOE_MOE_FUSED_GRID", std::to_string(std::max<uint32_t>(256, 8 * own)).c_str(), 1);
  for (int32_t t : {5, 6}) {
    try {
      e->eval({t});
      ADD_FAILURE() << "token " << t << " decoded";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("did not all run at once"), std::string::npos) << err.what();
    }
  }
  unsetenv("VKMOE_MOE_FUSED_GRID");
}

// The long-context fused decode tests' engine: int8 activations, an F16
// cache of 300 positions (their prompts take 250).
EngineOptions long_decode_options() {
  EngineOptions o;
  o.n_ctx = 300;
  o.kv_type = "f16";
  o.gemm = "tiled";
  o.gpu_q8 = EngineOptions::GpuQ8::On;
  return o;
}

// Past ~200 positions a decoded token's keys split over workgroups, and the
// fused block combines the attention's partials before its output projection
// (instead of the attention's split tail): logits stay within the int8 and
// f16-cache rounding of the CPU reference, and with clocks the block's
// timeline has that step.
TEST(GpuForwardFusedMoeLong, SplitAttentionCombinedInTheBlock) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth("arch=qwen3moe,quant=Q4_K_M", seed);
  const EngineOptions o = long_decode_options();
  const bool clocks = devices_have_clocks();
  if (clocks) setenv("VKMOE_FUSED_CLOCKS", "1", 1);
  setenv("VKMOE_MOE_FUSED_GRID", "1", 1);
  setenv("VKMOE_FUSED_ATTENTION", "0", 1);  // the attention in its own dispatch
  auto fused = make_engine(*m, o);
  std::mt19937 rng{uint32_t(seed)};
  const std::vector<int32_t> prompt = test::random_tokens(rng, 250, m->config().n_vocab);
  fused->eval(prompt);
  CpuForward ref(*m, o.n_ctx);
  int8_decode_near_cpu(ref, prompt, [&](int32_t t) { return fused->eval({t}); });
  for (const char* v : {"VKMOE_FUSED_CLOCKS", "VKMOE_MOE_FUSED_GRID", "VKMOE_FUSED_ATTENTION"}) unsetenv(v);
  if (!clocks) {
    std::printf("no device clock: the combining step is not seen\n");
    return;
  }
  const std::string steps = fused->stats_report();
  EXPECT_NE(steps.find("att ready: released"), std::string::npos) << steps;
  EXPECT_EQ(steps.find("split counted"), std::string::npos) << "the attention's split tail ran: " << steps;
}

// Chained decode layers (LayerProgram::FusedDecode): the attention and the
// fused block wait for each other by counters instead of barriers and compute
// exactly what they do with barriers, after 250 positions (split keys combined
// in the block, where the default chains too), with the device's own grid
// where it runs one (lavapipe runs workgroups one after another: a grid of
// one there).
TEST(GpuForwardFusedMoeLong, ChainedLayersEqualBarriers) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto m = synth("arch=qwen3moe,quant=Q4_K_M", seed);
  const EngineOptions o = long_decode_options();
  const std::vector<vk::DeviceInfo> devs = vk::list_devices();
  const bool own_grid = !devs.empty() && vk::moe_fused_grid(devs[0]) > 1;
  if (!own_grid) setenv("VKMOE_MOE_FUSED_GRID", "1", 1);
  const bool clocks = devices_have_clocks();  // both ways: the same kernels
  if (clocks) setenv("VKMOE_FUSED_CLOCKS", "1", 1);
  setenv("VKMOE_FUSED_ATTENTION", "0", 1);  // the attention in its own dispatch, as chained layers need
  std::mt19937 rng{uint32_t(seed)};
  const std::vector<int32_t> prompt = test::random_tokens(rng, 250, m->config().n_vocab);
  // Barriers, chained at any depth, the default (where the keys split).
  const char* modes[] = {"0", "1", nullptr};
  std::vector<std::vector<float>> logits[3];
  std::string report[3];
  std::vector<int32_t> tokens;
  for (int m_i = 0; m_i < 3; ++m_i) {
    if (modes[m_i])
      setenv("VKMOE_CHAIN_LAYERS", modes[m_i], 1);
    else
      unsetenv("VKMOE_CHAIN_LAYERS");
    auto e = make_engine(*m, o);
    std::vector<float> l = e->eval(prompt);
    for (int i = 0; i < 4; ++i) {
      if (m_i == 0) tokens.push_back(argmax(l));
      l = e->eval({tokens[i]});
      logits[m_i].push_back(l);
    }
    report[m_i] = e->stats_report();
  }
  for (const char* v : {"VKMOE_CHAIN_LAYERS", "VKMOE_MOE_FUSED_GRID", "VKMOE_FUSED_CLOCKS"}) unsetenv(v);
  unsetenv("VKMOE_FUSED_ATTENTION");
  EXPECT_EQ(report[0].find("chained decode layers: "), std::string::npos) << report[0];
  for (int m_i : {1, 2}) {
    SCOPED_TRACE(modes[m_i] ? "chained at any depth" : "chained by default");
    for (int i = 0; i < 4; ++i) EXPECT_EQ(logits[m_i][i], logits[0][i]) << "decoded token " << i;
    EXPECT_NE(report[m_i].find("chained decode layers: "), std::string::npos) << report[m_i];
    if (!clocks) continue;
    // The timelines show the waits where chained, and only there.
    for (const char* edge : {"attention waited", "inputs waited"}) {
      EXPECT_NE(report[m_i].find(edge), std::string::npos) << report[m_i];
      EXPECT_EQ(report[0].find(edge), std::string::npos) << report[0];
    }
    EXPECT_NE(report[m_i].find("block at work"), std::string::npos) << report[m_i];
  }
  // Where the keys do not split (a short context), the default keeps the barriers.
  if (!own_grid) setenv("VKMOE_MOE_FUSED_GRID", "1", 1);
  auto short_ctx = make_engine(*m, o);
  short_ctx->eval({5, 6, 7});
  short_ctx->eval({8});
  unsetenv("VKMOE_MOE_FUSED_GRID");
  EXPECT_EQ(short_ctx->stats_report().find("chained decode layers: "), std::string::npos) << short_ctx->stats_report();
}

INSTANTIATE_TEST_SUITE_P(Archs, GpuForwardFusedMoe, ::testing::Values("arch=qwen3moe", "arch=olmoe", "arch=llama"),
                         [](const auto& info) { return info.param.substr(5); });

// An F16 KV cache (the default): decoding folds the q/k norms, the rotation
// and the cache store into the attention kernel where it can. Logits stay
// within the f16 rounding of the keys and values of the f32 CPU reference,
// for NeoX rotation with q/k norms (qwen3moe), adjacent pairs without norms
// (llama), YaRN with sinks and windows (gpt-oss), and past 300 positions,
// where the keys are split over workgroups.
TEST(GpuForward, F16KvDecodeStaysNearCpuReference) {
  // f16 keys and values (2^-11 relative) moved the logits by 5e-5 to 8e-4
  // and router logits by less than the margin on lavapipe (9 seeds); a
  // wrong norm, rotation or new key row moves them by far more.
  for (const char* spec : {"arch=qwen3moe", "arch=llama,n_expert=4,n_expert_used=2",
                           "arch=gpt-oss,n_layer=4,n_swa=3,yarn_factor=32,n_ctx_orig=64,quant=MXFP4_MOE"})
    for (int n_prompt : {3, 300}) {
      SCOPED_TRACE(std::string(spec) + " prompt " + std::to_string(n_prompt));
      expect_logits_match_cpu(spec, 320, n_prompt, 4, "f16", 5e-3, 2e-3f);
    }
}

class GpuForwardArch : public ::testing::TestWithParam<std::string> {};

// Logits of the GPU path match the scalar CPU reference token by token.
TEST_P(GpuForwardArch, LogitsMatchCpuReference) { expect_logits_match_cpu(GetParam(), 32, 3, 4); }

INSTANTIATE_TEST_SUITE_P(Archs, GpuForwardArch,
                         ::testing::Values("arch=qwen3moe", "arch=olmoe", "arch=qwen2moe", "arch=glm4moe,n_layer=3,n_layer_dense_lead=1,n_rot=32,expert_weights_scale=2.5", "arch=gpt-oss,n_layer=4,n_swa=3,yarn_factor=32,n_ctx_orig=64,quant=MXFP4_MOE", "arch=glm4moe,qk_norm=1,n_ff_shexp=256,quant=Q8_0",
                                           "arch=llama,n_expert=4,n_expert_used=2", "arch=llama,n_expert=0",
                                           "arch=qwen3", "arch=qwen3moe,quant=Q8_0", "arch=qwen3moe,quant=Q5_K_M",
                                           "arch=olmoe,quant=F16", "arch=qwen2moe,quant=BF16",
                                           // latent attention: q bottleneck, sigmoid group routing; plain q, YaRN
                                           "arch=deepseek2,n_layer=3,q_lora=96,kv_lora=64,n_rot=32,head_k_mla=80,head_v_mla=48,n_layer_dense_lead=1,n_expert=16,n_expert_used=4,n_ff_shexp=256,sigmoid_router=1,n_group=4,topk_group=2,expert_weights_scale=2.5",
                                           "arch=deepseek2,quant=Q8_0,yarn_factor=8,n_ctx_orig=64,yarn_log_mul=0.0707",
                                           // DeepSeek's cached row (512 + 64) and head sizes
                                           "arch=deepseek2,n_layer=2,q_lora=64,kv_lora=512,n_rot=64,head_k_mla=192,head_v_mla=128,quant=Q8_0",
                                           // norm weights and biases stored as F16 / Q8_0 / BF16 (legal GGUF,
                                           // once uploaded raw and read as f32 by the GPU)
                                           "arch=qwen2moe,vec_type=F16", "arch=olmoe,vec_type=Q8_0",
                                           "arch=qwen3,vec_type=BF16"));

// Offloaded experts (SLRU slots with forced eviction, predictive prefetch, or
// all on the CPU) give the same greedy tokens as fully resident experts.
TEST(GpuOffload, GreedyOutputIdenticalAtAnyBudget) {
  const uint64_t seed = test::test_seed();
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

// The weight types with 16-element-chunk or 32-element-block GPU decoders,
// uniform or in llama.cpp-style mixes (synth quant=), each with the type the
// model must contain.
struct TypeCase {
  const char* quant;
  GgmlType type;
};
const TypeCase kTypeCases[] = {{"Q4_0", GgmlType::Q4_0},   {"Q4_1", GgmlType::Q4_1},      {"Q5_0", GgmlType::Q5_0},
                               {"Q5_1", GgmlType::Q5_1},   {"IQ4_NL", GgmlType::IQ4_NL},  {"Q3_K", GgmlType::Q3_K},
                               {"Q2_K", GgmlType::Q2_K},   {"Q3_K_M", GgmlType::Q3_K},    {"IQ4_XS", GgmlType::IQ4_XS},
                               {"MXFP4_MOE", GgmlType::MXFP4}};

class GpuForwardTypes : public ::testing::TestWithParam<TypeCase> {};

// GPU logits match the scalar CPU reference for a batched prompt (GEMMs) and
// then decoded tokens (matvecs), with experts resident, in a slot cache
// smaller than the experts (misses streamed or run on the CPU) and all on the
// CPU. Same tolerance as GpuForwardArch.
TEST_P(GpuForwardTypes, LogitsMatchCpuReference) {
  const TypeCase c = GetParam();
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE(std::string(c.quant) + " seed " + std::to_string(seed));
  auto m = synth(std::string("arch=qwen3moe,quant=") + c.quant, seed);
  int n_of_type = 0;
  for (const GgufTensor& t : m->gguf().tensors()) n_of_type += t.type == c.type && t.nrows() > 1;
  ASSERT_GT(n_of_type, 0) << "the model has no " << type_name(c.type) << " matrix";
  std::mt19937 rng(seed);
  const std::vector<int32_t> prompt = test::random_tokens(rng, 6, 512);
  const double tol = 2e-3;
  for (PlanMode mode : {PlanMode::Resident, PlanMode::ExpertCache, PlanMode::CpuMoe}) {
    EngineOptions o;
    o.n_ctx = 32;
    o.backend = "gpu";
    o.kv_type = "f32";
    o.gemm = "tiled";
    o.mode = mode;
    o.threads = 2;
    if (mode == PlanMode::ExpertCache) o.vram_budget = budget_for_slots(*m, o.n_ctx, 3);
    auto gpu = make_engine(*m, o);
    SCOPED_TRACE(gpu->describe());
    CpuForward ref(*m, 32);
    auto g = gpu->eval(prompt);
    auto r = ref.eval(prompt);
    if (!routes_clear_of_ties(ref, "prompt")) continue;
    const double dp = max_rel_diff(g, r);
    EXPECT_LT(dp, tol) << "prompt";
    double dd = 0;
    for (int i = 0; i < 3; ++i) {
      const int32_t t = argmax(r);
      g = gpu->eval({t});
      r = ref.eval({t});
      if (!routes_clear_of_ties(ref, "token " + std::to_string(i))) break;
      dd = std::max(dd, max_rel_diff(g, r));
      ASSERT_LT(dd, tol) << "token " << i;
    }
    std::printf("%-9s %s: prompt %.2e decode %.2e\n", c.quant, gpu->describe().c_str(), dp, dd);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GpuForwardTypes, ::testing::ValuesIn(kTypeCases),
                         [](const ::testing::TestParamInfo<TypeCase>& i) { return std::string(i.param.quant); });

// A type whose kernels need a device feature the device lacks is refused up
// front in one line naming the type, the tensor and the feature.
TEST(GpuForward, WeightTypesNeedingMissingFeaturesAreAClearError) {
  auto m = synth("arch=qwen3moe,quant=MXFP4_MOE", 1);
  auto ctx = vk::Context::create();
  vk::DeviceInfo d = ctx->info();
  EXPECT_NO_THROW(check_gpu_weight_types(*m, d));
  d.storage_8bit = false;
  try {
    check_gpu_weight_types(*m, d);
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no kernels for tensor type MXFP4 (tensor 'blk."), std::string::npos) << msg;
    EXPECT_NE(msg.find("8-bit storage"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--backend cpu"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // Q8_0 (here every non-expert matrix) is read in 16-bit units.
  d = ctx->info();
  d.storage_16bit = false;
  EXPECT_THROW(check_gpu_weight_types(*m, d), Error);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q2_K, GgmlType::IQ4_XS, GgmlType::Q6_K, GgmlType::MXFP4})
    EXPECT_EQ(vk::gpu_weight_type_missing_feature(ctx->info(), t), nullptr) << type_name(t);
  EXPECT_STREQ(vk::gpu_weight_type_missing_feature(ctx->info(), GgmlType::Q8_K), "kernels");
}
