#include "cpu/finite_check.h"

namespace vkmoe {

bool all_finite(const float* x, size_t n) {
  // x * 0 is ±0 for finite x and NaN for NaN or ±Inf, so the sum of the
  // products is 0 exactly when all are finite. Explicit 4-wide vectors and
  // eight accumulators: -O2 leaves the plain loop scalar.
  typedef float V4 __attribute__((vector_size(16)));
  typedef float V4Unaligned __attribute__((vector_size(16), aligned(4)));
  constexpr int kAcc = 8;
  V4 acc[kAcc] = {};
  size_t i = 0;
  for (; i + 4 * kAcc <= n; i += 4 * kAcc)
    for (int k = 0; k < kAcc; ++k) acc[k] += *reinterpret_cast<const V4Unaligned*>(x + i + 4 * k) * 0.0f;
  V4 a = acc[0];
  for (int k = 1; k < kAcc; ++k) a += acc[k];
  float sum = a[0] + a[1] + a[2] + a[3];
  for (; i < n; ++i) sum += x[i] * 0.0f;
  return sum == 0.0f;
}

}  // namespace vkmoe
