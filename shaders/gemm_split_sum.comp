#version 450
// Adds the partial planes of a split-K GEMM (gemm_coopmat.comp with k_split):
// Y[n][r] = (accumulate ? Y[n][r] : 0) + sum_z P[z][n][r], the planes of
// n_tokens x nrows floats `plane` apart, in split_planes.glsl's order (deterministic).
// NORM: one workgroup per token, its whole row (nrows, plane, y_offset and
// y_stride multiples of 4), which then also writes xn = rmsnorm(Y[n]) * norm_w
// at y's offset and stride (the FFN norm after the output projection); a
// non-finite row lowers first_bad to check (as rms_norm.comp does).
#ifndef NORM
#define NORM 0
#endif
layout(local_size_x = 256) in;
#if NORM
#define WG 256
layout(std430, binding = 0) restrict readonly buffer P4 { vec4 part4[]; };
layout(std430, binding = 1) restrict buffer Y4 { vec4 y4[]; };
layout(std430, binding = 2) restrict readonly buffer NW4 { vec4 norm_w4[]; };
layout(std430, binding = 3) restrict writeonly buffer XN4 { vec4 xn4[]; };
layout(std430, binding = 4) buffer F { uint first_bad; };
layout(push_constant) uniform Push {
  uint nrows, n_tokens, splits, plane;
  uint y_offset, y_stride, accumulate;
  float eps;
  uint check;
} p;
#include "reduce.glsl"
#include "split_planes.glsl"
SPLIT_PLANES_SUM(vec4, part_sum4, part4, p.splits, p.plane / 4)

void main() {
  const uint n = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  const uint r4 = p.nrows / 4, yb = (p.y_offset + n * p.y_stride) / 4, pb = n * r4;
  float ss = 0.0;
  for (uint i = t; i < r4; i += WG) {
    const vec4 sum = part_sum4(pb + i);
    const vec4 v = p.accumulate != 0 ? y4[yb + i] + sum : sum;
    y4[yb + i] = v;
    const vec4 s = v * v;
    ss += (s.x + s.y) + (s.z + s.w);
  }
  ss = wg_sum(ss);
  if (p.check != 0 && t == 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.check);
  const float scale = inversesqrt(ss / float(p.nrows) + p.eps);
  // Each invocation reads back only the y values it wrote.
  for (uint i = t; i < r4; i += WG) xn4[yb + i] = y4[yb + i] * scale * norm_w4[i];
}
#else
layout(std430, binding = 0) restrict readonly buffer P { float part[]; };
layout(std430, binding = 1) restrict buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint nrows, n_tokens, splits, plane;
  uint y_offset, y_stride, accumulate;
} p;
#include "split_planes.glsl"
SPLIT_PLANES_SUM(float, part_sum, part, p.splits, p.plane)

void main() {
  const uint r = gl_GlobalInvocationID.x, n = gl_WorkGroupID.y;
  if (r >= p.nrows) return;
  const float sum = part_sum(n * p.nrows + r);
  const uint yi = p.y_offset + n * p.y_stride + r;
  y[yi] = p.accumulate != 0 ? y[yi] + sum : sum;
}
#endif
