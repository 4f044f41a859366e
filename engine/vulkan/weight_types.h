#pragma once
// The ggml weight types the GEMM kernels read, as the shaders see them: the
// shader-name suffix, one ggml block (elements, bytes), and the byte
// alignment their weight loads need (16-byte loads, 2 for the types whose
// blocks are only 2-byte aligned).
#include <cstdint>

#include "cpu/quant.h"

namespace vkmoe::vk {

struct GpuWeightType {
  const char* suffix;
  uint32_t block_elems, block_bytes, align;
};

// nullptr for types without GPU kernels.
inline const GpuWeightType* gpu_weight_type(GgmlType t) {
  static const GpuWeightType f32{"f32", 1, 4, 16}, f16{"f16", 1, 2, 16}, bf16{"bf16", 1, 2, 16},
      q8_0{"q8_0", 32, 34, 2}, q4_k{"q4_k", 256, 144, 16}, q5_k{"q5_k", 256, 176, 16}, q6_k{"q6_k", 256, 210, 2};
  switch (t) {
    case GgmlType::F32: return &f32;
    case GgmlType::F16: return &f16;
    case GgmlType::BF16: return &bf16;
    case GgmlType::Q8_0: return &q8_0;
    case GgmlType::Q4_K: return &q4_k;
    case GgmlType::Q5_K: return &q5_k;
    case GgmlType::Q6_K: return &q6_k;
    default: return nullptr;
  }
}

}  // namespace vkmoe::vk
