// Included by matvec.comp with TAIL_TOPK: once every workgroup has written
// its rows of y (the router's logits), the last one to finish (counted on
// counter[tail_counter], which it leaves at 0 again) routes them with
// moe_topk.glsl: ids / weights [tail_out_offset + j], j < k. This saves the
// top-k dispatch and the barrier before it.
layout(set = 0, binding = 3) writeonly buffer Ids { int topk_ids[]; };
layout(set = 0, binding = 4) writeonly buffer Wts { float topk_weights[]; };
layout(set = 0, binding = 5) buffer Counter { uint counter[]; };
layout(set = 0, binding = 6) readonly buffer Bias { float topk_bias[]; };  // when topk_has_bias

#define SUBGROUP 1
#define TK_WG_MAX MAX_WG
#define TK_N_EXPERT p.nrows
#define TK_K p.topk_k
#define TK_NORMALIZE p.topk_normalize
#define TK_GATING p.topk_gating
#define TK_HAS_BIAS p.topk_has_bias
#define TK_N_GROUP p.topk_n_group
#define TK_TOPK_GROUP p.topk_topk_group
#define TK_SCALE p.topk_scale
#define TK_LOGIT(i) y[i]
#define TK_BIAS(e) topk_bias[e]
#define TK_SET_ID(j, e) topk_ids[p.tail_out_offset + (j)] = int(e)
#define TK_SET_WEIGHT(j, w) topk_weights[p.tail_out_offset + (j)] = (w)
#include "moe_topk.glsl"

shared bool tail_is_last;

// True in every invocation of the last workgroup to finish (the classic
// last-block pattern: each workgroup's y writes are made visible before its count).
bool last_workgroup() {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationID.x == 0) {
    tail_is_last = atomicAdd(counter[p.tail_counter], 1u) == p.row_blocks - 1;
    if (tail_is_last) counter[p.tail_counter] = 0u;
  }
  barrier();
  if (tail_is_last) memoryBarrierBuffer();
  return tail_is_last;
}
