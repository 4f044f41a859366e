// A lost device (VK_ERROR_DEVICE_LOST, injected on lavapipe by
// vk::set_device_lost_fault, what env VKMOE_FAULT_DEVICE_LOST=after:N sets for
// the CLI): eval throws vk::DeviceLost naming the loss, later calls fail at once
// instead of waiting, and the engine is destroyed without a hang or a crash.
#include <gtest/gtest.h>

#include "engine/forward/engine_select.h"
#include "engine/vulkan/vk_runtime.h"
#include "tests/test_util.h"

using namespace vkmoe;

namespace {

struct LostAfter {
  explicit LostAfter(int waits) { vk::set_device_lost_fault("after:" + std::to_string(waits)); }
  ~LostAfter() { vk::set_device_lost_fault("off"); }
};

class DeviceLost : public testing::TestWithParam<const char*> {};

TEST_P(DeviceLost, EvalThrowsAndTheEngineShutsDownCleanly) {
  const auto m = test::synth("arch=qwen3moe,n_layer=2,n_expert=8,n_expert_used=2", 7);
  for (int waits : {0, 1, 4, 12}) {
    SCOPED_TRACE("lost after " + std::to_string(waits) + " waits");
    EngineOptions o;
    o.n_ctx = 64;
    o.mode = parse_plan_mode(GetParam());
    auto e = make_engine(*m, o);
    e->eval({1, 2, 3, 4});  // warm: the engine works before the loss
    std::string msg;
    {
      LostAfter lost(waits);
      try {
        e->eval({5, 6, 7});
        for (int i = 0; i < 16; ++i) e->eval({int32_t(8 + i)});
      } catch (const vk::DeviceLost& err) {
        msg = err.what();
      }
      EXPECT_NE(msg.find("Vulkan device lost"), std::string::npos) << msg;
      EXPECT_THROW(e->eval({9}), vk::DeviceLost) << "a later eval must fail at once";
      e.reset();  // no hang, no exception out of the destructor
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, DeviceLost, testing::Values("resident", "expert-cache", "cpu-moe"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(DeviceLostFault, BadSpecsAreErrors) {
  EXPECT_THROW(vk::set_device_lost_fault("after:"), Error);
  EXPECT_THROW(vk::set_device_lost_fault("sometimes"), Error);
  EXPECT_NO_THROW(vk::set_device_lost_fault("off"));
}

}  // namespace
