#include "engine/forward/engine_select.h"

#include <sstream>

#include "engine/forward/cpu_forward.h"
#include "engine/forward/gpu_forward.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {
namespace {

class CpuEngine final : public Engine {
 public:
  CpuEngine(const Model& m, const EngineOptions& o, CpuForward::Kernels k)
      : fwd_(m, o.n_ctx, k, o.threads), simd_(k == CpuForward::Kernels::Simd) {}
  std::vector<float> eval(const std::vector<int32_t>& tokens) override { return fwd_.eval(tokens); }
  void reset() override { fwd_.reset(); }
  int n_ctx() const override { return fwd_.n_ctx(); }
  std::string describe() const override {
    return simd_ ? "cpu (Highway SIMD kernels)" : "cpu scalar reference";
  }

 private:
  CpuForward fwd_;
  bool simd_;
};

}  // namespace

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
