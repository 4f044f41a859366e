#version 450
// Y[n][r] = (accumulate ? Y[n][r] : 0) + sum_i W[r][i] * x~[n][i] for Q8_0 / Q4_K /
// Q5_K / Q6_K weights and activations x~ already quantized to int8 blocks of 32
// by quantize_q8.comp, with packed 4x8-bit signed integer dot products
// (SPV_KHR_integer_dot_product OpSDot, declared through GL_EXT_spirv_intrinsics).
//
// A workgroup computes BM weight rows x BN tokens. Per K-step of BK 32-element
// blocks it decodes the weight blocks into shared memory as int8 with per-block
// float factors, copies the activation blocks next to them, then each thread
// accumulates TM x TN outputs (rows tr + 16 i, tokens tc + 8 j).
// Per (weight block, activation block) with s = integer dot of the 32 int8 pairs:
//   Q8_0:       d * dx * s
//   Q4_K, Q5_K: (d * sc) * dx * s - (dmin * m) * (dx * sum q_x)   (q in 0..15 / 0..31)
//   Q6_K:       dx * ((d * sc_lo) * s_lo + (d * sc_hi) * s_hi)     (q - 32, halves of 16)
//
// Compile-time: WTYPE (4 = Q8_0, 5 = Q4_K, 6 = Q5_K, 7 = Q6_K); INDEXED = 1: the
// expert-grouped variant over a MoeTable (moe_table.h): workgroup y = tile,
// BN = kMoeTileRows slots of one expert; activation row = gather_x ? slot_token : slot.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_spirv_intrinsics : require
#include "moe_table.glsl"

#define WT_Q8_0 4
#define WT_Q4_K 5
#define WT_Q5_K 6
#define WT_Q6_K 7
#ifndef INDEXED
#define INDEXED 0
#endif

#if WTYPE == WT_Q8_0 || WTYPE == WT_Q6_K
// 2-byte aligned blocks: weights addressed in uint16 units.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define W16 1
#endif
#if WTYPE == WT_Q8_0
#define QK 32
#define BLOCK_UNITS 17   // 34 bytes, uint16 units
#elif WTYPE == WT_Q4_K
#define QK 256
#define BLOCK_UNITS 36   // 144 bytes, uint32 units
#elif WTYPE == WT_Q5_K
#define QK 256
#define BLOCK_UNITS 44   // 176 bytes, uint32 units
#elif WTYPE == WT_Q6_K
#define QK 256
#define BLOCK_UNITS 105  // 210 bytes, uint16 units
#else
#error "gemm_int8: unsupported WTYPE"
#endif

// OpSDot (4450) on two int32 words of 4 packed signed bytes (format 0 = 4x8Bit).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4(int a, int b, spirv_literal int packed_format);

const uint WG = 128;
const uint BM = 64, BK = 4;
const uint BN = INDEXED != 0 ? MOE_TILE_ROWS : 32;  // tokens (slots) per workgroup
const uint TM = 4, TN = BN / 8;       // outputs per thread: BM * BN = WG * TM * TN
const uint ROW_THREADS = BM / TM;     // 16
const uint XL = BN * BK / WG;         // activation blocks each thread loads per step
layout(local_size_x = 128) in;

#ifdef W16
layout(set = 0, binding = 0) readonly buffer W { uint16_t w2[]; };
uint ld32(uint i) { return uint(w2[i]) | (uint(w2[i + 1]) << 16); }
#else
layout(set = 0, binding = 0) readonly buffer W { uint w4[]; };
#endif
layout(set = 0, binding = 1) readonly buffer XQ { ivec4 xq[]; };
layout(set = 0, binding = 1) readonly buffer XD { vec2 xds[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Table { int table[]; };
#endif

layout(push_constant) uniform Push {
  uint ncols, nrows, n_tokens, w_offset;  // w_offset, expert_stride: weight units (2 or 4 bytes)
  uint y_offset, y_stride, accumulate, ds_offset;  // ds_offset: vec2 index of the scratch scales
  uint expert_stride, n_experts, count_off, tile_expert_off;
  uint slot_token_off, gather_x, y_pair_off;  // y_pair_off: moe_y_row.glsl
} p;
#if INDEXED
#include "moe_y_row.glsl"
#endif

// Rows padded by one entry to spread the per-row accesses over the banks.
const uint SW_STRIDE = BK * 2 + 1, SWD_STRIDE = BK + 1;
shared ivec4 sw[BM * SW_STRIDE];   // weight int8: row r, block b at r * SW_STRIDE + 2 b (+1)
shared vec2 swd[BM * SWD_STRIDE];  // its factors (see the header)
shared ivec4 sx[BN * BK * 2];      // activation int8: token n, block b at (n * BK + b) * 2 (+1)
shared vec2 sxd[BN * BK];          // (dx, dx * sum q_x)

// Decodes 32-element block `blk` of the weight row starting at unit `rb`.
void decode_block(uint rb, uint blk, out ivec4 q0, out ivec4 q1, out vec2 f) {
  uint q[8];
#if WTYPE == WT_Q8_0
  const uint bi = rb + blk * BLOCK_UNITS;
  [[unroll]] for (uint t = 0; t < 8; ++t) q[t] = ld32(bi + 1 + 2 * t);
  f = vec2(unpackHalf2x16(uint(w2[bi])).x, 0.0);
#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
  const uint bi = rb + (blk / 8) * BLOCK_UNITS, j = blk % 8;
  const vec2 dm = unpackHalf2x16(w4[bi]);
  // 6-bit scale and min of sub-block j from scales[12] (words 1..3).
  const uint s_j = (w4[bi + 1 + j / 4] >> (8 * (j % 4))) & 0xFFu;    // scales[j]
  const uint s_j4 = (w4[bi + 2 + j / 4] >> (8 * (j % 4))) & 0xFFu;   // scales[j + 4]
  uint sc, m;
  if (j < 4) {
    sc = s_j & 63u;
    m = s_j4 & 63u;
  } else {
    const uint s_jm4 = (w4[bi + 1 + (j - 4) / 4] >> (8 * (j % 4))) & 0xFFu;  // scales[j - 4]
    sc = (s_j4 & 0x0Fu) | ((s_jm4 >> 6) << 4);
    m = (s_j4 >> 4) | ((s_j >> 6) << 4);
  }
  f = vec2(dm.x * float(sc), dm.y * float(m));
#if WTYPE == WT_Q4_K
  const uint qs = bi + 4 + (j / 2) * 8;
#else
  const uint qs = bi + 12 + (j / 2) * 8;
#endif
  const uint sh = 4 * (j & 1u);
  [[unroll]] for (uint t = 0; t < 8; ++t) {
    q[t] = (w4[qs + t] >> sh) & 0x0F0F0F0Fu;
#if WTYPE == WT_Q5_K
    q[t] |= ((w4[bi + 4 + t] >> j) & 0x01010101u) << 4;  // bit j of qh[4t..4t+4)
#endif
  }
#elif WTYPE == WT_Q6_K
  // Block: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d (f16) @208.
  // Block j = 4 n + m: ql[64 n + 32 (m & 1) + l] nibble m >> 1, qh[32 n + l] bits 2m..2m+1,
  // scales[8 n + 2 m] (l < 16) and [8 n + 2 m + 1].
  const uint bi = rb + (blk / 8) * BLOCK_UNITS, j = blk % 8, n = j / 4, m = j % 4;
  const uint ql = bi + 32 * n + 16 * (m & 1u), qh = bi + 64 + 16 * n;
  const uint lsh = 4 * (m >> 1), hsh = 2 * m;
  [[unroll]] for (uint t = 0; t < 8; ++t) {
    const uint v = ((ld32(ql + 2 * t) >> lsh) & 0x0F0F0F0Fu) | (((ld32(qh + 2 * t) >> hsh) & 0x03030303u) << 4);
    q[t] = (v + 0x60606060u) ^ 0x80808080u;  // bytes v - 32 as int8 (no carries: v + 96 < 256)
  }
  const int scw = int(uint(w2[bi + 96 + 4 * n + m]));
  const float d = unpackHalf2x16(uint(w2[bi + 104])).x;
  f = d * vec2(bitfieldExtract(scw, 0, 8), bitfieldExtract(scw, 8, 8));
#endif
  q0 = ivec4(q[0], q[1], q[2], q[3]);
  q1 = ivec4(q[4], q[5], q[6], q[7]);
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint tr = tid % ROW_THREADS, tc = tid / ROW_THREADS;
  const uint row0 = gl_WorkGroupID.x * BM;
  const uint nblk = p.ncols / 32;
  uint wbase = p.w_offset;
  const uint row_units = (p.ncols / QK) * BLOCK_UNITS;

  // This thread's activation rows for the tile loads (tokens (tid + l * WG) / BK), or -1.
  int xrow[XL];
#if INDEXED
  const uint tile = gl_WorkGroupID.y;
  if (tile >= uint(table[p.count_off])) return;
  const int e = table[p.tile_expert_off + tile];
  if (e < 0 || uint(e) >= p.n_experts) return;
  wbase += uint(e) * p.expert_stride;
  const uint col0 = tile * BN;
  [[unroll]] for (uint l = 0; l < XL; ++l) {
    const uint ln = (tid + l * WG) / BK;
    const int tok = table[p.slot_token_off + col0 + ln];
    xrow[l] = tok < 0 ? -1 : (p.gather_x != 0 ? tok : int(col0 + ln));
  }
#else
  const uint col0 = gl_WorkGroupID.y * BN;
  [[unroll]] for (uint l = 0; l < XL; ++l) {
    const uint ln = (tid + l * WG) / BK;
    xrow[l] = col0 + ln < p.n_tokens ? int(col0 + ln) : -1;
  }
#endif

  float acc[TM][TN];
  [[unroll]] for (uint i = 0; i < TM; ++i)
    [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < nblk; k0 += BK) {
    // Weight tile: BM * BK blocks, WG at a time.
    [[unroll]] for (uint k = 0; k < BM * BK / WG; ++k) {
      const uint u = tid + k * WG, r = u / BK, b = u % BK, row = row0 + r, blk = k0 + b;
      ivec4 q0 = ivec4(0), q1 = ivec4(0);
      vec2 f = vec2(0.0);
      if (row < p.nrows && blk < nblk) decode_block(wbase + row * row_units, blk, q0, q1, f);
      sw[r * SW_STRIDE + 2 * b] = q0;
      sw[r * SW_STRIDE + 2 * b + 1] = q1;
      swd[r * SWD_STRIDE + b] = f;
    }
    // Activation tile: BN * BK blocks, XL per thread.
    [[unroll]] for (uint l = 0; l < XL; ++l) {
      const uint u = tid + l * WG, blk = k0 + u % BK;
      ivec4 q0 = ivec4(0), q1 = ivec4(0);
      vec2 f = vec2(0.0);
      if (xrow[l] >= 0 && blk < nblk) {
        const uint bi = uint(xrow[l]) * nblk + blk;
        q0 = xq[bi * 2];
        q1 = xq[bi * 2 + 1];
        f = xds[p.ds_offset + bi];
      }
      sx[u * 2] = q0;
      sx[u * 2 + 1] = q1;
      sxd[u] = f;
    }
    barrier();

    [[unroll]] for (uint b = 0; b < BK; ++b) {
      ivec4 xa[TN], xb[TN];
      vec2 xd[TN];
      [[unroll]] for (uint j = 0; j < TN; ++j) {
        const uint n = tc + 8 * j;
        xa[j] = sx[(n * BK + b) * 2];
        xb[j] = sx[(n * BK + b) * 2 + 1];
        xd[j] = sxd[n * BK + b];
      }
      [[unroll]] for (uint i = 0; i < TM; ++i) {
        const uint r = tr + ROW_THREADS * i;
        const ivec4 wa = sw[r * SW_STRIDE + 2 * b], wb = sw[r * SW_STRIDE + 2 * b + 1];
        const vec2 wd = swd[r * SWD_STRIDE + b];
        [[unroll]] for (uint j = 0; j < TN; ++j) {
          int lo = sdot4(wa.x, xa[j].x, 0);
          lo = lo + sdot4(wa.y, xa[j].y, 0);
          lo = lo + sdot4(wa.z, xa[j].z, 0);
          lo = lo + sdot4(wa.w, xa[j].w, 0);
          int hi = sdot4(wb.x, xb[j].x, 0);
          hi = hi + sdot4(wb.y, xb[j].y, 0);
          hi = hi + sdot4(wb.z, xb[j].z, 0);
          hi = hi + sdot4(wb.w, xb[j].w, 0);
#if WTYPE == WT_Q8_0
          acc[i][j] += float(lo + hi) * (wd.x * xd[j].x);
#elif WTYPE == WT_Q6_K
          acc[i][j] += xd[j].x * (wd.x * float(lo) + wd.y * float(hi));
#else
          acc[i][j] += float(lo + hi) * (wd.x * xd[j].x) - wd.y * xd[j].y;
#endif
        }
      }
    }
    barrier();
  }

  [[unroll]] for (uint j = 0; j < TN; ++j) {
    const uint col = col0 + tc + 8 * j;
#if INDEXED
    const int yr = moe_y_row(col);
    if (yr < 0) continue;
    const uint y_col = uint(yr);
#else
    if (col >= p.n_tokens) continue;
    const uint y_col = col;
#endif
    [[unroll]] for (uint i = 0; i < TM; ++i) {
      const uint row = row0 + tr + ROW_THREADS * i;
      if (row < p.nrows) {
        const uint yi = p.y_offset + y_col * p.y_stride + row;
        y[yi] = p.accumulate != 0 ? y[yi] + acc[i][j] : acc[i][j];
      }
    }
  }
}
