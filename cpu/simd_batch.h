#pragma once
// Highway kernels for one weight matrix times several activation vectors
// (batched prompt processing): each tile of weight rows is dequantized to f32
// once and then multiplied against all the vectors, so the weights are read
// and decoded once per call instead of once per token.
#include <cstdint>

#include "cpu/quant.h"

namespace vkmoe {

// y[t * y_stride + (r - r0)] = sum_i dequant(W[r][i]) * x[t][i] for r in
// [r0, r1), t in [0, n_tok); W rows are row_bytes(wtype, n) apart, x[t] points
// to n floats. Types as matvec_rows_f32 (others or n not a whole number of
// blocks throw Error). Each (r, t)
// result is bit for bit the same whatever r0, r1, n_tok and the position of t
// (one f32 accumulator vector per pair, the same operation sequence).
void matmul_rows_f32(GgmlType wtype, const uint8_t* w, const float* const* x, int n_tok, float* y, int64_t y_stride,
                     int64_t r0, int64_t r1, int64_t n);

}  // namespace vkmoe
