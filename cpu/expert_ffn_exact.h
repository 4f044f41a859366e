#pragma once
// CPU experts with f32 activations: the same arithmetic as the GPU kernels
// (dequantized weights times f32 inputs, f32 accumulation), so offloading an
// expert to the CPU does not change the model's output beyond float rounding.
#include "cpu/expert_ffn.h"

namespace vkmoe {

// Same contract as moe_ffn_cpu (out overwritten; n == 0 leaves it untouched).
void moe_ffn_cpu_exact(const ExpertView* experts, const float* weights, int n, const float* x, float* out,
                       ThreadPool& pool);

// Dot of one quantized row with f32 x; scratch holds at least n floats.
float dot_row_dequant(GgmlType t, const uint8_t* row, const float* x, int64_t n, float* scratch);

}  // namespace vkmoe
