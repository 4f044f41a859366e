#version 450
// y[row] = x[row] / sqrt(mean(x[row]^2) + eps) * w   (one workgroup per row; in place allowed).
// A non-finite sum of squares (some x is NaN/Inf) lowers first_bad to check
// when check != 0: where the residual stream first went non-finite.
#define WG 256
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) buffer F { uint first_bad; };
layout(push_constant) uniform P {
  uint n;       // row length
  uint x_off, w_off, y_off;
  uint row_stride;
  uint has_w;
  float eps;
  uint check;
} p;
#include "reduce.glsl"
void main() {
  const uint row = gl_WorkGroupID.x;
  const uint xb = p.x_off + row * p.row_stride, yb = p.y_off + row * p.row_stride;
  float ss = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) { float v = x[xb + i]; ss += v * v; }
  ss = wg_sum(ss);
  if (p.check != 0 && gl_LocalInvocationID.x == 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.check);
  const float scale = inversesqrt(ss / float(p.n) + p.eps);
  for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) {
    float v = x[xb + i] * scale;
    y[yb + i] = p.has_w != 0 ? v * w[p.w_off + i] : v;
  }
}
