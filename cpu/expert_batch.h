#pragma once
// One routed expert applied to several tokens at once (prompt processing in
// offload modes), reading its weights once for all of them:
//   out[tok[i]*out_stride ..] += weight[i] * y(x_i)   (y: see ExpertView; its
// activation and optional biases)
// with x_i = x + tok[i]*x_stride. Rows of the three matrices are split over
// the pool's threads; token i's output rows are written by one thread each.
#include <cstdint>

#include "cpu/expert_ffn.h"

namespace vkmoe {

class ThreadPool;

struct ExpertBatch {
  ExpertView expert;
  const int32_t* tokens = nullptr;
  const float* weights = nullptr;
  int n = 0;
};

// Runs every batch (each one expert with its tokens) and accumulates into out.
// CpuActivations::F32 matches the scalar reference to float rounding.
void expert_ffn_batched(const ExpertBatch* batches, int n_batches, const float* x, int64_t x_stride, float* out,
                        int64_t out_stride, ThreadPool& pool, CpuActivations act = CpuActivations::F32);

}  // namespace vkmoe
