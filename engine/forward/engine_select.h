#pragma once
// One interface over the CPU and Vulkan forward passes, chosen by --backend.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cpu/thread_pool.h"
#include "engine/model/model.h"
#include "planner/planner.h"

namespace vkmoe {

struct EngineOptions {
  std::string backend = "gpu";  // gpu | cpu | ref
  int n_ctx = 4096;
  int n_ubatch = 512;  // tokens per batched forward pass (prompt processing)
  std::string kv_type = "f16";  // KV cache element type: f16 | q8_0 | f32
  // GEMM kernels of prompt processing: auto | tiled (f32 activations, closest
  // to decode) | int8 (integer dot products) | coopmat (cooperative matrices).
  std::string gemm = "auto";
  int device = -1;
  uint64_t vram_budget = 0;  // 0: the device's free memory
  PlanMode mode = PlanMode::Auto;
  bool predict_prefetch = false;
  bool expert_stats = false;
  int threads = 0;
  ThreadPlacement placement;  // pinning and polling of the CPU threads
  // CPU experts with Q8-quantized activations (several times faster, ~1%
  // different output) instead of f32 activations (match the GPU path to
  // rounding). Off here for the equivalence tests; the CLI turns it on unless
  // --cpu-f32.
  bool cpu_q8 = false;
  // The GPU's one-token products of quantized weights on int8-quantized
  // activations (packed integer dot products; ~1% different output, as
  // llama.cpp's) where that pays, or on f32 activations (the CPU reference to
  // rounding). Auto: on devices with accelerated 4x8-bit dot products. Off here
  // for the equivalence tests; the CLI uses Auto unless --gpu-f32.
  enum class GpuQ8 { Off, Auto, On };
  GpuQ8 gpu_q8 = GpuQ8::Off;
  // Experts per layer pinned in VRAM once the prompt has been processed (the
  // most frequently routed ones so far); also in cpu-moe mode.
  int pin_per_layer = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Appends tokens to the context; returns the logits of the last one. Throws
  // Error when they are not finite, naming where NaN/Inf first appeared.
  std::vector<float> eval(const std::vector<int32_t>& tokens);
  // The same, without a copy: a view valid until the next eval, eval_view or
  // reset (the GPU engines' mapped readback memory, which the host then
  // reads only where the caller does: a sampler, not a benchmark).
  std::span<const float> eval_view(const std::vector<int32_t>& tokens);
  virtual void reset() = 0;
  // Keeps the first n_keep tokens of the context (the KV cache of a shared
  // prefix is reused); 0 <= n_keep <= n_past().
  virtual void truncate(int n_keep) = 0;
  virtual int n_past() const = 0;  // tokens in the context
  virtual int n_ctx() const = 0;
  virtual std::string describe() const = 0;
  virtual std::string stats_report() const { return "no expert statistics for this backend\n"; }
  // Where routed experts live: "resident", "expert-cache", "cpu-moe"; empty
  // for backends without expert placement (cpu, ref).
  virtual std::string moe_mode() const { return ""; }
  // Device memory in use (0 for CPU backends).
  virtual uint64_t vram_bytes() const { return 0; }

 protected:
  // The logits of the last token, valid until the next forward or reset.
  virtual std::span<const float> forward(const std::vector<int32_t>& tokens) = 0;
  // The first place the forward pass produced a non-finite value since
  // reset(), as a NonFiniteSite code (0: none seen or not tracked).
  virtual uint32_t first_non_finite() const { return 0; }
  // Whether forward's logits are all finite (the GPU engines check on the device).
  virtual bool logits_finite(std::span<const float> logits) const;
};

std::unique_ptr<Engine> make_engine(const Model& m, const EngineOptions& o);
// Vulkan devices as text (throws Error when no driver is present).
std::string describe_devices();
uint64_t device_free_vram(int device);

}  // namespace vkmoe
