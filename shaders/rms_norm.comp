#version 450
// y[row] = x[row] / sqrt(mean(x[row]^2) + eps) * w   (one workgroup per row; in place allowed).
// A non-finite sum of squares (some x is NaN/Inf) lowers first_bad to check
// when check != 0: where the residual stream first went non-finite.
// Workgroup size: specialization constant 0 (a power of two). Where offsets,
// stride and n are multiples of 4, each invocation reads 16-byte words, all
// of its row's words in flight together (up to BATCH): a lone decode norm's
// time is load latency.
// F16_COPY: the output rows also go to binding 4 as f16, at y's offset and
// stride counted in halfs (offsets, stride and n multiples of 4), the
// activations of GEMMs on f16 rows.
#extension GL_EXT_control_flow_attributes : require
#ifndef F16_COPY
#define F16_COPY 0
#endif
#if F16_COPY
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(std430, binding = 4) writeonly buffer H4 { f16vec4 h4[]; };
#endif
layout(local_size_x = 256, local_size_x_id = 0) in;
const uint WG = gl_WorkGroupSize.x;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) buffer F { uint first_bad; };
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer W4 { vec4 w4[]; };
layout(std430, binding = 2) buffer Y4 { vec4 y4[]; };
layout(push_constant) uniform P {
  uint n;       // row length
  uint x_off, w_off, y_off;
  uint row_stride;
  uint has_w;
  float eps;
  uint check;
} p;
const uint BATCH = 4;
#include "reduce.glsl"

void main() {
  const uint row = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint xb = p.x_off + row * p.row_stride, yb = p.y_off + row * p.row_stride;
  const bool wide = (p.n | p.x_off | p.w_off | p.y_off | p.row_stride) % 4 == 0;
  float ss = 0.0;
  if (wide) {
    const uint n4 = p.n / 4;
    for (uint i0 = t; i0 < n4; i0 += WG * BATCH) {
      vec4 v[BATCH];
      [[unroll]] for (uint j = 0; j < BATCH; ++j) v[j] = i0 + j * WG < n4 ? x4[xb / 4 + i0 + j * WG] : vec4(0.0);
      [[unroll]] for (uint j = 0; j < BATCH; ++j) {
        const vec4 s = v[j] * v[j];
        ss += (s.x + s.y) + (s.z + s.w);
      }
    }
  } else {
    for (uint i = t; i < p.n; i += WG) { float v = x[xb + i]; ss += v * v; }
  }
  ss = wg_sum(ss);
  if (p.check != 0 && t == 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.check);
  const float scale = inversesqrt(ss / float(p.n) + p.eps);
  if (wide) {
    for (uint i = t; i < p.n / 4; i += WG) {
      vec4 v = x4[xb / 4 + i] * scale;
      if (p.has_w != 0) v *= w4[p.w_off / 4 + i];
      y4[yb / 4 + i] = v;
#if F16_COPY
      h4[yb / 4 + i] = f16vec4(v);
#endif
    }
  } else {
    for (uint i = t; i < p.n; i += WG) {
      float v = x[xb + i] * scale;
      y[yb + i] = p.has_w != 0 ? v * w[p.w_off + i] : v;
    }
  }
}
