#version 450
// x += sum_j w[j] * y[j] (the routed experts' outputs), then
// xn = rmsnorm(x) * norm_w for the next layer: one workgroup (of WG
// invocations, a power of two, specialization constant 0). A non-finite x
// lowers first_bad to check (as rms_norm.comp does).
// It runs alone between two barriers once per decoded layer, so its time is
// latency: with n % 4 == 0 each invocation loads 16-byte words, the items'
// words of one position in flight together (BATCH at a time).
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 256, local_size_x_id = 0) in;
const uint WG = gl_WorkGroupSize.x;
layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer X { float x[]; };
layout(std430, binding = 3) readonly buffer NW { float norm_w[]; };
layout(std430, binding = 4) writeonly buffer XN { float xn[]; };
layout(std430, binding = 5) buffer F { uint first_bad; };
layout(std430, binding = 0) readonly buffer Y4 { vec4 y4[]; };
layout(std430, binding = 2) buffer X4 { vec4 x4[]; };
layout(std430, binding = 3) readonly buffer NW4 { vec4 norm_w4[]; };
layout(std430, binding = 4) writeonly buffer XN4 { vec4 xn4[]; };
layout(push_constant) uniform P { uint n, items; float eps; uint check; } p;
const uint BATCH = 8;
#include "reduce.glsl"

void main() {
  const uint t = gl_LocalInvocationID.x;
  float ss = 0.0;
  if (p.n % 4 == 0) {
    const uint n4 = p.n / 4;
    for (uint i = t; i < n4; i += WG) {
      vec4 acc = x4[i];
      for (uint j0 = 0; j0 < p.items; j0 += BATCH) {
        vec4 v[BATCH];
        [[unroll]] for (uint j = 0; j < BATCH; ++j) v[j] = j0 + j < p.items ? y4[(j0 + j) * n4 + i] : vec4(0.0);
        [[unroll]] for (uint j = 0; j < BATCH; ++j)
          if (j0 + j < p.items) acc += w[j0 + j] * v[j];
      }
      x4[i] = acc;
      ss += dot(acc, acc);
    }
  } else {
    for (uint i = t; i < p.n; i += WG) {
      float acc = x[i];
      for (uint j = 0; j < p.items; ++j) acc += w[j] * y[j * p.n + i];
      x[i] = acc;
      ss += acc * acc;
    }
  }
  ss = wg_sum(ss);
  if (p.check != 0 && t == 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.check);
  const float scale = inversesqrt(ss / float(p.n) + p.eps);
  // Each invocation reads back only the x values it wrote.
  if (p.n % 4 == 0) {
    for (uint i = t; i < p.n / 4; i += WG) xn4[i] = x4[i] * scale * norm_w4[i];
  } else {
    for (uint i = t; i < p.n; i += WG) xn[i] = x[i] * scale * norm_w[i];
  }
}
