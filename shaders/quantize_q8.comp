#version 450
// Activations -> int8 blocks for the int8 GEMM (gemm_int8.comp). Row r of X
// (x_offset + r * x_stride floats) is cut into 32-element blocks, each stored as
//   q_i = roundEven(x_i * 127 / amax), d = amax / 127   (amax = max |x_i|; all 0 when amax = 0)
// Scratch layout (binding 1): int8 q of row r, block b at int32 words
// (r * ncols/32 + b) * 8 .. +8, then from vec2 index ds_offset (byte rows * ncols)
// per block (d, d * sum q) (the sum serves the K-quant min terms).
// One invocation quantizes one block; workgroup y = row.
// INDEXED: rows are MoeTable slots; rows of tiles past the used count and
// padding slots (slot_token < 0) are skipped.
#extension GL_EXT_control_flow_attributes : require
#include "moe_table.glsl"
#ifndef INDEXED
#define INDEXED 0
#endif

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Q { ivec4 q4[]; };
layout(set = 0, binding = 1) writeonly buffer D { vec2 ds[]; };
#if INDEXED
layout(set = 0, binding = 2) readonly buffer Table { int table[]; };
#endif

layout(push_constant) uniform Push {
  uint ncols, n_rows, x_offset, x_stride, ds_offset;
  uint count_off, slot_token_off;  // INDEXED only (words into the table)
} p;

void main() {
  const uint nblk = p.ncols / 32;
  const uint blk = gl_GlobalInvocationID.x;
  const uint row = gl_WorkGroupID.y;
  if (blk >= nblk || row >= p.n_rows) return;
#if INDEXED
  if (row / MOE_TILE_ROWS >= uint(table[p.count_off]) || table[p.slot_token_off + row] < 0) return;
#endif
  const uint xb = p.x_offset + row * p.x_stride + blk * 32;
  float v[32];
  float amax = 0.0;
  [[unroll]] for (uint i = 0; i < 32; ++i) {
    v[i] = x[xb + i];
    amax = max(amax, abs(v[i]));
  }
  const float inv = amax > 0.0 ? 127.0 / amax : 0.0;
  int isum = 0;
  ivec4 packed[2];
  [[unroll]] for (uint w = 0; w < 8; ++w) {
    const ivec4 q = ivec4(roundEven(vec4(v[4 * w], v[4 * w + 1], v[4 * w + 2], v[4 * w + 3]) * inv));
    isum += (q.x + q.y) + (q.z + q.w);
    const uvec4 b = uvec4(q) & 0xFFu;
    packed[w / 4][w % 4] = int(b.x | (b.y << 8) | (b.z << 16) | (b.w << 24));
  }
  const uint bi = row * nblk + blk;
  q4[bi * 2] = packed[0];
  q4[bi * 2 + 1] = packed[1];
  const float d = amax / 127.0;
  ds[p.ds_offset + bi] = vec2(d, d * float(isum));
}
