#version 450
// x += sum_j w[j] * y[j] (the routed experts' outputs), then
// xn = rmsnorm(x) * norm_w for the next layer: one workgroup. A non-finite x
// lowers first_bad to check (as rms_norm.comp does).
#define WG 256
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer X { float x[]; };
layout(std430, binding = 3) readonly buffer NW { float norm_w[]; };
layout(std430, binding = 4) writeonly buffer XN { float xn[]; };
layout(std430, binding = 5) buffer F { uint first_bad; };
layout(push_constant) uniform P { uint n, items; float eps; uint check; } p;
#include "reduce.glsl"
void main() {
  const uint t = gl_LocalInvocationID.x;
  float ss = 0.0;
  for (uint i = t; i < p.n; i += WG) {
    float acc = x[i];
    for (uint j = 0; j < p.items; ++j) acc += w[j] * y[j * p.n + i];
    x[i] = acc;
    ss += acc * acc;
  }
  ss = wg_sum(ss);
  if (p.check != 0 && t == 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.check);
  const float scale = inversesqrt(ss / float(p.n) + p.eps);
  for (uint i = t; i < p.n; i += WG) xn[i] = x[i] * scale * norm_w[i];
}
