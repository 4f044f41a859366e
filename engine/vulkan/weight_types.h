#pragma once
// The ggml weight types the GEMM kernels read, as the shaders see them: the
// shader-name suffix, one ggml block (elements, bytes), the byte alignment
// their weight loads need (16-byte loads; 4, 2 or 1 for the types read in
// 32-, 16- or 8-bit units: shaders/wtype.glsl), and whether the
// cooperative-matrix kernels have a decoder for it.
#include <cstdint>

#include "cpu/quant.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

struct GpuWeightType {
  const char* suffix;
  uint32_t block_elems, block_bytes, align;
  bool coopmat;
};

// nullptr for types without GPU kernels.
inline const GpuWeightType* gpu_weight_type(GgmlType t) {
  static const GpuWeightType f32{"f32", 1, 4, 16, true}, f16{"f16", 1, 2, 16, true}, bf16{"bf16", 1, 2, 16, true},
      q8_0{"q8_0", 32, 34, 2, true}, q4_k{"q4_k", 256, 144, 16, true}, q5_k{"q5_k", 256, 176, 16, true},
      q6_k{"q6_k", 256, 210, 2, true}, q4_0{"q4_0", 32, 18, 2, false}, q4_1{"q4_1", 32, 20, 2, false},
      q5_0{"q5_0", 32, 22, 2, false}, q5_1{"q5_1", 32, 24, 2, false}, iq4_nl{"iq4_nl", 32, 18, 2, false},
      mxfp4{"mxfp4", 32, 17, 1, false}, q2_k{"q2_k", 256, 84, 4, false}, q3_k{"q3_k", 256, 110, 2, false},
      iq4_xs{"iq4_xs", 256, 136, 4, false};
  switch (t) {
    case GgmlType::F32: return &f32;
    case GgmlType::F16: return &f16;
    case GgmlType::BF16: return &bf16;
    case GgmlType::Q8_0: return &q8_0;
    case GgmlType::Q4_K: return &q4_k;
    case GgmlType::Q5_K: return &q5_k;
    case GgmlType::Q6_K: return &q6_k;
    case GgmlType::Q4_0: return &q4_0;
    case GgmlType::Q4_1: return &q4_1;
    case GgmlType::Q5_0: return &q5_0;
    case GgmlType::Q5_1: return &q5_1;
    case GgmlType::IQ4_NL: return &iq4_nl;
    case GgmlType::MXFP4: return &mxfp4;
    case GgmlType::Q2_K: return &q2_k;
    case GgmlType::Q3_K: return &q3_k;
    case GgmlType::IQ4_XS: return &iq4_xs;
    default: return nullptr;
  }
}

// What type t's matvec and tiled GEMM kernels need of the device beyond the
// basics: nullptr when it has it, else the missing feature's name.
inline const char* gpu_weight_type_missing_feature(const DeviceInfo& d, GgmlType t) {
  const GpuWeightType* L = gpu_weight_type(t);
  if (!L) return "kernels";
  if (L->align == 1 && !d.storage_8bit) return "8-bit storage buffers";
  if (L->align == 2 && !(d.storage_16bit && d.shader_int16)) return "16-bit storage buffers and int16";
  return nullptr;
}

}  // namespace vkmoe::vk
