#version 450
// Combines the split-K partials of attn_flash.comp: one workgroup per
// (token, q head) row pr0 = t * n_head + h; its partials pr0 * n_split + s
// hold an unnormalized output, a running max m (base 2) and a sum l. Sinks
// (has_sinks): head h's logit sinks[h] joins the max and the sum here, once.
#define WG 64
#define MAX_SPLIT 256
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer S { float part[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };
layout(std430, binding = 2) readonly buffer Sinks { float sinks[]; };
layout(push_constant) uniform P {
  uint head_dim, n_head, n_split, ml_off, o_stride, has_sinks;
} p;
#include "reduce.glsl"
shared float w_sh[MAX_SPLIT];  // exp2(m_s - max_s m_s); n_split <= MAX_SPLIT

void main() {
  const uint row = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x, D = p.head_dim;
  const uint t = row / p.n_head, h = row % p.n_head, first = row * p.n_split;
  float m = -1e30;
  for (uint s = tid; s < p.n_split; s += WG) m = max(m, part[p.ml_off + 2 * (first + s)]);
  m = wg_max(m);
  const float sk = p.has_sinks != 0 ? sinks[h] * 1.4426950408889634 : -1e30;
  m = max(m, sk);
  float l = 0.0;
  for (uint s = tid; s < p.n_split; s += WG) {
    const float w = exp2(part[p.ml_off + 2 * (first + s)] - m);
    w_sh[s] = w;
    l += w * part[p.ml_off + 2 * (first + s) + 1];
  }
  // wg_sum's barriers also publish w_sh.
  const float inv = 1.0 / (wg_sum(l) + (p.has_sinks != 0 ? exp2(sk - m) : 0.0));
  for (uint d = tid; d < D; d += WG) {
    float acc = 0.0;
    for (uint s = 0; s < p.n_split; ++s) acc += w_sh[s] * part[(first + s) * D + d];
    o[t * p.o_stride + h * D + d] = acc * inv;
  }
}
