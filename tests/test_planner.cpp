#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <regex>

#include "planner/planner.h"
#include "tests/seed.h"

using namespace vkmoe;

namespace {

constexpr uint64_t GiB = 1ull << 30;
constexpr uint64_t MiB = 1ull << 20;

// Block arithmetic written out here, independent of cpu/quant.
uint64_t q4k(uint64_t rows, uint64_t cols) { return rows * (cols / 256) * 144; }
uint64_t q6k(uint64_t rows, uint64_t cols) { return rows * (cols / 256) * 210; }
uint64_t q8_0(uint64_t rows, uint64_t cols) { return rows * (cols / 32) * 34; }
uint64_t f32(uint64_t n) { return 4 * n; }

void add_expert_layer(PlanInput& in, int layer, uint64_t n_expert, uint64_t gate_up_bytes,
                      uint64_t down_bytes) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  in.experts.tensors.push_back({p + "ffn_gate_exps.weight", layer, n_expert * gate_up_bytes});
  in.experts.tensors.push_back({p + "ffn_up_exps.weight", layer, n_expert * gate_up_bytes});
  in.experts.tensors.push_back({p + "ffn_down_exps.weight", layer, n_expert * down_bytes});
}

// Qwen3-30B-A3B-like: 48 layers, 128 experts (8 used), n_embd 2048,
// n_ff_exp 768, Q4_K experts, Q8_0 attention, Q6_K output, ctx 4096, F16 KV
// with 4 KV heads x 128.
PlanInput qwen3_like(uint64_t budget) {
  PlanInput in;
  in.vram_budget = budget;
  in.trunk.push_back({"token_embd.weight", q4k(151936, 2048), true});
  for (int l = 0; l < 48; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    in.trunk.push_back({p + "attn_norm.weight", f32(2048)});
    in.trunk.push_back({p + "attn_q.weight", q8_0(4096, 2048)});
    in.trunk.push_back({p + "attn_k.weight", q8_0(512, 2048)});
    in.trunk.push_back({p + "attn_v.weight", q8_0(512, 2048)});
    in.trunk.push_back({p + "attn_output.weight", q8_0(2048, 4096)});
    in.trunk.push_back({p + "attn_q_norm.weight", f32(128)});
    in.trunk.push_back({p + "attn_k_norm.weight", f32(128)});
    in.trunk.push_back({p + "ffn_norm.weight", f32(2048)});
    in.trunk.push_back({p + "ffn_gate_inp.weight", f32(2048 * 128)});
    add_expert_layer(in, l, 128, q4k(768, 2048), q4k(2048, 768));
  }
  in.trunk.push_back({"output_norm.weight", f32(2048)});
  in.trunk.push_back({"output.weight", q6k(151936, 2048)});
  in.experts.n_layer = 48;
  in.experts.n_expert = 128;
  in.experts.n_expert_used = 8;
  in.kv = {48, 4096, 4 * 128, GgmlType::F16, GgmlType::F16};
  in.scratch_bytes = default_scratch_bytes({2048, 768 * 8, 151936, 32, 4096, 512});
  return in;
}

// A small MoE: L layers, E experts of `eb` bytes each, trunk of one tensor.
PlanInput small_moe(uint64_t budget, int n_layer, int n_expert, int n_used, uint64_t eb,
                    uint64_t trunk, uint64_t scratch) {
  PlanInput in;
  in.vram_budget = budget;
  in.trunk.push_back({"token_embd.weight", 1000, true});
  in.trunk.push_back({"output.weight", trunk});
  for (int l = 0; l < n_layer; ++l) add_expert_layer(in, l, uint64_t(n_expert), eb / 4, eb / 2);
  in.experts.n_layer = n_layer;
  in.experts.n_expert = n_expert;
  in.experts.n_expert_used = n_used;
  in.kv = {n_layer, 256, 64, GgmlType::F32, GgmlType::F32};
  in.scratch_bytes = scratch;
  return in;
}

uint64_t fixed_bytes(const PlanInput& in) {
  uint64_t sum = in.scratch_bytes + in.kv.bytes();
  for (const auto& t : in.trunk)
    if (!t.cpu_ok) sum += t.bytes;
  return sum;
}

std::string error_of(const PlanInput& in) {
  try {
    make_plan(in);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Planner, KvAndScratchArithmetic) {
  KvSpec kv{48, 4096, 512, GgmlType::F16, GgmlType::F16};
  EXPECT_EQ(kv.bytes(), 48ull * 4096 * 512 * 2 * 2);  // 384 MiB
  kv.type_k = GgmlType::F32;
  kv.type_v = GgmlType::Q8_0;
  EXPECT_EQ(kv.bytes_per_token(), 48ull * (512 * 4 + 512 / 32 * 34));
  kv.kv_dim = 100;  // not a multiple of the Q8_0 block
  EXPECT_THROW(kv.bytes(), Error);
  kv = {1, 1, 64, GgmlType::Q4_K, GgmlType::F16};
  EXPECT_THROW(kv.bytes(), Error);

  const ScratchSpec s{2048, 6144, 151936, 32, 4096, 512};
  const uint64_t floats = 8 * 2048 + 3 * 6144 + 32 * 4096 + 151936;
  EXPECT_EQ(default_scratch_bytes(s), 512 * floats * 4 + kScratchSafetyMargin);
}

TEST(Planner, FitsAllIsResident) {
  const uint64_t eb = 4 * MiB;
  PlanInput in = small_moe(8 * GiB, 4, 16, 2, eb, 100 * MiB, 64 * MiB);
  const Plan p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::Resident);
  EXPECT_EQ(p.all_experts_bytes, 4 * 16 * eb);
  EXPECT_EQ(p.expert_cache_bytes, p.all_experts_bytes);
  EXPECT_EQ(p.expert_slots_per_layer, 16);
  EXPECT_EQ(p.expert_slots_total, 64);
  EXPECT_EQ(p.trunk_bytes, 100 * MiB);
  EXPECT_EQ(p.cpu_trunk_bytes, 1000u);
  EXPECT_EQ(p.staging_bytes, 0u);
  EXPECT_LE(p.vram_bytes(), in.vram_budget);
  for (const auto& t : p.tensors)
    EXPECT_EQ(t.where, t.name == "token_embd.weight" ? Placement::Where::Cpu : Placement::Where::Gpu)
        << t.name;
  EXPECT_NE(p.reason.find("fit"), std::string::npos) << p.reason;
}

TEST(Planner, Qwen3LikeUnder12GiBIsExpertCache) {
  const PlanInput in = qwen3_like(12 * GiB);
  const Plan p = make_plan(in);
  ASSERT_EQ(p.mode, PlanMode::ExpertCache) << p.reason;

  // One expert: gate + up (768 rows of 2048) and down (2048 rows of 768), Q4_K.
  const uint64_t expert = 3ull * 768 * (2048 / 256 * 144);
  EXPECT_EQ(expert, 2654208u);
  EXPECT_EQ(p.slot_bytes, expert);
  EXPECT_EQ(p.all_experts_bytes, 48ull * 128 * expert);

  // GPU trunk per layer: 2 norms, Q8_0 q/k/v/o, q/k norms, f32 router.
  const uint64_t layer = 2 * 8192 + 4096ull * 2176 + 2 * 512ull * 2176 + 2048ull * 4352 +
                         2 * 512 + 2048ull * 128 * 4;
  const uint64_t trunk = 48 * layer + 151936ull * 8 * 210 + 8192;
  EXPECT_EQ(p.trunk_bytes, trunk);
  EXPECT_NEAR(double(trunk) / GiB, 1.18, 0.01);
  EXPECT_EQ(p.kv_bytes, 384 * MiB);
  // Scratch: 512 tokens x (8*2048 + 3*6144 + 32*4096 + 151936) f32 + 256 MiB.
  EXPECT_EQ(p.scratch_bytes, 919339008u);
  // (12 GiB - 1269020672 - 402653184 - 919339008) / (48 * 2654208) = 80.8
  EXPECT_EQ(p.expert_slots_per_layer, 80);
  EXPECT_EQ(p.expert_slots_per_layer,
            int((12 * GiB - trunk - 384 * MiB - 919339008u) / (48 * expert)));
  EXPECT_EQ(p.expert_slots_total, 80 * 48);
  EXPECT_EQ(p.expert_cache_bytes, 80ull * 48 * expert);
  ASSERT_EQ(p.layer_slots.size(), 48u);
  for (int s : p.layer_slots) EXPECT_EQ(s, 80);
  EXPECT_EQ(p.staging_bytes, 2 * 8 * expert);
  EXPECT_LE(p.vram_bytes(), 12 * GiB);
  EXPECT_GT(12 * GiB - p.vram_bytes(), 0u);
  EXPECT_LT(12 * GiB - p.vram_bytes(), 48 * expert);  // less than one more slot per layer
  int cached = 0;
  for (const auto& t : p.tensors)
    if (t.where == Placement::Where::GpuCache) ++cached;
  EXPECT_EQ(cached, 48 * 3);
  EXPECT_EQ(p.tensors.size(), in.trunk.size() + in.experts.tensors.size());
}

TEST(Planner, TinyBudgetIsCpuMoe) {
  PlanInput in = qwen3_like(0);
  // Room for 15 slots per layer: below 2.0 x 8 used experts.
  in.vram_budget = fixed_bytes(in) + 15 * 48 * 2654208ull + 1000;
  Plan p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::CpuMoe) << p.reason;
  EXPECT_EQ(p.expert_slots_per_layer, 0);
  EXPECT_EQ(p.expert_cache_bytes, 0u);
  EXPECT_NE(p.reason.find("thrash"), std::string::npos) << p.reason;
  for (const auto& t : p.tensors)
    if (t.name.find("_exps") != std::string::npos) {
      EXPECT_EQ(t.where, Placement::Where::Cpu) << t.name;
    }

  // Exactly 16 slots reaches the threshold.
  in.vram_budget = fixed_bytes(in) + 16 * 48 * 2654208ull;
  p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::ExpertCache) << p.reason;
  EXPECT_EQ(p.expert_slots_per_layer, 16);
  // A stricter ratio turns the same budget into CpuMoe.
  in.capacity_ratio = 2.5;
  EXPECT_EQ(make_plan(in).mode, PlanMode::CpuMoe);
}

TEST(Planner, TrunkTooBigIsErrorWithNumbers) {
  PlanInput in = qwen3_like(4 * GiB);
  in.kv.n_ctx = 32768;  // 3 GiB of F16 KV
  const std::string msg = error_of(in);
  ASSERT_FALSE(msg.empty());
  EXPECT_NE(msg.find("budget is 4.00 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("KV cache 3.00 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ctx 32768"), std::string::npos) << msg;
  char needs[32];
  std::snprintf(needs, sizeof needs, "needs %.2f GiB", double(fixed_bytes(in)) / GiB);
  EXPECT_NE(msg.find(needs), std::string::npos) << msg;
  // The suggested context fits, and 256 more would not.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(msg, m, std::regex("--ctx ([0-9]+)"))) << msg;
  const int ctx = std::stoi(m[1]);
  EXPECT_EQ(ctx % 256, 0);
  in.kv.n_ctx = ctx;
  EXPECT_LE(fixed_bytes(in), in.vram_budget);
  in.kv.n_ctx = ctx + 256;
  EXPECT_GT(fixed_bytes(in), in.vram_budget);

  // When not even the trunk fits, shrinking the context cannot help.
  in = qwen3_like(1 * GiB);
  const std::string msg2 = error_of(in);
  EXPECT_NE(msg2.find("smaller quant"), std::string::npos) << msg2;
  EXPECT_EQ(msg2.find("--ctx"), std::string::npos) << msg2;

  // A budget under 1 GiB is printed in MiB, not as "0.00 GiB".
  in = qwen3_like(1 * MiB);
  const std::string msg3 = error_of(in);
  EXPECT_NE(msg3.find("budget is 1.0 MiB"), std::string::npos) << msg3;
}

TEST(Planner, ForcedModes) {
  const uint64_t eb = 2 * MiB;
  PlanInput in = small_moe(0, 8, 32, 4, eb, 50 * MiB, 32 * MiB);
  const uint64_t fixed = fixed_bytes(in);

  // Everything fits.
  in.vram_budget = fixed + 8 * 32 * eb;
  in.forced = PlanMode::Resident;
  EXPECT_EQ(make_plan(in).mode, PlanMode::Resident);
  in.forced = PlanMode::ExpertCache;
  Plan p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::ExpertCache);
  EXPECT_EQ(p.expert_slots_per_layer, 32);
  EXPECT_NE(p.reason.find("forced"), std::string::npos);
  in.forced = PlanMode::CpuMoe;
  p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::CpuMoe);
  EXPECT_EQ(p.expert_cache_bytes, 0u);
  in.pinned_per_layer = 3;  // CpuMoe keeps pinned experts in VRAM
  p = make_plan(in);
  EXPECT_EQ(p.expert_slots_per_layer, 3);
  EXPECT_EQ(p.expert_cache_bytes, 3 * 8 * eb);
  EXPECT_EQ(p.pinned_per_layer, 3);
  in.pinned_per_layer = 0;

  // One slot short of everything: forced Resident is impossible.
  in.vram_budget = fixed + 8 * 31 * eb;
  in.forced = PlanMode::Resident;
  EXPECT_NE(error_of(in).find("--moe-mode resident needs"), std::string::npos) << error_of(in);
  in.forced = PlanMode::Auto;
  EXPECT_EQ(make_plan(in).mode, PlanMode::ExpertCache);

  // 3 slots per layer (< 4 used): forced ExpertCache is impossible; auto picks CpuMoe.
  in.vram_budget = fixed + 8 * 3 * eb + eb;
  in.forced = PlanMode::ExpertCache;
  EXPECT_NE(error_of(in).find("at least 4 slots per layer"), std::string::npos) << error_of(in);
  in.forced = PlanMode::Auto;
  EXPECT_EQ(make_plan(in).mode, PlanMode::CpuMoe);
  // 5 slots: forced ExpertCache works (below the thrash ratio), auto says CpuMoe.
  in.vram_budget = fixed + 8 * 5 * eb;
  EXPECT_EQ(make_plan(in).mode, PlanMode::CpuMoe);
  in.forced = PlanMode::ExpertCache;
  p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::ExpertCache);
  EXPECT_EQ(p.expert_slots_per_layer, 5);
  // Pins need room beyond one token's experts.
  in.pinned_per_layer = 2;
  EXPECT_FALSE(error_of(in).empty());
  in.pinned_per_layer = 1;
  EXPECT_EQ(make_plan(in).pinned_per_layer, 1);
  in.pinned_per_layer = 29;  // > n_expert - n_used
  EXPECT_NE(error_of(in).find("cannot pin"), std::string::npos);

  // Dense models have no expert modes.
  PlanInput dense;
  dense.vram_budget = GiB;
  dense.trunk.push_back({"blk.0.ffn_up.weight", MiB});
  dense.kv = {1, 128, 64, GgmlType::F16, GgmlType::F16};
  EXPECT_EQ(make_plan(dense).mode, PlanMode::Resident);
  dense.forced = PlanMode::CpuMoe;
  EXPECT_NE(error_of(dense).find("MoE"), std::string::npos);

  EXPECT_EQ(parse_plan_mode("cache"), PlanMode::ExpertCache);
  EXPECT_EQ(parse_plan_mode("cpu-moe"), PlanMode::CpuMoe);
  EXPECT_STREQ(plan_mode_name(parse_plan_mode("resident")), "resident");
  EXPECT_THROW(parse_plan_mode("gpu"), Error);
}

TEST(Planner, UnevenLayersUseLargestExpertAsSlot) {
  PlanInput in = small_moe(0, 3, 8, 2, 4 * MiB, 10 * MiB, 10 * MiB);
  in.experts.tensors.clear();
  add_expert_layer(in, 0, 8, MiB, 2 * MiB);      // 4 MiB experts
  add_expert_layer(in, 2, 8, MiB, 3 * MiB);      // 5 MiB experts; layer 1 is dense
  in.vram_budget = fixed_bytes(in) + 2 * 6 * 5 * MiB + MiB;
  const Plan p = make_plan(in);
  // 2 MoE layers x 5 MiB slots: 61 MiB left gives 6 slots >= 2.0 x 2 used.
  EXPECT_EQ(p.slot_bytes, 5 * MiB);
  EXPECT_EQ(p.all_experts_bytes, 8 * 9 * MiB);
  EXPECT_EQ(p.mode, PlanMode::ExpertCache) << p.reason;
  EXPECT_EQ(p.expert_slots_per_layer, 6);
  EXPECT_EQ(p.expert_slots_total, 12);
  EXPECT_EQ(p.layer_slots, (std::vector<int>{6, 0, 6}));
  EXPECT_EQ(p.expert_cache_bytes, 12 * 5 * MiB);
}

TEST(Planner, RandomizedPlansRespectTheRules) {
  const unsigned seed = unsigned(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uni = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
  for (int iter = 0; iter < 300; ++iter) {
    const int n_layer = int(uni(1, 12)), n_expert = int(uni(1, 64));
    const int n_used = int(uni(1, uint64_t(n_expert)));
    const uint64_t eb = uni(1, 64) * 4096;
    PlanInput in = small_moe(0, n_layer, n_expert, n_used, eb, uni(1, 1000) * 4096, uni(0, 100) * 4096);
    in.capacity_ratio = double(uni(5, 40)) / 10.0;
    const uint64_t fixed = fixed_bytes(in), all = uint64_t(n_layer) * uint64_t(n_expert) * eb;
    in.vram_budget = uni(fixed / 2 + 1, fixed + all + all / 4 + 1);
    SCOPED_TRACE("iter " + std::to_string(iter));
    if (fixed > in.vram_budget) {
      EXPECT_NE(error_of(in).find("needs"), std::string::npos);
      continue;
    }
    const Plan p = make_plan(in);
    EXPECT_LE(p.vram_bytes(), in.vram_budget);
    const uint64_t slots = std::min<uint64_t>(uint64_t(n_expert), (in.vram_budget - fixed) / (uint64_t(n_layer) * eb));
    if (fixed + all <= in.vram_budget) {
      EXPECT_EQ(p.mode, PlanMode::Resident);
    } else if (double(slots) >= in.capacity_ratio * n_used && slots >= uint64_t(n_used)) {
      EXPECT_EQ(p.mode, PlanMode::ExpertCache);
      EXPECT_EQ(uint64_t(p.expert_slots_per_layer), slots);
      EXPECT_LT(in.vram_budget - p.vram_bytes(), uint64_t(n_layer) * eb + 1);
    } else {
      EXPECT_EQ(p.mode, PlanMode::CpuMoe);
      EXPECT_EQ(p.expert_slots_total, 0);
    }
  }
}

TEST(Planner, FormatPlanMentionsEveryGroup) {
  const PlanInput in = qwen3_like(12 * GiB);
  const Plan p = make_plan(in);
  const std::string text = format_plan(p);
  for (const char* group :
       {"token_embd.weight", "output.weight", "output_norm.weight", "blk.*.attn_q.weight",
        "blk.*.attn_k.weight", "blk.*.attn_v.weight", "blk.*.attn_output.weight",
        "blk.*.attn_norm.weight", "blk.*.attn_q_norm.weight", "blk.*.ffn_gate_inp.weight",
        "blk.*.ffn_norm.weight", "blk.*.ffn_gate_exps.weight", "blk.*.ffn_up_exps.weight",
        "blk.*.ffn_down_exps.weight", "KV cache (f16 K, f16 V, ctx 4096)", "scratch",
        "expert slot cache (80/layer", "upload staging", "total VRAM", "expert-cache",
        "gpu-cache", p.reason.c_str()})
    EXPECT_NE(text.find(group), std::string::npos) << group << "\n" << text;
  EXPECT_EQ(text.find("blk.0."), std::string::npos) << "layers are folded\n" << text;
  EXPECT_NE(text.find("384.0 MiB"), std::string::npos) << text;  // KV
  // KV share of the budget: 384 MiB / 12 GiB = 3.1%.
  EXPECT_NE(text.find("3.1%"), std::string::npos) << text;

  EXPECT_EQ(format_bytes(17), "17 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(512 * MiB), "512.0 MiB");
  EXPECT_EQ(format_bytes(3 * GiB / 2), "1.50 GiB");
}

TEST(Planner, ParseSize) {
  EXPECT_EQ(parse_size("12GiB"), 12 * GiB);
  EXPECT_EQ(parse_size("12G"), 12 * GiB);
  EXPECT_EQ(parse_size("12g"), 12 * GiB);
  EXPECT_EQ(parse_size("512MiB"), 512 * MiB);
  EXPECT_EQ(parse_size("512M"), 512 * MiB);
  EXPECT_EQ(parse_size("1.5GB"), 1500000000u);
  EXPECT_EQ(parse_size("1.5GiB"), 3 * GiB / 2);
  EXPECT_EQ(parse_size("1000000"), 1000000u);
  EXPECT_EQ(parse_size("1000000B"), 1000000u);
  EXPECT_EQ(parse_size(" 64 KiB "), 65536u);
  EXPECT_EQ(parse_size("2kb"), 2000u);
  EXPECT_EQ(parse_size("1TiB"), 1ull << 40);
  EXPECT_EQ(parse_size("0.5M"), 512 * 1024u);
  EXPECT_EQ(parse_size(".25K"), 256u);
  EXPECT_EQ(parse_size("18446744073709551615"), ~0ull);
  for (const char* bad : {"", "  ", "abc", "GiB", "12XB", "-1G", "1.5", "12 G B", "1e9",
                          "18446744073709551616", "20000000TiB", "1..5G", "0x10", "+5G", "."})
    EXPECT_THROW(parse_size(bad), Error) << "'" << bad << "'";
  try {
    parse_size("12QB");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("12QB"), std::string::npos) << e.what();
  }
}

// Offload modes reserve double-buffered prefill staging from what the cache
// could use beyond its minimum (a quarter at most); resident plans none.
TEST(Planner, PrefillStagingComesOutOfTheCacheBudget) {
  const uint64_t eb = 2 * MiB;
  PlanInput in = small_moe(0, 8, 32, 4, eb, 50 * MiB, 32 * MiB);
  in.prefill_staging_experts = 32;
  const uint64_t fixed = fixed_bytes(in);

  in.vram_budget = fixed + 8 * 32 * eb;  // everything fits: resident, no staging
  Plan p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::Resident);
  EXPECT_EQ(p.staging_slots, 0);
  EXPECT_EQ(p.staging_vram_bytes, 0u);

  in.vram_budget = fixed + 8 * 24 * eb;  // room for 24 slots/layer before staging
  p = make_plan(in);
  EXPECT_EQ(p.mode, PlanMode::ExpertCache);
  // spare beyond the 4-slot minimum: 8 layers x 20 slots; a quarter, double-buffered
  EXPECT_EQ(p.staging_slots, int(8 * 20 / 4 / 2));
  EXPECT_EQ(p.staging_vram_bytes, 2ull * p.staging_slots * eb);
  EXPECT_LE(p.vram_bytes(), in.vram_budget);
  EXPECT_GE(p.expert_slots_per_layer, 4);
  EXPECT_NE(format_plan(p).find("prefill expert staging"), std::string::npos) << format_plan(p);

  in.prefill_staging_experts = 0;  // not asked: the cache keeps everything
  EXPECT_EQ(make_plan(in).staging_slots, 0);
  EXPECT_EQ(make_plan(in).expert_slots_per_layer, 24);

  in.prefill_staging_experts = 32;
  in.forced = PlanMode::CpuMoe;  // no cache minimum: staging from the whole spare quarter
  p = make_plan(in);
  EXPECT_EQ(p.staging_slots, int(8 * 24 / 4 / 2));
  EXPECT_EQ(p.expert_cache_bytes, 0u);

  in.forced = PlanMode::Auto;
  in.vram_budget = fixed + 8 * 5 * eb;  // a quarter of 1 spare slot/layer is less than top-k: none
  EXPECT_EQ(make_plan(in).staging_slots, 0);
}
