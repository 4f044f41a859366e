#pragma once
// CPU evaluation of routed MoE experts (SwiGLU FFN) on quantized weights.
#include <cstdint>

#include "cpu/ffn_act.h"
#include "cpu/quant.h"

namespace vkmoe {

class ThreadPool;

// One expert's weights in ggml layout: gate/up are n_ff rows of n_embd,
// down is n_embd rows of n_ff. Optional f32 biases (null: none): gate_b and
// up_b of n_ff, down_b of n_embd. The expert computes
//   y = down (act(gate x + gate_b, up x + up_b)) + down_b
// and the caller's weight multiplies all of y (down_b included).
struct ExpertView {
  GgmlType gate_type, up_type, down_type;
  const uint8_t* gate;
  const uint8_t* up;
  const uint8_t* down;
  int n_embd;
  int n_ff;
  const float* gate_b = nullptr;
  const float* up_b = nullptr;
  const float* down_b = nullptr;
  GluAct act = GluAct::SiLU;
};

// How activations meet the quantized weights: Q8 quantizes x and the hidden
// vector to Q8_K/Q8_0 per block (integer dot products, fastest, ~2% relative
// error); F32 keeps them in f32 (dequantized weights times f32, like the GPU
// kernels, so offloading an expert does not change the result beyond rounding).
enum class CpuActivations { Q8, F32 };

// out[n_embd] = sum_k weights[k] * y_k (ExpertView: y = down(act(gate x + gate_b,
// up x + up_b)) + down_b; SiLU: silu(g) * u); out is
// overwritten. n == 0 is a no-op (out untouched: there is no n_embd to zero).
// All experts must share n_embd and n_ff; bad shapes/types throw Error.
void moe_ffn_cpu(const ExpertView* experts, const float* weights, int n, const float* x, float* out,
                 ThreadPool& pool, CpuActivations activations = CpuActivations::Q8);

}  // namespace vkmoe
