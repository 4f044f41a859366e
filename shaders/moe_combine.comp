#version 450
// MoE combine over a ubatch: x[t*x_stride + i] += sum_j w[t*k + j] *
// y[(t*k + j)*y_stride + i] (y by routing pair), j ascending, pairs without a
// slot (MOE_NO_SLOT: not on this pass) skipped.
// Workgroups: x over i (WG columns each), y over tokens.
// NORM: one workgroup per token, its whole row (n, strides multiples of 4),
// which then also writes xn = rmsnorm(x) * norm_w at x's offset and stride
// (the next layer's attention norm, as moe_combine_norm.comp does for one
// decoded token) and, with has_h, its f16 copy at the same offset in halfs.
// A non-finite row lowers first_bad to check (as rms_norm.comp does).
#ifndef NORM
#define NORM 0
#endif
#if NORM
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#include "moe_table.glsl"
#define WG 256
layout(local_size_x = WG) in;
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Table { uint moe_table[]; };
#if NORM
layout(std430, binding = 0) readonly buffer Y4 { vec4 y4[]; };
layout(std430, binding = 3) buffer X4 { vec4 x4[]; };
layout(std430, binding = 4) readonly buffer NW4 { vec4 norm_w4[]; };
layout(std430, binding = 5) writeonly buffer XN4 { vec4 xn4[]; };
layout(std430, binding = 6) buffer F { uint first_bad; };
layout(std430, binding = 7) writeonly buffer H4 { f16vec4 h4[]; };
layout(push_constant) uniform P { MoeLayout lay; uint n, y_stride, x_stride; float eps; uint check, has_h; } p;
#include "reduce.glsl"
shared bool pair_on[64];  // k <= 64
shared float pair_w[64];

void main() {
  const uint tok = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const MoeLayout L = p.lay;
  if (t < L.k) {
    const uint q = tok * L.k + t;
    pair_on[t] = moe_table[moe_pair_slot_idx(L, q)] != MOE_NO_SLOT;
    pair_w[t] = w[q];
  }
  barrier();
  const uint n4 = p.n / 4, xb = tok * p.x_stride / 4, ys = p.y_stride / 4, yb = tok * L.k * ys;
  float ss = 0.0;
  for (uint i = t; i < n4; i += WG) {
    vec4 acc = x4[xb + i];
    for (uint j = 0; j < L.k; ++j)
      if (pair_on[j]) acc += pair_w[j] * y4[yb + j * ys + i];
    x4[xb + i] = acc;
    const vec4 s = acc * acc;
    ss += (s.x + s.y) + (s.z + s.w);
  }
  ss = wg_sum(ss);
  if (p.check != 0 && t == 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.check);
  const float scale = inversesqrt(ss / float(p.n) + p.eps);
  // Each invocation reads back only the x values it wrote.
  for (uint i = t; i < n4; i += WG) {
    const vec4 v = x4[xb + i] * scale * norm_w4[i];
    xn4[xb + i] = v;
    if (p.has_h != 0) h4[xb + i] = f16vec4(v);
  }
}
#else
layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 3) buffer X { float x[]; };
layout(push_constant) uniform P { MoeLayout lay; uint n, y_stride, x_stride; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x, tok = gl_WorkGroupID.y;
  if (i >= p.n) return;
  const MoeLayout L = p.lay;
  float acc = x[tok * p.x_stride + i];
  for (uint j = 0; j < L.k; ++j) {
    const uint q = tok * L.k + j;
    if (moe_table[moe_pair_slot_idx(L, q)] != MOE_NO_SLOT) acc += w[q] * y[q * p.y_stride + i];
  }
  x[tok * p.x_stride + i] = acc;
}
#endif
