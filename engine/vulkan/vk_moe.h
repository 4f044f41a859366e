#pragma once
// MoE routing kernels for a ubatch of tokens (shaders/moe_*.comp):
// router top-k per token, grouping of the (token, k) pairs by expert into a
// MoeTable, and the weighted combine of the expert outputs back into tokens.
#include <cstdint>
#include <vector>

#include "cpu/moe_route.h"
#include "engine/vulkan/moe_table.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

// For each token t < n_tokens: cpu/moe_route.h's route_topk of logits[t *
// logit_stride + e] (e < n_expert) with the selection bias (n_expert floats;
// an empty range: none): ids[t*k + j] (int32) and weights[t*k + j]. The same
// ids except where float rounding ties two selection scores (the GPU's exp and
// division), weights within 1e-5 relative. Non-finite logits never select an
// out-of-range id.
struct MoeTopkArgs {
  BufferRange logits, ids, weights;
  uint32_t n_tokens = 0, n_expert = 0, k = 0, logit_stride = 0;
  RouterParams router;  // n_group <= 64
  BufferRange bias;
  // The logits as the sum, in plane order, of `splits` planes split_plane
  // floats apart (a split-K product's partials, vk::GemmSplitSum).
  uint32_t splits = 1, split_plane = 0;
};
void record_moe_topk(Recorder& rec, const MoeTopkArgs& a);
// Throws Error unless the top-k kernels take these parameters
// (1 <= k <= min(n_expert, 64), n_expert <= 1024, n_group <= 64 dividing n_expert).
void check_topk_params(uint32_t n_expert, uint32_t k, const RouterParams& rp);

// Builds the MoeTable of ids[n_tokens * k] (expert ids < n_expert) on the GPU.
struct MoeGroupArgs {
  BufferRange ids, table;
  MoeTableLayout layout;
  uint32_t n_expert = 0;
};
void record_moe_group(Recorder& rec, const MoeGroupArgs& a);

// x[t*x_stride + i] += sum_j weights[t*k + j] * y[(t*k + j)*y_stride + i]
// over i < n, pairs with slot kMoeNoSlot skipped, j in increasing order: y has
// a row per routing pair (the down product written with GemmIdsArgs::y_by_pair).
struct MoeCombineArgs {
  BufferRange y, weights, table, x;
  MoeTableLayout layout;
  uint32_t n = 0, y_stride = 0, x_stride = 0;
  // With norm_w: also xn = rmsnorm(x) * norm_w (the next layer's attention
  // norm) at x's offset and stride, and its f16 copy into xh when xh is set;
  // a non-finite row lowers flags[0] to check. n and the strides multiples of 4.
  BufferRange norm_w, xn, xh, flags;
  float eps = 0.f;
  uint32_t check = 0;
};
void record_moe_combine(Recorder& rec, const MoeCombineArgs& a);

// The same table built on the host (offload modes). ids[t*k + j] are expert
// ids; group_of(expert) gives the weight-buffer index to use for it (cache
// slot) or -1 when that expert is not run by this GPU pass (its pairs get
// kMoeNoSlot). words must hold layout.words values.
void build_moe_table(const int32_t* ids, const MoeTableLayout& layout, const int32_t* group_of_expert,
                     uint32_t n_expert, uint32_t* words);

}  // namespace vkmoe::vk
