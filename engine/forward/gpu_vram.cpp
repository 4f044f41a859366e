// VRAM allocation of the GPU engine with fallbacks. The trunk (weights the
// GPU must hold, KV cache, activations) is allocated first and must fit.
// Routed experts can do with less: resident tensors that fail become an
// offload plan for the VRAM they got, a slot cache that fails halves its
// slots down to cpu-moe, prefill staging halves down to none. One warning
// line says what happened; describe()/moe_mode() report the result.
#include <algorithm>
#include <cstdio>

#include "cpu/thread_pool.h"
#include "engine/forward/gpu_engine.h"

namespace vkmoe {

using vk::MemoryKind;

// One thread's memcpy from the mapped file bounded the resident Qwen3-30B-A3B
// load at ~5.5 GB/s (PERF.md run 35). VKMOE_PARALLEL_UPLOAD=0: one thread.
ThreadPool* GpuEngine::load_pool() const {
  return pool_ && pool_->size() > 1 && !vk::env_off("VKMOE_PARALLEL_UPLOAD") ? pool_.get() : nullptr;
}

void GpuEngine::allocate_trunk(uint64_t kv_bytes, const ActivationShape& shape) {
  try {
    w_ = upload_model(*ctx_, m_, kv_bytes, load_pool());
    act_ = std::make_unique<Activations>(*ctx_, shape);
  } catch (const vk::OutOfDeviceMemory& e) {
    const uint64_t caches = c_.v_dim() > 0 ? 2 : 1;  // latent attention: K only
    const uint64_t need = plan_.trunk_bytes + uint64_t(c_.n_layer) * caches * kv_bytes + activation_bytes(shape);
    throw Error("out of VRAM: the weights the GPU needs, the KV cache and the activations take " +
                format_bytes(need) + " but allocating " + format_bytes(e.bytes) + " for " + e.buffer + " failed" +
                (e.injected ? " (injected by VKMOE_FAIL_DEVICE_ALLOC)" : "") +
                "; use a smaller -c, -ub or --kv-type q8_0, or close other GPU programs");
  }
}

// Slot and staging pools are each bound whole: keep them within one binding's range.
void GpuEngine::fit_offload_plan() {
  const uint64_t range = ctx_->info().max_storage_buffer_range;
  const uint64_t biggest = std::max({slice_max_[0], slice_max_[1], slice_max_[2]});
  plan_.expert_slots_per_layer = int(std::min<uint64_t>(plan_.expert_slots_per_layer, range / biggest));
  staging_slots_ = int(std::min<uint64_t>(plan_.staging_slots, range / biggest));
}

void GpuEngine::vram_shortfall(const vk::OutOfDeviceMemory& e, const char* what, uint64_t planned_bytes) {
  if (!vram_shortfall_.empty()) return;  // the warning names the first one
  vram_shortfall_ = std::string(what) + " (" + format_bytes(planned_bytes) + (e.injected ? ", injected" : "") + ")";
}

// Resident experts that do not fit: plan the offload modes for the VRAM the
// upload got before it failed.
void GpuEngine::allocate_resident_experts(PlanInput in) {
  const uint64_t before = ctx_->allocated_bytes(MemoryKind::Device);
  try {
    upload_experts(*ctx_, m_, w_, load_pool());
    return;
  } catch (const vk::OutOfDeviceMemory& e) {
    vram_shortfall(e, "the resident experts", plan_.all_experts_bytes);
    in.vram_budget = plan_.trunk_bytes + plan_.kv_bytes + plan_.scratch_bytes + (e.in_use - before);
  }
  in.forced = PlanMode::Auto;  // expert-cache or cpu-moe: the experts no longer fit
  try {
    plan_ = make_plan(in);
    if (plan_.mode == PlanMode::Resident) {
      in.forced = PlanMode::ExpertCache;
      plan_ = make_plan(in);
    }
  } catch (const Error&) {  // e.g. too little left for the experts to pin
    in.forced = PlanMode::CpuMoe;
    in.pinned_per_layer = 0;
    plan_ = make_plan(in);
  }
  offload_ = true;
  fit_offload_plan();
}

void GpuEngine::allocate_expert_cache() {
  const int planned = plan_.expert_slots_per_layer;
  const int min_cache = opt_.pin_per_layer + c_.n_expert_used;
  int slots = planned;
  for (;;) {
    try {
      cache_ = std::make_unique<ExpertCache>(*ctx_, m_, slots, plan_.mode == PlanMode::ExpertCache, stats_);
      break;
    } catch (const vk::OutOfDeviceMemory& e) {  // the partial pools are freed
      uint64_t moe_layers = 0;
      for (const auto& l : m_.layers()) moe_layers += bool(l.gate_exps);
      vram_shortfall(e, "the expert cache", uint64_t(planned) * moe_layers * plan_.slot_bytes);
      slots /= 2;
      if (plan_.mode == PlanMode::ExpertCache && slots < min_cache) {
        plan_.mode = PlanMode::CpuMoe;  // slots only for pinned experts, if any
        slots = std::min(slots, opt_.pin_per_layer);
      }
    }
  }
  plan_.expert_slots_per_layer = slots;
}

void GpuEngine::allocate_staging() {
  const uint64_t planned = 2 * uint64_t(staging_slots_) * (slice_max_[0] + slice_max_[1] + slice_max_[2]);
  host_experts_ = std::make_unique<HostExperts>(*ctx_, m_, load_pool());
  try {  // a transient device buffer; without it the default rate stands
    split_costs_.upload_bytes_per_s = measure_upload_rate(*ctx_);
  } catch (const vk::OutOfDeviceMemory&) {
  }
  while (staging_slots_ > 0) {
    try {
      for (Staging& s : staging_) {
        s.gate = ctx_->create_buffer(slice_max_[0] * staging_slots_, MemoryKind::Device, "gate expert staging");
        s.up = ctx_->create_buffer(slice_max_[1] * staging_slots_, MemoryKind::Device, "up expert staging");
        s.down = ctx_->create_buffer(slice_max_[2] * staging_slots_, MemoryKind::Device, "down expert staging");
      }
      break;
    } catch (const vk::OutOfDeviceMemory& e) {
      vram_shortfall(e, "the prefill staging", planned);
      for (Staging& s : staging_) s = Staging{};
      staging_slots_ /= 2;
    }
  }
  if (staging_slots_ == 0) {
    host_experts_.reset();  // prompts' missed experts all run on the CPU
    return;
  }
  calibrate_cpu_experts();
}

void GpuEngine::warn_vram_fallback(int planned_staging) const {
  std::string now;
  if (plan_.mode == PlanMode::ExpertCache)
    now = "using " + std::to_string(plan_.expert_slots_per_layer) + " slots/layer (expert-cache)";
  else
    now = "experts run on the CPU (cpu-moe" +
          (plan_.expert_slots_per_layer > 0 ? ", " + std::to_string(plan_.expert_slots_per_layer) + " pinned/layer"
                                            : std::string()) +
          ")";
  if (staging_slots_ != planned_staging)
    now += staging_slots_ > 0 ? ", " + std::to_string(staging_slots_) + " prefill staging slot" +
                                    (staging_slots_ > 1 ? "s" : "")
                              : ", no prefill staging";
  std::fprintf(stderr, "vkmoe: warning: out of VRAM allocating %s; %s\n", vram_shortfall_.c_str(), now.c_str());
}

}  // namespace vkmoe
