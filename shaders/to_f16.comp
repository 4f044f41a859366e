#version 450
// f32 activation rows -> f16 rows for the coopmat2 GEMM (gemm_cm2.comp). Output
// row r (ncols halfs at r * ncols) is X row r, or with INDEXED slot r of a
// MoeTable: X row slot_token[r] (gather_x) or row r; zeros for padding slots;
// rows of tiles past the used count are skipped. x offsets, strides and ncols
// are multiples of 4.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "moe_table.glsl"
#ifndef INDEXED
#define INDEXED 0
#endif

layout(local_size_x = 256) in;

layout(set = 0, binding = 0) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 1) writeonly buffer H { f16vec4 h4[]; };
#if INDEXED
layout(set = 0, binding = 2) readonly buffer Table { int table[]; };
#endif

layout(push_constant) uniform Push {
  uint ncols, n_rows, x_offset, x_stride;
  uint gather_x, count_off, slot_token_off;  // INDEXED only
} p;

void main() {
  const uint c = gl_GlobalInvocationID.x, row = gl_WorkGroupID.y;
  if (4 * c >= p.ncols || row >= p.n_rows) return;
  const uint out_i = row * (p.ncols / 4) + c;
  uint src = row;
#if INDEXED
  if (row / MOE_TILE_ROWS >= uint(table[p.count_off])) return;
  const int tok = table[p.slot_token_off + row];
  if (tok < 0) {
    h4[out_i] = f16vec4(0);
    return;
  }
  if (p.gather_x != 0) src = uint(tok);
#endif
  h4[out_i] = f16vec4(x4[(p.x_offset + src * p.x_stride) / 4 + c]);
}
