#version 450
// Fused per-head RMS norm (optional) and rotary embedding of the query heads
// and the new key heads, in place: one workgroup per head (queries first).
#define WG 64
layout(local_size_x = WG) in;
layout(std430, binding = 0) buffer Q { float q[]; };
layout(std430, binding = 1) buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer QW { float qw[]; };
layout(std430, binding = 3) readonly buffer KW { float kw[]; };
layout(push_constant) uniform P {
  uint head_dim, n_head, q_off, k_off, pos, neox, norm;
  float theta, eps;
} p;
#include "reduce.glsl"
shared float h_sh[256];  // head_dim <= 256
void main() {
  const uint h = gl_WorkGroupID.x, t = gl_LocalInvocationID.x, D = p.head_dim;
  const bool is_q = h < p.n_head;
  const uint base = is_q ? p.q_off + h * D : p.k_off + (h - p.n_head) * D;
  float ss = 0.0;
  for (uint i = t; i < D; i += WG) {
    const float v = is_q ? q[base + i] : k[base + i];
    h_sh[i] = v;
    ss += v * v;
  }
  if (p.norm != 0) {
    ss = wg_sum(ss);  // also a barrier for h_sh
    const float scale = inversesqrt(ss / float(D) + p.eps);
    for (uint i = t; i < D; i += WG) h_sh[i] *= scale * (is_q ? qw[i] : kw[i]);
  }
  barrier();
  const uint half_d = D / 2;
  for (uint i = t; i < half_d; i += WG) {
    const float ang = float(p.pos) * pow(p.theta, -2.0 * float(i) / float(D));
    const float c = cos(ang), s = sin(ang);
    const uint a = p.neox != 0 ? i : 2 * i, b = p.neox != 0 ? i + half_d : 2 * i + 1;
    const float x0 = h_sh[a], x1 = h_sh[b];
    const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
    if (is_q) { q[base + a] = r0; q[base + b] = r1; }
    else { k[base + a] = r0; k[base + b] = r1; }
  }
}
