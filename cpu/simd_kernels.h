#pragma once
// Highway SIMD kernels (runtime dispatch) for quantized weight x activation
// dot products. Weights stay in their ggml block format. matvec_rows
// quantizes activations once per vector to the matching integer format so the
// inner loops are int8 x int8 -> int32, like ggml's vec_dot_*_q8_K;
// matvec_rows_f32 keeps them in f32 (dequantizes weight blocks in registers).
#include <cstddef>
#include <cstdint>

#include "cpu/quant.h"

namespace vkmoe {

// Activation format a weight type is multiplied against: Q8_K for the 256-element
// K/IQ4_XS types (Q2_K..Q6_K, IQ4_XS), Q8_0 for the 32-element ones (Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4), F32 for F32/F16/BF16. Throws Error
// for other weight types.
GgmlType activation_type(GgmlType weight_type);
size_t activation_bytes(GgmlType weight_type, int64_t n);
// Quantizes x[n] into xq (activation_bytes(weight_type, n) bytes). Equals
// quantize_row(activation_type(weight_type), ...) bit for bit.
void quantize_activation(GgmlType weight_type, const float* x, void* xq, int64_t n);

// y[r - r0] = dot(row r of w, x) for r in [r0, r1); w rows are row_bytes(wtype, n) apart.
void matvec_rows(GgmlType wtype, const uint8_t* w, const void* xq, float* y, int64_t r0, int64_t r1, int64_t n);
float vec_dot(GgmlType wtype, const void* wrow, const void* xq, int64_t n);
// Scalar reference of the same integer math (per-block int32 sums, float scales).
float vec_dot_ref(GgmlType wtype, const void* wrow, const void* xq, int64_t n);

// Exact-activation variant: y[r - r0] = sum_i dequant(W[r][i]) * x[i] with x
// in f32 (no activation quantization; the same math as the GPU kernels up to
// float summation order). Weight types: those of activation_type; other
// types or n not a multiple of the block size throw Error.
void matvec_rows_f32(GgmlType wtype, const uint8_t* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n);

const char* simd_target_name();  // the Highway target chosen at run time

}  // namespace vkmoe
