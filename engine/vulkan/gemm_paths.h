#pragma once
// The specialised GEMM paths behind record_gemm / record_gemm_ids (vk_gemm.h).
// ids == nullptr: dense product (GemmArgs); otherwise the expert-grouped one.
#include "engine/vulkan/vk_gemm.h"

namespace vkmoe::vk {

// gemm_coopmat.cpp: cooperative-matrix kernels (VK_KHR_cooperative_matrix).
bool gemm_coopmat_available(const Context& ctx, GgmlType t);
void record_gemm_coopmat(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids);

// gemm_int8.cpp: int8 activations with packed integer dot products.
bool gemm_int8_available(const Context& ctx, GgmlType t);
void record_gemm_int8(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids);

}  // namespace vkmoe::vk
