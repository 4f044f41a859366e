#pragma once
// The model's trunk (and, in resident mode, its routed experts) in VRAM.
#include <cstdint>
#include <vector>

#include "cpu/quant.h"
#include "engine/model/model.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {

class ThreadPool;

// A weight matrix (or vector: nrows 1) in VRAM. Vectors (norms, biases) are
// always stored as f32, whatever their type in the file.
struct GpuTensor {
  vk::Buffer buf;
  GgmlType type = GgmlType::F32;
  uint32_t ncols = 0, nrows = 0;
  explicit operator bool() const { return static_cast<bool>(buf); }
};

struct GpuLayer {
  GpuTensor attn_norm, wq, wk, wv, wo, bq, bk, bv, bo, attn_sinks, q_norm, k_norm, ffn_norm;
  // Latent attention (wq without a q bottleneck). wkv_a's rows are reordered
  // [rope key (n_rot) | latent (kv_lora)], the layout of a cached row.
  GpuTensor wq_a, q_a_norm, wq_b, wkv_a, kv_a_norm, wk_b, wv_b;
  GpuTensor ffn_gate, ffn_up, ffn_down, router, router_b, exp_probs_b, shexp_gate, gate_shexp, up_shexp, down_shexp;
  GpuTensor gate_exps_b, up_exps_b, down_exps_b;  // per-expert biases, f32 {width, n_expert}
  GpuTensor gate_exps, up_exps, down_exps;  // resident experts (empty in offload modes)
  vk::Buffer k_cache, v_cache;  // no v_cache for latent attention (values are read from k_cache)
};

struct GpuModel {
  std::vector<GpuLayer> layers;
  GpuTensor output_norm, output;
};

// Uploads every trunk tensor and allocates a KV cache of kv_bytes_per_layer
// for each of K and V per layer (K only for latent attention). Prints progress to stderr when the upload is large.
// pool (may be null): its threads fill the staging buffers.
GpuModel upload_model(vk::Context& ctx, const Model& m, uint64_t kv_bytes_per_layer, ThreadPool* pool);
// Uploads the routed experts of every MoE layer into g (resident mode). When
// an allocation fails (vk::OutOfDeviceMemory) it frees what it allocated,
// waits for its copies and rethrows.
void upload_experts(vk::Context& ctx, const Model& m, GpuModel& g, ThreadPool* pool);

}  // namespace vkmoe
