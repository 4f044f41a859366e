#version 450
// g[i] = act(g[i], u[i]) for n values (in place on g), as shaders/glu.glsl:
// act 0: silu(g) * u; act 1: gpt-oss's clamped variant (ggml swiglu_oai).
// row_elems != 0: g and u are MoE slot rows of row_elems values (offsets
// included), and rows of tiles at or past the table's used count are skipped
// (the expert products leave them unwritten).
#include "moe_table.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(std430, binding = 2) readonly buffer Table { uint table[]; };
layout(push_constant) uniform P { uint n, g_off, u_off, act, row_elems, count_off; } p;
#include "glu.glsl"
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  if (p.row_elems != 0 && (p.g_off + i) / p.row_elems / MOE_TILE_ROWS >= table[p.count_off]) return;
  g[p.g_off + i] = glu(g[p.g_off + i], u[p.u_off + i], p.act);
}
