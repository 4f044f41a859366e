#pragma once
// GPU matrix-vector products over ggml-layout weights (shaders/matvec.comp):
//   y[r] = (accumulate ? y[r] : 0) + sum_i W[r][i] * x[i]
// W rows are row_bytes(type, ncols) bytes (ggml blocks), x and y are f32.
#include <cstdint>

#include "cpu/moe_route.h"
#include "cpu/quant.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

// Types with int8-activation kernels (shaders/q8x_type.glsl).
bool q8x_supported_type(GgmlType t);

// Weight types with a GPU matvec: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, IQ4_XS (gpu_weight_type_missing_feature:
// what some need of the device).
bool matvec_supported(GgmlType t);
// Whether the int8-x path (MatvecConfig::quant_x = 1) is faster than the f32-x
// one for this product (glu_input: MatvecArgs::glu_up bound) on devices with
// accelerated integer dot products.
bool q8x_pays(GgmlType t, uint32_t nrows, uint32_t n_items, bool glu_input = false);
// Whether int8 activations are the default on this device: where it accelerates
// packed integer dot products, as llama.cpp's decode does.
bool q8x_by_default(const DeviceInfo& dev);
// MatvecConfig::quant_x for one product: 1 where int8 activations are wanted
// (q8x_by_default, or forced) and q8x_pays.
int quant_x_for(bool int8_wanted, GgmlType t, uint32_t nrows, uint32_t n_items, bool glu_input = false);

// Launch shape; 0 / -1 fields are chosen automatically (recommended).
struct MatvecConfig {
  uint32_t workgroup = 0;        // threads per workgroup
  uint32_t threads_per_row = 0;  // lanes sharing one row (power of 2, <= workgroup)
  uint32_t rows_per_thread = 0;  // 1..8 rows each lane works on at once
  int subgroup = -1;             // 1: subgroup reductions, 0: shared memory only
  int prefetch = -1;             // 1: load the next unit's weights before computing (default)
  // 1: Q8_0/Q4_K/Q5_K/Q6_K only: quantize x to int8 blocks in shared memory and use
  // packed integer dot products (shaders/matvec_q8x.comp); needs
  // VK_KHR_shader_integer_dot_product, subgroup shuffles and threads_per_row <=
  // subgroup size, else it falls back to 0. Default 0 (the engine asks for it
  // where q8x_pays). Adds the Q8 activation rounding error (<= sum_i |w_i| *
  // max|x over i's 32-block| / 254).
  int quant_x = -1;
};

struct MatvecArgs {
  GgmlType type = GgmlType::F32;
  uint32_t ncols = 0, nrows = 0;  // ncols multiple of the block size (and of 8)
  // Weights: binding w, matrix starting w_offset bytes into it. Alignment of
  // (binding offset + w_offset): 16 bytes for F32/F16/BF16/Q4_K/Q5_K, 2 for Q8_0/Q6_K.
  BufferRange w;
  uint64_t w_offset = 0;
  BufferRange x;          // f32; x_offset (floats) must be a multiple of 4
  uint32_t x_offset = 0;
  BufferRange y;          // f32
  uint32_t y_offset = 0;
  bool accumulate = false;
  // Fused SwiGLU: when glu_up is bound, the input is act(x[i], glu_up[i]) at
  // the same offsets and strides (act as GpuOps::swiglu: 0 SiLU, 1 gpt-oss's).
  BufferRange glu_up;
  uint32_t glu_act = 0;
};

// MoE variant: for j in [0, n_ids): e = ids[ids_offset + j] (int32); if
// 0 <= e < n_experts, y[y_offset + j*y_stride + r] (+)= W_e[r] . x[x_offset +
// j*x_stride ..], with W_e at w_offset + e*expert_stride bytes; otherwise
// item j is skipped (its y is left untouched). x_stride 0 = shared input.
struct MatvecIdsArgs : MatvecArgs {
  BufferRange ids;
  uint32_t ids_offset = 0;  // int32 elements
  uint32_t n_ids = 0;
  uint32_t n_experts = 0;
  uint64_t expert_stride = 0;  // bytes between experts (usually nrows * row_bytes)
  uint32_t x_stride = 0, y_stride = 0;  // floats; x_stride multiple of 4
};

// Fused router top-k of a single product's output (record_matvec_topk): once
// all nrows (= n_expert) logits of y are written, the dispatch's last
// workgroup routes them as record_moe_topk does for one token: ids and
// weights [out_offset + j] for j < k. counter[counter_index] (a uint in
// device memory, 0 before the dispatch) counts finished workgroups and is
// left at 0.
struct MatvecTopkTail {
  BufferRange ids, weights;
  BufferRange bias;  // n_expert floats, or empty: none
  uint32_t out_offset = 0, k = 0;
  RouterParams router;
  BufferRange counter;
  uint32_t counter_index = 0;
  // Folded RMS norm: when norm_w is bound (ncols floats), the product's input
  // is x / sqrt(mean(x^2) + norm_eps) * norm_w (GpuOps::rms_norm's), each row
  // group summing x^2 as it reads x, and the last workgroup also writes that
  // input to norm_out[norm_out_offset ..] (a multiple of 4) for the products
  // after it. A non-finite sum lowers the uint norm_flag to norm_check when
  // that is not 0.
  BufferRange norm_w, norm_flag, norm_out;
  uint32_t norm_out_offset = 0, norm_check = 0;
  float norm_eps = 0.f;
};

// Push-constant block shared by all variants (must match matvec.comp).
struct MatvecPush {
  uint32_t ncols, nrows, w_offset, x_offset, y_offset, accumulate;
  uint32_t row_blocks;  // workgroups along the rows
  uint32_t expert_stride, n_experts, ids_offset, x_stride, y_stride;
  uint32_t tail_out_offset, tail_counter;
  uint32_t topk_k, topk_normalize, topk_gating, topk_has_bias, topk_n_group, topk_topk_group;
  float topk_scale;
  float norm_eps;
  uint32_t norm_check, norm_out_offset;
};

// The configuration record_matvec* would use (after resolving the 0 fields).
MatvecConfig matvec_config(const DeviceInfo& dev, GgmlType t, uint32_t ncols, uint32_t nrows,
                           uint32_t n_items, const MatvecConfig& want = {});

// Record one dispatch. Throw Error for unsupported types, shapes or alignment.
// No barrier is recorded: call rec.barrier() before reading y.
void record_matvec(Recorder& rec, const MatvecArgs& a, const MatvecConfig& cfg = {});
// The router product and its top-k in one dispatch. Returns false, recording
// nothing, where the fused kernel does not apply (its configuration lacks
// subgroup reductions, or more than 32 experts per invocation).
bool record_matvec_topk(Recorder& rec, const MatvecArgs& a, const MatvecTopkTail& tail, const MatvecConfig& cfg = {});
void record_matvec_ids(Recorder& rec, const MatvecIdsArgs& a, const MatvecConfig& cfg = {});

}  // namespace vkmoe::vk
