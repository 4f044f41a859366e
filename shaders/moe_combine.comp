#version 450
// MoE combine over a ubatch: x[t*x_stride + i] += sum_j w[t*k + j] *
// y[slot(t, j)*y_stride + i], j ascending, pairs with MOE_NO_SLOT skipped.
// Workgroups: x over i (WG columns each), y over tokens.
#include "moe_table.glsl"
#define WG 256
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Table { uint moe_table[]; };
layout(std430, binding = 3) buffer X { float x[]; };
layout(push_constant) uniform P { MoeLayout lay; uint n, y_stride, x_stride; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x, tok = gl_WorkGroupID.y;
  if (i >= p.n) return;
  const MoeLayout L = p.lay;
  float acc = x[tok * p.x_stride + i];
  for (uint j = 0; j < L.k; ++j) {
    const uint q = tok * L.k + j, s = moe_table[moe_pair_slot_idx(L, q)];
    if (s != MOE_NO_SLOT) acc += w[q] * y[s * p.y_stride + i];
  }
  x[tok * p.x_stride + i] = acc;
}
