#version 450
// Y[n][r] = (accumulate ? Y[n][r] : 0) + sum_i W[r][i] X[n][i] with
// GL_NV_cooperative_matrix2: workgroup-scope fragments of BM x BN, tensor-
// addressed loads that decode the weight blocks to f16 on the way in (the
// K-quants' scales decoded once per block into shared memory), f32
// accumulation (see vk_gemm.h). The activations come as f16 rows from
// to_f16.comp: tokens, or (INDEXED) the slots of the MoE table, gathered.
// Compile-time: WTYPE (1=f32 2=f16 3=bf16 4=q8_0 5=q4_k 6=q5_k 7=q6_k, as in
// matvec.comp), INDEXED (expert-grouped over a MoE table: one workgroup
// column = one table tile of BN = kMoeTileRows slots, one expert).
// Specialization: 0 = workgroup size, 1 = BM weight rows, 2 = BN tokens,
// 3 = BK columns per step.
// The weights binding starts at the matrix (or expert 0).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_EXT_buffer_reference : require

#ifndef INDEXED
#define INDEXED 0
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 32;
const uint BN_HALF = BN / 2;

// ggml blocks as 16/32-bit words (no 8-bit storage needed).
struct BlockQ8_0 { float16_t d; int16_t qs[16]; };                         // 34 bytes
struct BlockQ4_K { f16vec2 dm; uint scales[3]; uint qs[32]; };              // 144
struct BlockQ5_K { f16vec2 dm; uint scales[3]; uint qh[8]; uint qs[32]; };  // 176
struct BlockQ6_K { uint16_t ql[64]; uint16_t qh[32]; uint16_t scales[8]; float16_t d; };  // 210

#if WTYPE == 1
#define QK 1
#define WBLOCK float
#elif WTYPE == 2
#define QK 1
#define WBLOCK float16_t
#elif WTYPE == 3
#define QK 1
#define WBLOCK uint16_t
#elif WTYPE == 4
#define QK 32
#define WBLOCK BlockQ8_0
#elif WTYPE == 5
#define QK 256
#define WBLOCK BlockQ4_K
#elif WTYPE == 6
#define QK 256
#define WBLOCK BlockQ5_K
#elif WTYPE == 7
#define QK 256
#define WBLOCK BlockQ6_K
#else
#error "unknown WTYPE"
#endif

layout(set = 0, binding = 0) readonly buffer W { WBLOCK w[]; };
layout(set = 0, binding = 1) readonly buffer XH { float16_t xh[]; };  // f16 rows of ncols
layout(set = 0, binding = 2) buffer Y { float y[]; };
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Table { int table[]; };
#endif

layout(push_constant) uniform Push {
  uint ncols, nrows, n_tokens, row_blocks;  // row_blocks: blocks (elements for float types) per weight row
  uint y_offset, y_stride, accumulate;      // floats
  uint expert_blocks, n_experts;            // expert stride in blocks
  uint count_off, tile_expert_off, slot_token_off, y_pair_off;  // y_pair_off: moe_y_row.glsl
} p;
#if INDEXED
#include "moe_y_row.glsl"
#endif

layout(buffer_reference, std430, buffer_reference_align = 4) buffer RefF32 { float v; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RefBF16 { uint16_t v; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RefQ8_0 { BlockQ8_0 b; };
// K-quant blocks are 16-byte aligned (144 and 176 bytes from an aligned binding, see
// gemm_coopmat2.cpp); their quants are read as 16-bit words.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer RefQ4_K { BlockQ4_K b; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer RefQ5_K { BlockQ5_K b; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer RefQ4_K16 { uint16_t header[8]; uint16_t qs[64]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer RefQ5_K16 { uint16_t header[8]; uint16_t qh[16]; uint16_t qs[64]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RefQ6_K { BlockQ6_K b; };

float16_t decode_f32(const in RefF32 r, const in uint bc[2], const in uint ib[2]) { return float16_t(r.v); }
float16_t decode_bf16(const in RefBF16 r, const in uint bc[2], const in uint ib[2]) {
  return float16_t(uintBitsToFloat(uint(r.v) << 16));
}
float16_t decode_q8_0(const in RefQ8_0 r, const in uint bc[2], const in uint ib[2]) {
  const uint i = ib[1];
  const int v = int(r.b.qs[i >> 1]);
  return float16_t(float((i & 1u) != 0 ? v >> 8 : (v << 24) >> 24) * float(r.b.d));
}

// Byte j of a packed little-endian word array.
#define BYTE(arr, j) ((arr[(j) >> 2] >> (8 * ((j) & 3u))) & 0xFFu)

// 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
vec2 k_scale_min(const uint s[3], uint j) {
  if (j < 4) return vec2(BYTE(s, j) & 63u, BYTE(s, j + 4) & 63u);
  return vec2((BYTE(s, j + 4) & 0xFu) | ((BYTE(s, j - 4) >> 6) << 4), (BYTE(s, j + 4) >> 4) | ((BYTE(s, j) >> 6) << 4));
}

// The K-quants' per-row scales of the current 256-column block, decoded once
// per block by store_scales() instead of per element: Q4_K/Q5_K (d * scale,
// dmin * min) of the 8 sub-blocks, Q6_K d * scale of the 16. Index sub * BM + row
// within the tile (rows are tile-aligned, so blockCoords[0] % BM).
#if WTYPE == 5 || WTYPE == 6
#define NSCALES 8
shared vec2 scales_sh[NSCALES * BM];
#elif WTYPE == 7
#define NSCALES 16
shared float scales_sh[NSCALES * BM];
#endif

// Q4_K/Q5_K element i = 32 sub + l: nibble (sub & 1) of quant byte 32 (sub / 2) + l,
// in 16-bit word k_word(i) of the quants.
uint k_word(const uint i) { return ((i & 0xC0u) >> 2) + ((i & 0x1Eu) >> 1); }
uint k_nibble(const uint16_t word, const uint i) { return (uint(word) >> (4 * ((i >> 5) & 1u) + 8 * (i & 1u))) & 0xFu; }

#if WTYPE == 5

float16_t decode_q4_k(const in RefQ4_K r, const in uint bc[2], const in uint ib[2]) {
  const uint i = ib[1], sub = i >> 5;
  const uint q = k_nibble(RefQ4_K16(r).qs[k_word(i)], i);
  const vec2 sm = scales_sh[sub * BM + bc[0] % BM];
  return float16_t(sm.x * float(q) - sm.y);
}

#elif WTYPE == 6
float16_t decode_q5_k(const in RefQ5_K r, const in uint bc[2], const in uint ib[2]) {
  const uint i = ib[1], sub = i >> 5, l = i & 31u;
  RefQ5_K16 r16 = RefQ5_K16(r);
  const uint qh = (uint(r16.qh[l >> 1]) >> (8 * (l & 1u) + sub)) & 1u;
  const uint q = k_nibble(r16.qs[k_word(i)], i) | (qh << 4);
  const vec2 sm = scales_sh[sub * BM + bc[0] % BM];
  return float16_t(sm.x * float(q) - sm.y);
}

#elif WTYPE == 7
// Element 128n + 32m + l: low nibble of ql[64n + 32(m&1) + l] (high for m >= 2),
// bits 2m of qh[32n + l], scale 8n + 2m + l/16.
float16_t decode_q6_k(const in RefQ6_K r, const in uint bc[2], const in uint ib[2]) {
  const uint i = ib[1], n = i >> 7, m = (i >> 5) & 3u, l = i & 31u;
  const uint qlb = 64 * n + 32 * (m & 1u) + l, qhb = 32 * n + l, sb = 8 * n + 2 * m + (l >> 4);
  const uint ql = (uint(r.b.ql[qlb >> 1]) >> (8 * (qlb & 1u) + 4 * (m >> 1))) & 0xFu;
  const uint qh = (uint(r.b.qh[qhb >> 1]) >> (8 * (qhb & 1u) + 2 * m)) & 3u;
  return float16_t(scales_sh[sb * BM + bc[0] % BM] * float(int(ql | (qh << 4)) - 32));
}
#endif

#ifdef NSCALES
// The scales of a block are fetched into registers a block ahead (one row's
// bytes per SC_TPR invocations) and decoded into scales_sh at the block's start.
const uint SC_TPR = gl_WorkGroupSize.x / BM;  // divides NSCALES (tiles have BM <= threads)
#if WTYPE == 7
uint16_t sc_raw[8];
float sc_d;
#else
uint sc_raw[3];
vec2 sc_dm;
#endif

void fetch_scales(const uint row0, const uint w_pos, const uint blk) {
  const uint r = gl_LocalInvocationIndex / SC_TPR;
  if (r >= BM || row0 + r >= p.nrows) return;
  const uint b = w_pos + (row0 + r) * p.row_blocks + blk;
#if WTYPE == 7
  sc_raw = w[b].scales;
  sc_d = float(w[b].d);
#else
  sc_raw = w[b].scales;
  sc_dm = vec2(w[b].dm);
#endif
}

// After every invocation's last decode of the previous block.
void store_scales() {
  barrier();
  const uint r = gl_LocalInvocationIndex / SC_TPR, per = NSCALES / SC_TPR;
  const uint s0 = (gl_LocalInvocationIndex % SC_TPR) * per;
  if (r < BM) {
    [[unroll]] for (uint j = 0; j < per; ++j) {
      const uint s = s0 + j;
#if WTYPE == 7
      scales_sh[s * BM + r] = sc_d * float((int(uint(sc_raw[s >> 1]) >> (8 * (s & 1u))) << 24) >> 24);
#else
      scales_sh[s * BM + r] = sc_dm * k_scale_min(sc_raw, s);
#endif
    }
  }
  barrier();
}
#define FILL_SCALES(k0)                                                         \
  if ((k0) % QK == 0) {                                                         \
    store_scales();                                                             \
    if ((k0) + QK < p.ncols) fetch_scales(row0, w_pos, (k0) / QK + 1);          \
  }
#define FETCH_FIRST_SCALES fetch_scales(row0, w_pos, 0);
#else
#define FILL_SCALES(k0)
#define FETCH_FIRST_SCALES
#endif

#if WTYPE == 1
#define DECODE_W , decode_f32
#elif WTYPE == 2
#define DECODE_W
#elif WTYPE == 3
#define DECODE_W , decode_bf16
#elif WTYPE == 4
#define DECODE_W , decode_q8_0
#elif WTYPE == 5
#define DECODE_W , decode_q4_k
#elif WTYPE == 6
#define DECODE_W , decode_q5_k
#else
#define DECODE_W , decode_q6_k
#endif

#if INDEXED
shared int y_rows[BN];  // output row of each slot of the tile (-1: padding)
shared bool in_upper_half;  // a token in slots BN / 2 ..
uint slot0;

// Stores one result element (r: weight row, c: slot within the tile) unless its slot is padding.
float store_y(const in uint r, const in uint c, const in float e, const in uint row0) {
  const uint row = row0 + r;
  if (row < p.nrows && y_rows[c] >= 0) {
    const uint i = p.y_offset + uint(y_rows[c]) * p.y_stride + row;
    y[i] = p.accumulate != 0 ? y[i] + e : e;
  }
  return e;
}
#endif

// acc += W[row0 .. +BM] . X[b_row0 .. +N]^T over all columns, through layouts LA, LB.
// (Unrolling a block's steps made the expert-grouped products slower on an H100.)
#define K_LOOP(LA, LB, N)                                                                             \
  [[dont_unroll]] for (uint k0 = 0; k0 < p.ncols; k0 += BK) {                                        \
    FILL_SCALES(k0)                                                                                  \
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;                                  \
    coopmat<float16_t, gl_ScopeWorkgroup, BK, N, gl_MatrixUseB> b;                                   \
    coopMatLoadTensorNV(a, w, w_pos, sliceTensorLayoutNV(LA, row0, BM, k0, BK) DECODE_W);            \
    coopMatLoadTensorNV(b, xh, 0, sliceTensorLayoutNV(LB, b_row0, N, k0, BK), transpose);            \
    acc = coopMatMulAdd(a, b, acc);                                                                  \
  }

// A BM x N accumulator `acc` over the whole row, unclamped when the tile is in bounds.
#define TILE_PRODUCT(N)                                                                               \
  coopmat<float, gl_ScopeWorkgroup, BM, N, gl_MatrixUseAccumulator> acc =                             \
      coopmat<float, gl_ScopeWorkgroup, BM, N, gl_MatrixUseAccumulator>(0.0);                         \
  if (INDEXED == 0 && p.accumulate != 0)                                                              \
    coopMatLoadTensorNV(acc, y, p.y_offset, sliceTensorLayoutNV(ly, b_row0, N, row0, BM), transpose); \
  if (in_bounds) {                                                                                    \
    K_LOOP(la, lb, N)                                                                                 \
  } else {                                                                                            \
    K_LOOP(la_clamp, lb_clamp, N)                                                                     \
  }

void main() {
  const uint row0 = gl_WorkGroupID.x * BM;
  uint w_pos = 0;  // first block of the matrix
#if INDEXED
  const uint tile = gl_WorkGroupID.y;
  if (tile >= uint(table[p.count_off])) return;
  const int expert = table[p.tile_expert_off + tile];
  if (expert < 0 || uint(expert) >= p.n_experts) return;
  w_pos = uint(expert) * p.expert_blocks;
  slot0 = tile * BN;
  if (gl_LocalInvocationIndex == 0) in_upper_half = false;
  barrier();
  for (uint i = gl_LocalInvocationIndex; i < BN; i += gl_WorkGroupSize.x) {
    y_rows[i] = moe_y_row(slot0 + i);
    if (i >= BN / 2 && y_rows[i] >= 0) in_upper_half = true;
  }
  barrier();
#else
  const uint col0 = gl_WorkGroupID.y * BN;
#endif

#if INDEXED
  const uint b_row0 = slot0, b_rows = slot0 + BN;
#else
  const uint b_row0 = col0, b_rows = p.n_tokens;
#endif
  tensorViewNV<2, false, 1, 0> transpose = createTensorViewNV(2, false, 1, 0);
#define CLAMPED_LAYOUT tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>
  CLAMPED_LAYOUT ly = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  ly = setTensorLayoutDimensionNV(ly, p.n_tokens, p.nrows);
  ly = setTensorLayoutStrideNV(ly, p.y_stride, 1);
  // The weight (A) and activation (B) layouts, unclamped and clamped alike.
#define A_LAYOUT(L)                                                                                   \
  setTensorLayoutStrideNV(setTensorLayoutDimensionNV(setTensorLayoutBlockSizeNV(L, 1, QK), p.nrows, p.ncols), \
                          p.row_blocks, 1)
#define B_LAYOUT(L) setTensorLayoutStrideNV(setTensorLayoutDimensionNV(L, b_rows, p.ncols), p.ncols, 1)
  const tensorLayoutNV<2> la = A_LAYOUT(createTensorLayoutNV(2)), lb = B_LAYOUT(createTensorLayoutNV(2));
  const CLAMPED_LAYOUT la_clamp = A_LAYOUT(createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV));
  const CLAMPED_LAYOUT lb_clamp = B_LAYOUT(createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV));
  const bool in_bounds = row0 + BM <= p.nrows && b_row0 + BN <= b_rows && p.ncols % BK == 0;
  FETCH_FIRST_SCALES

#if INDEXED
  // A tile whose slots past BN / 2 are all padding multiplies only its first half.
  if (!in_upper_half) {
    TILE_PRODUCT(BN_HALF)
    coopMatPerElementNV(acc, acc, store_y, row0);
    return;
  }
  TILE_PRODUCT(BN)
  coopMatPerElementNV(acc, acc, store_y, row0);
#else
  TILE_PRODUCT(BN)
  coopMatStoreTensorNV(acc, y, p.y_offset, sliceTensorLayoutNV(ly, col0, BN, row0, BM), transpose);
#endif
}
