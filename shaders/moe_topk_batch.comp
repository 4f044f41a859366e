#version 450
// Router top-k for a batch of tokens, one workgroup per token (shaders/moe_topk.glsl).
// The logits may come as split-K partial planes, summed here.
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
layout(local_size_x_id = 0) in;  // power of two, 64..256, n_expert <= 32 * size
layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) writeonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer W { float weights[]; };
layout(std430, binding = 3) readonly buffer B { float bias[]; };  // when has_bias
layout(push_constant) uniform P {
  uint n_expert, k, logit_stride, normalize, gating, has_bias, n_group, topk_group;  // gating: Gating of moe_route.h
  float scale;
  uint splits, split_plane;  // the logits: the sum of `splits` planes (split-K partials)
} p;

#define TK_WG_MAX 256
#define TK_N_EXPERT p.n_expert
#define TK_K p.k
#define TK_NORMALIZE p.normalize
#define TK_GATING p.gating
#define TK_HAS_BIAS p.has_bias
#define TK_N_GROUP p.n_group
#define TK_TOPK_GROUP p.topk_group
#define TK_SCALE p.scale
#include "split_planes.glsl"
SPLIT_PLANES_SUM(float, logit_sum, logits, p.splits, p.split_plane)
#define TK_LOGIT(i) logit_sum(i)
#define TK_BIAS(e) bias[e]
#define TK_SET_ID(j, e) ids[gl_WorkGroupID.x * p.k + (j)] = int(e)
#define TK_SET_WEIGHT(j, w) weights[gl_WorkGroupID.x * p.k + (j)] = (w)
#include "moe_topk.glsl"

void main() { route_topk(gl_WorkGroupID.x * p.logit_stride); }
