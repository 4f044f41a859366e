#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "cpu/quant.h"

namespace vkmoe {

// Whether none of x[0..n) is NaN or infinite (the engine checks every token's
// logits; bench_cpu_kernels measures what that costs).
bool all_finite(const float* x, size_t n);

// Where tensor data holds a NaN or infinity: the block index (the element for
// F32/F16/BF16) and which field ("value", "scale d", "min scale dmin").
struct NonFiniteBlock {
  int64_t block;
  const char* field;
};
// The first such block among blocks [begin, end) of data of type t. For the
// quantized types the floats are the blocks' scales (and mins): those are read
// directly for the types whose layout is listed here (all but Q8_K), others are
// dequantized block by block (t must be supported by dequantize_row).
std::optional<NonFiniteBlock> find_non_finite_block(GgmlType t, const void* data, int64_t begin, int64_t end);

}  // namespace vkmoe
