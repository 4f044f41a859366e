#version 450
// Batched attention prologue, one subgroup per (head, token): the same work as
// attn_rope_store.comp without workgroup barriers. Workgroup (x, t) covers
// heads x * HPW .. x * HPW + HPW - 1 of token t (query heads first, then key
// heads with their value heads); its subgroups take them in turn.
// Each invocation handles quads of 4 head elements, two adjacent pairs, so
// that f16 caches get whole uints: quad v holds rotation units 2v and 2v + 1
// (neox: elements 2v, 2v+1 paired with 2v+h, 2v+1+h, h = n_rot / 2; else
// 4v .. 4v+3 as two pairs), then the unrotated tail from n_rot on.
// Needs head_dim % 4 == 0, n_rot % 4 == 0 and a store of values (store_v).
// The RMS norm reads the head twice (its sum, then the scaled values).
// KV_F16: the caches hold f16 pairs packed in uints; else f32.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define WG 128
#define HPW 4
layout(local_size_x = WG) in;
#include "rope_store_io.glsl"

#include "rope.glsl"

// Elements of quad v: (e.x, e.y) and (e.z, e.w) adjacent.
uvec4 quad_elements(uint v, uint half_r) {
  if (2 * v < half_r)
    return p.neox != 0 ? uvec4(2 * v, 2 * v + 1, 2 * v + half_r, 2 * v + 1 + half_r) : uvec4(4 * v) + uvec4(0, 1, 2, 3);
  return uvec4(2 * half_r + 4 * (v - half_r / 2)) + uvec4(0, 1, 2, 3);
}

vec4 load4(bool is_q, uint src, uvec4 e) {
  return is_q ? vec4(q[src + e.x], q[src + e.y], q[src + e.z], q[src + e.w])
              : vec4(k_at(src + e.x), k_at(src + e.y), k_at(src + e.z), k_at(src + e.w));
}

vec2 rotate(vec2 x, vec2 cs) { return vec2(x.x * cs.x - x.y * cs.y, x.x * cs.y + x.y * cs.x); }

void main() {
  const uint t = gl_WorkGroupID.y, D = p.head_dim, quads = D / 4, half_r = p.n_rot / 2;
  const uint lane = gl_SubgroupInvocationID, SG = gl_SubgroupSize;
  const float pos = float(p.pos0 + t);
  for (uint hh = gl_SubgroupID; hh < HPW; hh += gl_NumSubgroups) {
    const uint h = gl_WorkGroupID.x * HPW + hh;
    if (h >= p.n_head + p.n_head_kv) break;
    const bool is_q = h < p.n_head;
    const uint kvh = h - p.n_head;  // key head (when !is_q)
    const uint src = is_q ? t * p.q_stride + h * D : t * p.kv_stride + kvh * D;
    float r = 1.0;
    if (p.norm != 0) {
      float ss = 0.0;
      for (uint i = lane; i < quads; i += SG) {
        const vec4 x = load4(is_q, src, quad_elements(i, half_r));
        ss += dot(x, x);
      }
      r = inversesqrt(subgroupAdd(ss) / float(D) + p.eps);
    }
    const uint dst = (p.pos0 + t) * p.n_head_kv * D + kvh * D;
    for (uint i = lane; i < quads; i += SG) {
      const uvec4 e = quad_elements(i, half_r);
      vec4 x = load4(is_q, src, e);
      if (p.norm != 0)
        x *= r * (is_q ? vec4(qw[e.x], qw[e.y], qw[e.z], qw[e.w]) : vec4(kw[e.x], kw[e.y], kw[e.z], kw[e.w]));
      if (2 * i < half_r) {  // units 2i and 2i + 1, as cpu/rope.cpp's rope()
        const vec2 c0 = cos_sin(angle(pos, 2 * i)) * p.mscale, c1 = cos_sin(angle(pos, 2 * i + 1)) * p.mscale;
        if (p.neox != 0) {
          const vec2 a = rotate(x.xz, c0), b = rotate(x.yw, c1);
          x = vec4(a.x, b.x, a.y, b.y);
        } else {
          x = vec4(rotate(x.xy, c0), rotate(x.zw, c1));
        }
      }
      if (is_q) {
        q[src + e.x] = x.x;
        q[src + e.y] = x.y;
        q[src + e.z] = x.z;
        q[src + e.w] = x.w;
        continue;
      }
      const vec4 y = vec4(v_at(src + e.x), v_at(src + e.y), v_at(src + e.z), v_at(src + e.w));
#if KV_F16
      k_cache[(dst + e.x) / 2] = packHalf2x16(x.xy);
      k_cache[(dst + e.z) / 2] = packHalf2x16(x.zw);
      v_cache[(dst + e.x) / 2] = packHalf2x16(y.xy);
      v_cache[(dst + e.z) / 2] = packHalf2x16(y.zw);
#else
      k_cache[dst + e.x] = x.x;
      k_cache[dst + e.y] = x.y;
      k_cache[dst + e.z] = x.z;
      k_cache[dst + e.w] = x.w;
      v_cache[dst + e.x] = y.x;
      v_cache[dst + e.y] = y.y;
      v_cache[dst + e.z] = y.z;
      v_cache[dst + e.w] = y.w;
#endif
    }
  }
}
