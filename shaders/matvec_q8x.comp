#version 450
// y[r] = (accumulate ? y[r] : 0) + W[r] . x for Q8_0 / Q4_K / Q5_K / Q6_K weights, with x
// quantized to int8 per 32-element block in shared memory and packed 4x8-bit
// integer dot products (SPV_KHR_integer_dot_product, OpSDot) in the inner loop.
// Same bindings and push constants as matvec.comp.
// Compile-time: WTYPE (4 = Q8_0, 5 = Q4_K, 6 = Q5_K, 7 = Q6_K), INDEXED (MoE expert variant),
// GLU (the input is act(x, u) of a second vector u, as matvec.comp's, formed
// in f32 before it is quantized).
// Specialization: 0 = workgroup size, 1 = TPR lanes per row (power of 2, at
// most the subgroup size), 2 = RPT rows per lane (1..8), 3 = XQ_WORDS: int32
// words of quantized x held in shared memory (>= ncols / 4), 4 = GLU activation.
//
// Numerics: x_i is replaced by dx * round(x_i / dx) with dx = max|x| / 127
// over its 32-element block, so |error| <= sum_i |w_i| * dx(i) / 2 (the Q8
// activation rounding of llama.cpp-style CPU paths); the weight sum of a block
// uses the same rounded x, so the bound holds for the min terms as well.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_spirv_intrinsics : require

#define WT_Q8_0 4
#define WT_Q4_K 5
#define WT_Q5_K 6
#define WT_Q6_K 7
#ifndef INDEXED
#define INDEXED 0
#endif

// OpSDot (4450) on two int32 words of 4 packed signed bytes (format 0 = 4x8Bit).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4(int a, int b, spirv_literal int packed_format);

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TPR = 16;
layout(constant_id = 2) const uint RPT = 8;
layout(constant_id = 3) const uint XQ_WORDS = 512;

layout(set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
#if WTYPE == WT_Q8_0 || WTYPE == WT_Q6_K
layout(set = 0, binding = 0) readonly buffer W1 { uint w1[]; };
#endif
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Ids { int ids[]; };
#endif
#ifndef GLU
#define GLU 0
#endif
#if GLU
layout(set = 0, binding = 3 + INDEXED) readonly buffer U { vec4 u4[]; };
layout(constant_id = 4) const uint GLU_ACT = 0;
#include "glu.glsl"
#define XV(i) glu(x4[i], u4[i], GLU_ACT)
#else
#define XV(i) x4[i]
#endif

layout(push_constant) uniform Push {
  uint ncols, nrows, w_offset, x_offset, y_offset, accumulate;
  uint row_blocks;
  uint expert_stride, n_experts, ids_offset, x_stride, y_stride;
} p;

const uint MAX_RPT = 8;
shared ivec4 xq[XQ_WORDS / 4];    // x as int8, 16 per entry
shared vec2 xds[XQ_WORDS / 8];    // per 32-block: (dx, dx * sum of its int8 values)

#include "q8x_quant.glsl"
#define Q8X_WT WTYPE
#define Q8X(n) n
#define Q8X_W4(i) w4[i]
#define Q8X_W1(i) w1[i]
#include "q8x_type.glsl"

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint rows_per_wg = (WG / TPR) * RPT;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
  if (wg >= p.row_blocks) return;
  uint wbase = p.w_offset, xbase = p.x_offset, ybase = p.y_offset;
#if INDEXED
  const uint item = gl_WorkGroupID.y;
  const int e = ids[p.ids_offset + item];
  if (e < 0 || uint(e) >= p.n_experts) return;
  wbase += uint(e) * p.expert_stride;
  xbase += item * p.x_stride;
  ybase += item * p.y_stride;
#endif
  const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  const uint lane = tid % TPR;
  const uint grp = tid / TPR;
  const uint row0 = wg * rows_per_wg + grp * RPT;
  const uint nb = p.ncols / QK;
  const uint units = nb * UPB;
  const uint row_units = nb * BLOCK_UNITS;

  uint rowb[MAX_RPT];
  float acc[MAX_RPT];
  [[unroll]] for (uint r = 0; r < MAX_RPT; ++r) {
    rowb[r] = wbase / UNIT_BYTES + min(row0 + r, p.nrows - 1) * row_units;  // tail rows recompute the last row
    acc[r] = 0.0;
  }

  // Issue the first unit's weight loads, then quantize x while they are in flight.
  uint u = lane;
  WData w[MAX_RPT];
  if (u < units) {
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) w[r] = load_w(rowb[r] + (u / UPB) * BLOCK_UNITS, u % UPB);
  }

  // x -> int8 per 32-element block: one block per thread.
  const uint xb = xbase / 4;
  for (uint blk = tid; blk < p.ncols / 32; blk += WG) {
    vec4 v[8];
    [[unroll]] for (uint i = 0; i < 8; ++i) v[i] = XV(xb + blk * 8 + i);
    q8x_quantize_block(v, blk);
  }
  barrier();

  while (u < units) {
    const uint k = u % UPB;
    const XData xd = load_x(u / UPB, k);
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) acc[r] += dot_w(w[r], k, xd);
    u += TPR;
    if (u < units) {
      [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
        if (r < RPT) w[r] = load_w(rowb[r] + (u / UPB) * BLOCK_UNITS, u % UPB);
    }
  }

  // Reduce over the TPR lanes of each row group (TPR <= subgroup size).
  for (uint o = TPR / 2; o > 0; o >>= 1) {
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) acc[r] += subgroupShuffleXor(acc[r], o);
  }
  if (lane == 0) {
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r) {
      const uint row = row0 + r;
      if (r < RPT && row < p.nrows) {
        const uint yi = ybase + row;
        y[yi] = p.accumulate != 0 ? y[yi] + acc[r] : acc[r];
      }
    }
  }
}
