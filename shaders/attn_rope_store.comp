#version 450
// Batched attention prologue: one workgroup per (head, token). Query heads
// (x < n_head) are RMS-normed (optional) and rotated in place; key heads are
// normed, rotated and stored with their value head into the caches at
// position pos0 + token (without store_v no value head: latent attention's
// values are its keys). head_dim <= 1024, n_rot <= 512.
// KV_F16: the caches hold f16 pairs packed in uints.
// KV_Q8: int8 quadruples packed in uints with an f16 scale per 32 values
// (d = amax / 127, q = round(x / d); row layout in engine/vulkan/vk_attention.h).
#define WG 64
layout(local_size_x = WG) in;
#include "rope_store_io.glsl"
#include "reduce.glsl"
#define MAX_D 1024
shared float h_sh[MAX_D];
#if KV_Q8
shared vec2 amax_sh[MAX_D / 4];  // k, v: max |x| of each 4 values
shared vec2 d_sh[MAX_D / 32];    // k, v scales per block

// 4 values quantized with inverse scale id, rounded half away from zero.
uint pack_q8(vec4 x, float id) {
  const ivec4 q = clamp(ivec4(trunc(x * id + sign(x) * 0.5)), -127, 127);
  return uint(q.x & 255) | uint(q.y & 255) << 8 | uint(q.z & 255) << 16 | uint(q.w & 255) << 24;
}
#endif

#include "rope.glsl"

void main() {
  const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, D = p.head_dim;
  const bool is_q = h < p.n_head;
  const uint kvh = h - p.n_head;  // key head (when !is_q)
  const uint src = is_q ? t * p.q_stride + h * D : t * p.kv_stride + kvh * D;
  float ss = 0.0;
  for (uint i = tid; i < D; i += WG) {
    const float x = is_q ? q[src + i] : k_at(src + i);
    h_sh[i] = x;
    ss += x * x;
  }
  if (p.norm != 0) {
    ss = wg_sum(ss);  // also a barrier for h_sh
    const float r = inversesqrt(ss / float(D) + p.eps);
    for (uint i = tid; i < D; i += WG) h_sh[i] *= r * (is_q ? qw[i] : kw[i]);
  }
  barrier();
  // Rotate pairs (a, b) of the first n_rot dims as cpu/rope.cpp's rope():
  // the same float operations for the angle (`precise`: no contraction).
  const uint half_r = p.n_rot / 2;
  const float pos = float(p.pos0 + t);
  float r0[4], r1[4];  // n_rot <= 512: at most 4 pairs per invocation
  for (uint n = 0; n < 4; ++n) {
    const uint i = tid + n * WG;
    if (i >= half_r) break;
    const vec2 cs = cos_sin(angle(pos, i)) * p.mscale;
    const uint a = p.neox != 0 ? i : 2 * i, b = p.neox != 0 ? i + half_r : 2 * i + 1;
    const float x0 = h_sh[a], x1 = h_sh[b];
    r0[n] = x0 * cs.x - x1 * cs.y;
    r1[n] = x0 * cs.y + x1 * cs.x;
  }
  barrier();
  for (uint n = 0; n < 4; ++n) {
    const uint i = tid + n * WG;
    if (i >= half_r) break;
    const uint a = p.neox != 0 ? i : 2 * i, b = p.neox != 0 ? i + half_r : 2 * i + 1;
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
  for (uint i = tid; i < D / 2; i += WG) {
    k_cache[dst / 2 + i] = packHalf2x16(vec2(h_sh[2 * i], h_sh[2 * i + 1]));
    if (p.store_v != 0) v_cache[dst / 2 + i] = packHalf2x16(vec2(v_at(src + 2 * i), v_at(src + 2 * i + 1)));
  }
#elif KV_Q8
  // Values 4i .. 4i + 3 (block i / 8) for i = tid, tid + WG, ... < D / 4.
  const uint row = (p.pos0 + t) * p.kv_row, nq = D / 4, nb = D / 32, su = (D + 63) / 64;
  const bool sv = p.store_v != 0;
  for (uint i = tid; i < nq; i += WG) {
    const vec4 ak = abs(vec4(h_sh[4 * i], h_sh[4 * i + 1], h_sh[4 * i + 2], h_sh[4 * i + 3]));
    const vec4 av =
        sv ? abs(vec4(v_at(src + 4 * i), v_at(src + 4 * i + 1), v_at(src + 4 * i + 2), v_at(src + 4 * i + 3))) : vec4(0);
    amax_sh[i] = vec2(max(max(ak.x, ak.y), max(ak.z, ak.w)), max(max(av.x, av.y), max(av.z, av.w)));
  }
  barrier();
  for (uint i = tid; i < nq; i += WG) {
    vec2 m = vec2(0);
    for (uint j = i & ~7u; j < (i & ~7u) + 8; ++j) m = max(m, amax_sh[j]);
    const vec2 d = m / 127.0;
    const vec4 xk = vec4(h_sh[4 * i], h_sh[4 * i + 1], h_sh[4 * i + 2], h_sh[4 * i + 3]);
    k_cache[row + kvh * nq + i] = pack_q8(xk, d.x != 0.0 ? 1.0 / d.x : 0.0);
    if (sv) {
      const vec4 xv = vec4(v_at(src + 4 * i), v_at(src + 4 * i + 1), v_at(src + 4 * i + 2), v_at(src + 4 * i + 3));
      v_cache[row + kvh * nq + i] = pack_q8(xv, d.y != 0.0 ? 1.0 / d.y : 0.0);
    }
    if (i % 8 == 0) d_sh[i / 8] = d;
  }
  barrier();
  for (uint i = tid; i < su; i += WG) {
    const vec2 d0 = d_sh[2 * i], d1 = 2 * i + 1 < nb ? d_sh[2 * i + 1] : vec2(0);
    k_cache[row + p.kv_scale_off + kvh * su + i] = packHalf2x16(vec2(d0.x, d1.x));
    if (sv) v_cache[row + p.kv_scale_off + kvh * su + i] = packHalf2x16(vec2(d0.y, d1.y));
  }
#else
  for (uint i = tid; i < D; i += WG) {
    k_cache[dst + i] = h_sh[i];
    if (p.store_v != 0) v_cache[dst + i] = v_at(src + i);
  }
#endif
}
