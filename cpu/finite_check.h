#pragma once
#include <cstddef>

namespace vkmoe {

// Whether none of x[0..n) is NaN or infinite (the engine checks every token's
// logits; bench_cpu_kernels measures what that costs).
bool all_finite(const float* x, size_t n);

}  // namespace vkmoe
