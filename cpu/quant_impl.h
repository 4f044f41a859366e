#pragma once
// Internal to cpu/quant*.cpp: shared fitting helpers and the per-family
// block converters that quant.cpp dispatches to.
#include <cstdint>

#include "cpu/quant.h"

namespace vkmoe::quant_impl {

// Round half to even (ggml's nearest_int).
int nearest_int(float v);

// Fit x[i] ~= scale * L[i] - min, L in [0, nmax], scale >= 0, min >= 0
// (least squares over a sweep of candidate step sizes).
void fit_scale_min(const float* x, int n, int nmax, float* scale, float* min);

// Symmetric fit x ~= scale * L with L in [-nlo, nlo - 1] (signed scale: the
// largest-magnitude value maps near -nlo).
float fit_scale_signed(const float* x, int n, int nlo);

// Index of the codebook entry (16 sorted int8 values) nearest to v.
int nearest_index16(const int8_t* values, float v);

// Converters for nb blocks of the 32-element types (quant_q32.cpp) and of
// Q2_K/Q3_K/IQ4_XS (quant_lowk.cpp). Return false for types they do not own.
bool dequantize_q32(GgmlType t, const void* src, float* dst, int64_t nb);
bool quantize_q32(GgmlType t, const float* src, void* dst, int64_t nb);
bool dequantize_lowk(GgmlType t, const void* src, float* dst, int64_t nb);
bool quantize_lowk(GgmlType t, const float* src, void* dst, int64_t nb);

// Codebook fit of one group of n values (IQ4_NL/IQ4_XS): returns the float
// scale d with x ~= d * values[L]; L receives the indices.
float fit_iq4_group(const float* x, int n, uint8_t* L);

}  // namespace vkmoe::quant_impl
