#version 450
// Batched attention prologue: one workgroup per (head, token). Query heads
// (x < n_head) are RMS-normed (optional) and rotated in place; key heads are
// normed, rotated and stored with their value head into the caches at
// position pos0 + token. KV_F16: the caches hold f16 pairs packed in uints.
#define WG 64
layout(local_size_x = WG) in;
layout(std430, binding = 0) buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer QW { float qw[]; };
layout(std430, binding = 4) readonly buffer KW { float kw[]; };
#if KV_F16
layout(std430, binding = 5) writeonly buffer KC { uint k_cache[]; };
layout(std430, binding = 6) writeonly buffer VC { uint v_cache[]; };
#else
layout(std430, binding = 5) writeonly buffer KC { float k_cache[]; };
layout(std430, binding = 6) writeonly buffer VC { float v_cache[]; };
#endif
layout(push_constant) uniform P {
  uint q_stride, kv_stride, pos0, head_dim, n_head, n_head_kv, neox, norm;
  float theta, eps;
} p;
#include "reduce.glsl"
shared float h_sh[256];  // head_dim <= 256

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, D = p.head_dim;
  const bool is_q = h < p.n_head;
  const uint kvh = h - p.n_head;  // key head (when !is_q)
  const uint src = is_q ? t * p.q_stride + h * D : t * p.kv_stride + kvh * D;
  float ss = 0.0;
  for (uint i = tid; i < D; i += WG) {
    const float x = is_q ? q[src + i] : k[src + i];
    h_sh[i] = x;
    ss += x * x;
  }
  if (p.norm != 0) {
    ss = wg_sum(ss);  // also a barrier for h_sh
    const float r = inversesqrt(ss / float(D) + p.eps);
    for (uint i = tid; i < D; i += WG) h_sh[i] *= r * (is_q ? qw[i] : kw[i]);
  }
  barrier();
  // Rotate pairs (a, b) by pos * theta^(-2i/D); angles reduced to [-pi, pi]
  // first, where GPU sin/cos are specified.
  const uint half_d = D / 2;
  const float pos = float(p.pos0 + t);
  float r0[2], r1[2];  // D <= 256: at most 2 pairs per invocation
  for (uint n = 0; n < 2; ++n) {
    const uint i = tid + n * WG;
    if (i >= half_d) break;
    const float ang = pos * pow(p.theta, -2.0 * float(i) / float(D));
    const float turns = ang * 0.15915494309189535;
    const float red = (turns - round(turns)) * 6.283185307179586;
    const float c = cos(red), s = sin(red);
    const uint a = p.neox != 0 ? i : 2 * i, b = p.neox != 0 ? i + half_d : 2 * i + 1;
    const float x0 = h_sh[a], x1 = h_sh[b];
    r0[n] = x0 * c - x1 * s;
    r1[n] = x0 * s + x1 * c;
  }
  barrier();
  for (uint n = 0; n < 2; ++n) {
    const uint i = tid + n * WG;
    if (i >= half_d) break;
    const uint a = p.neox != 0 ? i : 2 * i, b = p.neox != 0 ? i + half_d : 2 * i + 1;
    h_sh[a] = r0[n];
    h_sh[b] = r1[n];
  }
  barrier();
  if (is_q) {
    for (uint i = tid; i < D; i += WG) q[src + i] = h_sh[i];
    return;
  }
  const uint dst = (p.pos0 + t) * p.n_head_kv * D + kvh * D;
#if KV_F16
  for (uint i = tid; i < half_d; i += WG) {
    k_cache[dst / 2 + i] = packHalf2x16(vec2(h_sh[2 * i], h_sh[2 * i + 1]));
    v_cache[dst / 2 + i] = packHalf2x16(vec2(v[src + 2 * i], v[src + 2 * i + 1]));
  }
#else
  for (uint i = tid; i < D; i += WG) {
    k_cache[dst + i] = h_sh[i];
    v_cache[dst + i] = v[src + i];
  }
#endif
}
