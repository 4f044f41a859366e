// Out of VRAM (on lavapipe): device allocations made to fail at chosen points
// by vk::set_device_alloc_fault (what env VKMOE_FAIL_DEVICE_ALLOC=after:N |
// over:SIZE | from:NAME sets for the CLI). The engine shrinks its expert cache or falls
// back to cpu-moe with one warning line and produces the same greedy text;
// when even the trunk does not fit, it fails with a one-line Error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "engine/forward/engine_select.h"
#include "engine/offload/plan_model.h"
#include "engine/vulkan/vk_runtime.h"
#include "tests/test_util.h"

using namespace vkmoe;

namespace {

// Sets a fault for its lifetime; counting starts now.
struct Fault {
  explicit Fault(const std::string& spec) { vk::set_device_alloc_fault(spec); }
  ~Fault() { vk::set_device_alloc_fault("off"); }
};

std::string over(uint64_t bytes) { return "over:" + std::to_string(bytes); }

std::vector<int32_t> greedy(Engine& e, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> out;
  auto logits = e.eval(prompt);
  for (int i = 0; i < n; ++i) {
    out.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    logits = e.eval({out.back()});
  }
  return out;
}

// N of "expert-cache (N slots/layer" in describe().
int cache_slots(const std::string& describe) {
  const size_t p = describe.find("expert-cache (");
  return p == std::string::npos ? -1 : std::atoi(describe.c_str() + p + 14);
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

class VramOom : public ::testing::Test {
 protected:
  static constexpr int kCtx = 64;
  const uint64_t seed = test::test_seed();
  std::unique_ptr<Model> m = test::synth("arch=qwen3moe,n_layer=3,n_expert=16,n_expert_used=2", seed);
  const std::vector<int32_t> prompt = {11, 42, 7, 300, 5, 77, 123, 9};
  EngineOptions base;
  std::vector<int32_t> want;  // the unconstrained resident engine's text
  uint64_t resident_vram = 0, experts_vram = 0;
  uint64_t trunk_vram = 0;    // weights the GPU needs, KV cache, activations
  uint64_t trunk_allocs = 0;  // device allocations they take

  void SetUp() override {
    vk::set_device_alloc_fault("off");
    base.n_ctx = kCtx;
    base.gemm = "tiled";  // f32 activations, like the CPU experts
    base.threads = 2;
    base.mode = PlanMode::Resident;
    auto resident = make_engine(*m, base);
    resident_vram = resident->vram_bytes();
    want = greedy(*resident, prompt, 8);
    for (const auto& l : m->layers())
      if (l.gate_exps)
        for (const Weight* w : {&l.gate_exps, &l.up_exps, &l.down_exps}) experts_vram += (w->t->nbytes + 15) / 16 * 16;
    vk::set_device_alloc_fault("off");  // resets the count
    EngineOptions o = base;
    o.mode = PlanMode::CpuMoe;
    o.vram_budget = budget_for_slots(0);  // no slots, no staging: the trunk only
    trunk_vram = make_engine(*m, o)->vram_bytes();
    trunk_allocs = vk::device_alloc_count();
    ASSERT_EQ(trunk_vram + experts_vram, resident_vram);
  }

  uint64_t budget_for_slots(int slots) const { return test::budget_for_slots(*m, kCtx, slots); }
  uint64_t slot_vram() const {  // one slot of every layer
    return uint64_t(m->config().n_layer) * test::unlimited_plan(*m, kCtx).slot_bytes;
  }

  // Creates an engine under `fault`, checks its mode, text, VRAM and the one
  // warning line naming `failed`; returns describe().
  std::string expect_fallback(const EngineOptions& o, const std::string& fault, const std::string& mode,
                              const std::string& failed, uint64_t limit = ~0ull) {
    SCOPED_TRACE("seed " + std::to_string(seed) + ", fault " + fault);
    Fault f(fault);
    testing::internal::CaptureStderr();
    auto e = make_engine(*m, o);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(e->moe_mode(), mode) << e->describe();
    EXPECT_NE(e->describe().find("experts " + mode), std::string::npos) << e->describe();
    EXPECT_LE(e->vram_bytes(), limit);
    EXPECT_EQ(greedy(*e, prompt, 8), want) << e->describe();
    EXPECT_EQ(count(err, "vkmoe: warning: out of VRAM allocating " + failed), 1) << err;
    EXPECT_EQ(count(err, "vkmoe: "), 1) << err;  // one line
    return e->describe();
  }
};

}  // namespace

// Resident experts that fail part-way through their upload become an expert
// cache in the VRAM they got, also when resident was asked for.
TEST_F(VramOom, ResidentExpertsFailMidUpload) {
  const uint64_t limit = trunk_vram + experts_vram / 2;
  expect_fallback(base, over(limit), "expert-cache", "the resident experts", limit);
  EngineOptions o = base;
  o.mode = PlanMode::Auto;
  expect_fallback(o, over(limit), "expert-cache", "the resident experts", limit);
}

// Every allocation after the trunk fails: experts run on the CPU.
TEST_F(VramOom, EverythingAfterTheTrunkFails) {
  EngineOptions o = base;
  o.mode = PlanMode::Auto;
  expect_fallback(o, "after:" + std::to_string(trunk_allocs), "cpu-moe", "the resident experts", trunk_vram);
  expect_fallback(o, over(trunk_vram), "cpu-moe", "the resident experts", trunk_vram);
  o.mode = PlanMode::ExpertCache;
  o.vram_budget = budget_for_slots(16);
  o.predict_prefetch = true;
  expect_fallback(o, over(trunk_vram), "cpu-moe", "the expert cache", trunk_vram);
}

// A slot pool that does not fit halves its slots until it does, and below
// the minimum (n_expert_used) the engine goes cpu-moe.
TEST_F(VramOom, SlotPoolShrinks) {
  EngineOptions o = base;
  o.mode = PlanMode::ExpertCache;
  o.vram_budget = budget_for_slots(16);
  const int planned = cache_slots(make_engine(*m, o)->describe());
  ASSERT_GT(planned, 5);
  const uint64_t limit = trunk_vram + 5 * slot_vram();
  const int slots = cache_slots(expect_fallback(o, over(limit), "expert-cache", "the expert cache", limit));
  EXPECT_LE(slots, 5);
  EXPECT_GE(slots, m->config().n_expert_used);
  EXPECT_EQ(planned % slots, 0) << "halved from " << planned;
  o.pin_per_layer = 1;
  expect_fallback(o, over(trunk_vram + slot_vram()), "cpu-moe", "the expert cache", trunk_vram + slot_vram());
}

// Prefill staging that does not fit shrinks, the cache keeps its slots.
TEST_F(VramOom, StagingShrinks) {
  EngineOptions o = base;
  o.mode = PlanMode::ExpertCache;
  o.vram_budget = budget_for_slots(12);
  std::string full;
  uint64_t full_vram = 0;
  {
    auto e = make_engine(*m, o);
    full = e->describe();
    full_vram = e->vram_bytes();
  }
  const size_t at = full.find(" slots/layer");
  ASSERT_NE(full.find("prefill staging"), std::string::npos) << full;
  ASSERT_EQ(full.find(", 0 prefill staging"), std::string::npos) << full;
  const std::string d = expect_fallback(o, over(full_vram - 1), "expert-cache", "the prefill staging", full_vram - 1);
  EXPECT_EQ(d.substr(0, at), full.substr(0, at));  // the same slots per layer
  EXPECT_NE(d, full);
}

// When the trunk itself does not fit, creating the engine fails with one line.
TEST_F(VramOom, TrunkThatDoesNotFitIsAnError) {
  for (const std::string& fault : {std::string("after:0"), "after:" + std::to_string(trunk_allocs - 1),
                                   over(trunk_vram - 1)}) {
    SCOPED_TRACE(fault);
    Fault f(fault);
    try {
      make_engine(*m, base);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("out of VRAM: ", 0), 0u) << msg;
      EXPECT_NE(msg.find("use a smaller -c"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

// No fault, no warning; the fault spec is checked and counts from when it is set.
TEST_F(VramOom, FaultSpec) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(greedy(*make_engine(*m, base), prompt, 8), want);
  EXPECT_EQ(count(testing::internal::GetCapturedStderr(), "warning"), 0);
  for (const char* bad : {"after:", "after:1M", "over:12X", "sometimes", "over:-1"})
    EXPECT_THROW(vk::set_device_alloc_fault(bad), Error) << bad;
  Fault f(over(resident_vram));
  EXPECT_EQ(vk::device_alloc_count(), 0u);
  EXPECT_EQ(make_engine(*m, base)->moe_mode(), "resident");
  EXPECT_EQ(vk::device_alloc_count(), trunk_allocs + 3 * uint64_t(m->config().n_layer));
}

// The injected failure is the real one's: vk::OutOfDeviceMemory, for device-local memory only.
TEST(VramFault, CreateBufferThrowsOutOfDeviceMemory) {
  auto ctx = vk::Context::create();
  Fault f("after:1");
  vk::Buffer a = ctx->create_buffer(1024, vk::MemoryKind::Device, "first");
  vk::Buffer host = ctx->create_buffer(1024, vk::MemoryKind::Upload, "host");
  try {
    ctx->create_buffer(2048, vk::MemoryKind::Device, "second");
    ADD_FAILURE() << "no error";
  } catch (const vk::OutOfDeviceMemory& e) {
    EXPECT_EQ(e.buffer, "second");
    EXPECT_EQ(e.bytes, 2048u);
    EXPECT_EQ(e.in_use, 1024u);
    EXPECT_TRUE(e.injected);
    EXPECT_EQ(std::string(e.what()).rfind("out of device memory allocating", 0), 0u) << e.what();
  }
  EXPECT_EQ(ctx->allocated_bytes(vk::MemoryKind::Device), 1024u);
  vk::set_device_alloc_fault("over:4K");
  vk::Buffer b = ctx->create_buffer(3072, vk::MemoryKind::Device, "fits");
  EXPECT_THROW(ctx->create_buffer(16, vk::MemoryKind::Device, "over"), vk::OutOfDeviceMemory);
  // from:NAME: that allocation and every later one fail, none before it.
  vk::set_device_alloc_fault("from:third");
  vk::Buffer c = ctx->create_buffer(16, vk::MemoryKind::Device, "third as a prefix");
  EXPECT_THROW(ctx->create_buffer(16, vk::MemoryKind::Device, "third"), vk::OutOfDeviceMemory);
  EXPECT_THROW(ctx->create_buffer(16, vk::MemoryKind::Device, "fourth"), vk::OutOfDeviceMemory);
  EXPECT_THROW(vk::set_device_alloc_fault("from:"), Error);
}
