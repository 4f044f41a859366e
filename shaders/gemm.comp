#version 450
// Tiled GEMM over ggml-layout weights (see engine/vulkan/vk_gemm.h):
//   Y[n][r] = (accumulate ? Y[n][r] : 0) + W[r] . X[n]
// Compile-time: WTYPE (weight type, see wtype.glsl), INDEXED (expert-grouped
// product over a MoeTable: tile y of the grid is table tile y, BN = its slots).
// Specialization: 0 = workgroup size WG, 1 = BM rows, 2 = BN tokens, 3 = BK
// (multiple of 16), 4 = TM rows and 5 = TN tokens per thread (multiples of 4, <= 8).
// Needs BM*BK/16 and BN*BK/4 to be multiples of WG (at most 4 each per thread),
// and WG = (BM/TM) * (BN/TN).
//
// A workgroup owns a BM x BN tile of Y. Per BK step it dequantizes a BM x BK
// weight tile and copies a BN x BK activation tile into shared memory, both
// k-major (tile[k][row]), so the inner loop reads TM/4 + TN/4 vec4s per k for
// TM*TN FMAs. A thread's rows are TM/4 groups of 4 spaced BM/TM vec4s apart
// (tokens likewise), so neighbouring threads read neighbouring vec4s: no bank
// conflicts. The next step's global loads are issued before the current step
// is computed, and kept raw (packed quants) in registers until stored.
#extension GL_EXT_control_flow_attributes : require

#include "wtype.glsl"

#ifndef INDEXED
#define INDEXED 0
#endif

#include "wchunk.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 32;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Table { int table[]; };
#endif

// Must match GemmPush in engine/vulkan/vk_gemm.cpp. w_offset and
// expert_stride are in load units (16 bytes, or 2 for W16 types).
layout(push_constant) uniform Push {
  uint ncols, nrows, n_tokens, w_offset;
  uint x_offset, x_stride, y_offset, y_stride;
  uint accumulate, expert_stride, n_experts, gather_x;
  uint count_off, tile_expert_off, slot_token_off, y_pair_off;  // y_pair_off: moe_y_row.glsl
} p;
#if INDEXED
#include "moe_y_row.glsl"
#endif

const uint MAX_CH = 4;  // weight / activation chunks per thread
const uint MAX_T = 8;   // TM, TN

shared vec4 As[BK * BM / 4];  // As[k * BM/4 + m/4][m%4]
shared vec4 Bs[BK * BN / 4];

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint A_CH = BM * BK / 16 / WG, B_CH = BN * BK / 4 / WG;
  const uint tid = gl_LocalInvocationID.x;
  const uint tx = tid % (BN / TN), ty = tid / (BN / TN);
  const uint m0 = gl_WorkGroupID.x * BM;
  uint wbase = p.w_offset;
#if INDEXED
  const uint tile = gl_WorkGroupID.y;
  if (tile >= uint(table[p.count_off])) return;
  const int expert = table[p.tile_expert_off + tile];
  if (expert < 0 || uint(expert) >= p.n_experts) return;
  wbase += uint(expert) * p.expert_stride;
#endif
  const uint n0 = gl_WorkGroupID.y * BN;
  const uint row_units = p.ncols / QK * BU;

  // Weight chunk c = tid + i*WG: row c % BM, elements [16 * (c / BM), +16) of
  // the BK step. Rows past the end re-read the last row (results discarded).
  uint a_row[MAX_CH];
  [[unroll]] for (uint i = 0; i < MAX_CH; ++i) {
    const uint c = tid + i * WG;
    a_row[i] = wbase + min(m0 + c % BM, p.nrows - 1) * row_units;
  }
  // Activation chunk c: token column c % BN, elements [4 * (c / BN), +4).
  uint b_row[MAX_CH];
  bool b_ok[MAX_CH];
  [[unroll]] for (uint i = 0; i < MAX_CH; ++i) {
    const uint n = n0 + (tid + i * WG) % BN;
#if INDEXED
    const int tok = table[p.slot_token_off + n];
    b_ok[i] = tok >= 0;
    const uint src = p.gather_x != 0 ? min(uint(max(tok, 0)), p.n_tokens - 1) : n;
#else
    b_ok[i] = true;
    const uint src = min(n, p.n_tokens - 1);
#endif
    b_row[i] = (p.x_offset + src * p.x_stride) / 4;
  }

  float acc[MAX_T * MAX_T];
  [[unroll]] for (uint i = 0; i < MAX_T * MAX_T; ++i) acc[i] = 0.0;

  Raw ra[MAX_CH];
  vec4 rb[MAX_CH];
  const uint nk = p.ncols / BK;
  [[unroll]] for (uint i = 0; i < MAX_CH; ++i) {
    if (i < A_CH) ra[i] = fetch_w(a_row[i], 16 * ((tid + i * WG) / BM));
    if (i < B_CH) rb[i] = b_ok[i] ? x4[b_row[i] + (tid + i * WG) / BN] : vec4(0.0);
  }
  for (uint kt = 0; kt < nk; ++kt) {
    const uint k0 = kt * BK;
    barrier();
    [[unroll]] for (uint i = 0; i < MAX_CH; ++i) {
      if (i < A_CH) {
        const uint c = tid + i * WG, m = c % BM, kc = c / BM;
        [[unroll]] for (uint t = 0; t < 16; ++t) {
          const uint s = (16 * kc + t) * BM + m;
          As[s / 4][s % 4] = dequant(ra[i], k0 + 16 * kc, t);
        }
      }
      if (i < B_CH) {
        const uint c = tid + i * WG, n = c % BN, kq = c / BN;
        [[unroll]] for (uint t = 0; t < 4; ++t) {
          const uint s = (4 * kq + t) * BN + n;
          Bs[s / 4][s % 4] = rb[i][t];
        }
      }
    }
    barrier();
    if (kt + 1 < nk) {
      const uint k1 = k0 + BK;
      [[unroll]] for (uint i = 0; i < MAX_CH; ++i) {
        if (i < A_CH) ra[i] = fetch_w(a_row[i], k1 + 16 * ((tid + i * WG) / BM));
        if (i < B_CH) rb[i] = b_ok[i] ? x4[b_row[i] + (k1 + 4 * ((tid + i * WG) / BN)) / 4] : vec4(0.0);
      }
    }
    [[unroll]] for (uint k = 0; k < BK; ++k) {
      vec4 a[MAX_T / 4], b[MAX_T / 4];
      [[unroll]] for (uint i = 0; i < MAX_T / 4; ++i)
        if (i < TM / 4) a[i] = As[k * (BM / 4) + i * (BM / TM) + ty];
      [[unroll]] for (uint j = 0; j < MAX_T / 4; ++j)
        if (j < TN / 4) b[j] = Bs[k * (BN / 4) + j * (BN / TN) + tx];
      [[unroll]] for (uint i = 0; i < MAX_T; ++i)
        [[unroll]] for (uint j = 0; j < MAX_T; ++j)
          if (i < TM && j < TN) acc[i * MAX_T + j] = fma(a[i / 4][i % 4], b[j / 4][j % 4], acc[i * MAX_T + j]);
    }
  }

  // Thread rows 4 * (i4 * BM/TM + ty) + (i % 4), tokens likewise.
  [[unroll]] for (uint j = 0; j < MAX_T; ++j) {
    if (j >= TN) continue;
    const uint n = n0 + 4 * ((j / 4) * (BN / TN) + tx) + j % 4;
#if INDEXED
    const int yr = moe_y_row(n);
    if (yr < 0) continue;
    const uint yb = p.y_offset + uint(yr) * p.y_stride;
#else
    if (n >= p.n_tokens) continue;
    const uint yb = p.y_offset + n * p.y_stride;
#endif
    [[unroll]] for (uint i = 0; i < MAX_T; ++i) {
      const uint r = m0 + 4 * ((i / 4) * (BM / TM) + ty) + i % 4;
      if (i < TM && r < p.nrows) {
        const float v = acc[i * MAX_T + j];
        y[yb + r] = p.accumulate != 0 ? y[yb + r] + v : v;
      }
    }
  }
}
