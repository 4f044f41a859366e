#pragma once
// The specialised GEMM paths behind record_gemm / record_gemm_ids (vk_gemm.h).
// ids == nullptr: dense product (GemmArgs); otherwise the expert-grouped one.
#include "engine/vulkan/vk_gemm.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe::vk {

// What both cooperative-matrix paths need besides the extension: a weight
// type they decode, Vulkan 1.3, f16 arithmetic, 16-bit storage and int16.
// (Other types run on the tiled path under GemmPath::Auto.)
inline bool coopmat_basics(const DeviceInfo& d, GgmlType t) {
  const GpuWeightType* w = gpu_weight_type(t);
  return w && w->coopmat && d.api_version >= VK_API_VERSION_1_3 && d.shader_float16 && d.storage_16bit &&
         d.shader_int16;
}

// gemm_coopmat.cpp: cooperative-matrix kernels (VK_KHR_cooperative_matrix).
bool gemm_coopmat_available(const Context& ctx, GgmlType t);
void record_gemm_coopmat(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids);
// The tile and split count (0: unsplit) record_gemm_coopmat gives a dense
// product of nrows x ncols weights over n_tokens on device d with split_room
// bytes of split-K room (0: none); an empty tile where none fits.
struct CoopmatPlan {
  std::string tile;
  uint32_t splits = 0;
};
CoopmatPlan gemm_coopmat_plan(const DeviceInfo& d, uint32_t nrows, uint32_t ncols, uint32_t n_tokens,
                              uint64_t split_room);

// gemm_coopmat2.cpp: NVIDIA cooperative-matrix-2 kernels (VK_NV_cooperative_matrix2).
bool gemm_coopmat2_available(const Context& ctx, GgmlType t);
// Scratch bytes for the f16 activation rows: n_rows = n_tokens (dense) or layout.max_slots().
uint64_t gemm_coopmat2_scratch_bytes(uint32_t ncols, uint32_t n_rows);
// Whether this product's alignment and layout suit the kernel (weights binding
// offset, vec4 activation rows, expert stride in whole blocks, scratch size).
bool gemm_coopmat2_applies(const Context& ctx, const GemmArgs& a, const GemmIdsArgs* ids);
void record_gemm_coopmat2(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids);

// gemm_int8.cpp: int8 activations with packed integer dot products.
bool gemm_int8_available(const Context& ctx, GgmlType t);
// Scratch bytes for n_rows activation rows of ncols (multiple of 32) quantized to int8 blocks:
// n_rows = n_tokens (dense, and expert-grouped with gather_x) or layout.max_slots().
uint64_t gemm_int8_scratch_bytes(uint32_t ncols, uint32_t n_rows);
void record_gemm_int8(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids);

}  // namespace vkmoe::vk
