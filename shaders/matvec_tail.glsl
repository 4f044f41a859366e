// Included by matvec.comp for its fused tails: once every workgroup has
// written its rows of y, the last one to finish (counted on
// counter[tail_counter], which it leaves at 0 again) goes on with
//  TAIL_NORM: norm_out[tail_out_offset + i] = y[i] / sqrt(mean(y^2) + eps) * norm_w[i]
//    for all nrows values of y; a non-finite sum of squares lowers first_bad
//    to tail_check (when != 0), as rms_norm.comp does;
//  TAIL_TOPK: the router top-k of the nrows logits in y (moe_topk.glsl):
//    ids / weights [tail_out_offset + j], j < k;
// saving a dispatch and the barrier before it.
layout(set = 0, binding = 5) buffer Counter { uint counter[]; };
#if TAIL_NORM
layout(set = 0, binding = 3) readonly buffer NormW { float norm_w[]; };
layout(set = 0, binding = 4) writeonly buffer NormOut { float norm_out[]; };
layout(set = 0, binding = 6) buffer Bad { uint first_bad; };
#else
layout(set = 0, binding = 3) writeonly buffer Ids { int topk_ids[]; };
layout(set = 0, binding = 4) writeonly buffer Wts { float topk_weights[]; };
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
#endif

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

void tail(uint ybase) {
  if (!last_workgroup()) return;
#if TAIL_NORM
  const uint WG = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  float ss = 0.0;
  for (uint i = t; i < p.nrows; i += WG) {
    const float v = y[ybase + i];
    ss += v * v;
  }
  red[t] = ss;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  ss = red[0];
  if (t == 0 && p.tail_check != 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.tail_check);
  const float scale = inversesqrt(ss / float(p.nrows) + p.tail_eps);
  for (uint i = t; i < p.nrows; i += WG) norm_out[p.tail_out_offset + i] = y[ybase + i] * scale * norm_w[i];
#else
  route_topk(ybase);
#endif
}
