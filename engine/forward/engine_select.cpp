#include "engine/forward/engine_select.h"

#include <sstream>

#include "engine/forward/cpu_forward.h"
#include "engine/forward/non_finite.h"
#include "engine/forward/gpu_forward.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {
namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(const Model& m, const EngineOptions& o, CpuForward::Kernels k)
      : fwd_(m, o.n_ctx, k, o.threads, o.placement), simd_(k == CpuForward::Kernels::Simd) {}
  void reset() override { fwd_.reset(); }
  void truncate(int n_keep) override { fwd_.truncate(n_keep); }
  int n_past() const override { return fwd_.pos(); }
  int n_ctx() const override { return fwd_.n_ctx(); }
  std::string describe() const override {
    return simd_ ? "cpu (Highway SIMD kernels)" : "cpu scalar reference";
  }

 protected:
  std::span<const float> forward(const std::vector<int32_t>& tokens) override {
    last_ = fwd_.eval(tokens);
    return last_;
  }
  uint32_t first_non_finite() const override { return fwd_.first_non_finite(); }

 private:
  CpuForward fwd_;
  bool simd_;
  std::vector<float> last_;
};

}  // namespace

bool Engine::logits_finite(std::span<const float> logits) const { return all_finite(logits.data(), logits.size()); }

std::span<const float> Engine::eval_view(const std::vector<int32_t>& tokens) {
  const std::span<const float> logits = forward(tokens);
  // A lost grid wait fails the token even where its poison did not reach the
  // logits (e.g. a last workgroup's output not written: stale, finite values).
  if (!logits_finite(logits) || first_non_finite() == non_finite_site::kGridWaitLost) {
    const uint32_t site = first_non_finite();
    if (site == non_finite_site::kGridWaitLost)
      throw Error("a fused GPU dispatch's workgroups did not all run at once (its wait timed out); "
                  "run with VKMOE_MOE_FUSED=0");
    throw Error("the model produced non-finite logits (NaN/Inf)" +
                (site ? "; they first appeared in " + describe_non_finite_site(site) : std::string()) +
                ": the model's weights or hyper-parameters are broken");
  }
  return logits;
}

std::vector<float> Engine::eval(const std::vector<int32_t>& tokens) {
  const std::span<const float> logits = eval_view(tokens);
  return std::vector<float>(logits.begin(), logits.end());
}

std::unique_ptr<Engine> make_engine(const Model& m, const EngineOptions& o) {
  if (o.backend == "gpu") return make_gpu_engine(m, o);
  if (o.backend == "cpu") return std::make_unique<CpuEngine>(m, o, CpuForward::Kernels::Simd);
  if (o.backend == "ref") return std::make_unique<CpuEngine>(m, o, CpuForward::Kernels::Scalar);
  throw Error("unknown backend '" + o.backend + "' (gpu, cpu, ref)");
}

std::string describe_devices() {
  std::ostringstream o;
  for (const auto& d : vk::list_devices()) o << "device " << d.index << ": " << d.summary() << "\n";
  return o.str();
}

uint64_t device_free_vram(int device) {
  auto ctx = vk::Context::create(device);
  return ctx->memory_budget().free();
}

}  // namespace vkmoe
