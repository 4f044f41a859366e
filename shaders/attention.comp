#version 450
// Decode attention for one query token: one workgroup per query head.
// K/V caches are [pos][n_head_kv * head_dim] floats; scores use a scratch row per head.
#define WG 128
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) buffer S { float scores[]; };
layout(std430, binding = 4) writeonly buffer O { float o[]; };
layout(push_constant) uniform P {
  uint head_dim, n_head, n_head_kv, n_kv;  // n_kv = positions to attend (pos + 1)
  uint q_off, k_off, v_off, o_off, s_stride;
  float scale;
} p;
#include "reduce.glsl"
shared float q_sh[256];
void main() {
  const uint h = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint kvh = h / (p.n_head / p.n_head_kv);
  const uint kv_dim = p.n_head_kv * p.head_dim;
  const uint sb = h * p.s_stride;
  for (uint d = t; d < p.head_dim; d += WG) q_sh[d] = q[p.q_off + h * p.head_dim + d];
  barrier();
  float mx = -3.4e38;
  for (uint j = t; j < p.n_kv; j += WG) {
    const uint kb = p.k_off + j * kv_dim + kvh * p.head_dim;
    float s = 0.0;
    for (uint d = 0; d < p.head_dim; ++d) s += q_sh[d] * k[kb + d];
    s *= p.scale;
    scores[sb + j] = s;
    mx = max(mx, s);
  }
  mx = wg_max(mx);
  float sum = 0.0;
  for (uint j = t; j < p.n_kv; j += WG) {
    const float e = exp(scores[sb + j] - mx);
    scores[sb + j] = e;
    sum += e;
  }
  sum = wg_sum(sum);  // its barriers also publish the scores
  const float inv = 1.0 / sum;
  for (uint d = t; d < p.head_dim; d += WG) {
    float acc = 0.0;
    for (uint j = 0; j < p.n_kv; ++j) acc += scores[sb + j] * v[p.v_off + j * kv_dim + kvh * p.head_dim + d];
    o[p.o_off + h * p.head_dim + d] = acc * inv;
  }
}
