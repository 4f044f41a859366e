#version 450
// Y[n][r] = (accumulate ? Y[n][r] : 0) + sum_i W[r][i] X[n][i] with
// GL_KHR_cooperative_matrix: f16 inputs, f32 accumulation (see vk_gemm.h).
// Compile-time: WTYPE (1=f32 2=f16 3=bf16 4=q8_0 5=q4_k 6=q5_k 7=q6_k, as in
// matvec.comp), INDEXED (expert-grouped over a MoE table: one workgroup
// column = one table tile of BN = kMoeTileRows slot rows, one expert), GLU
// (INDEXED only: y = glu(W x, U x) as shaders/glu.glsl, U the up weights at
// binding 4; a workgroup's BM rows are BM / 2 features, gate and up fragments
// alternating so that each subgroup holds both of its features' products).
// Y_F16 (GLU only): Y rows are written as f16 (offset and stride in halfs),
// for a down product on f16 rows.
// X_F16: X rows are f16 (offsets and strides in halfs, multiples of 4), as
// the f32 path rounds them anyway: half the activation bytes a step.
// Split-K (k_split != 0, not INDEXED): workgroup z multiplies columns
// [z k_split, (z + 1) k_split) into plane z of y (gemm_split_sum.comp adds them).
// Specialization: 0 = workgroup size (= warps * SG), 1 = BM weight rows per
// workgroup, 2 = BN tokens per workgroup, 3 = WM, 4 = WN rows/tokens per
// subgroup (WM / TM <= 4 and WN / TN <= 2 fragments), 5..7 = TM, TN, TK
// fragment sizes, 8 = SG subgroup size,
// 9 = BK columns per step (multiple of 32), 10 = NBUF shared buffers (2: one
// barrier a step; 1: two barriers a step, half the shared memory).
//
// Each step of BK columns: every thread loads 16-column chunks of W rows and
// vec4s of X rows (consecutive lanes on consecutive vec4s of a row), decodes
// them to f16 and stores them into one of two shared buffers while the
// subgroups multiply the other (one barrier a step), or with NBUF = 1 into the
// one buffer after a second barrier; either way the next step's global loads
// are issued before the current step's multiplies. Results go through
// a per-subgroup shared fragment so that tails, skipped slots and
// accumulation are handled per element.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_GOOGLE_include_directive : require

#define WT_F32 1
#define WT_F16 2
#define WT_BF16 3
#define WT_Q8_0 4
#define WT_Q4_K 5
#define WT_Q5_K 6
#define WT_Q6_K 7
#ifndef INDEXED
#define INDEXED 0
#endif
#ifndef GLU
#define GLU 0
#endif
#if GLU && !INDEXED
#error "GLU needs INDEXED"
#endif
#ifndef X_F16
#define X_F16 0
#endif
#ifndef Y_F16
#define Y_F16 0
#endif
#if Y_F16 && !GLU
#error "Y_F16 needs GLU"
#endif
#if X_F16
#define XVEC f16vec4
#else
#define XVEC vec4
#endif

#if WTYPE == WT_F32 || WTYPE == WT_F16 || WTYPE == WT_BF16
#define QK 1  // rows may end inside a step (guarded per 8 elements)
#define BLOCK_BYTES (WTYPE == WT_F32 ? 4 : 2)
#define FLOAT_W 1
#elif WTYPE == WT_Q8_0
#define QK 32
#define BLOCK_BYTES 34
#elif WTYPE == WT_Q4_K
#define QK 256
#define BLOCK_BYTES 144
#elif WTYPE == WT_Q5_K
#define QK 256
#define BLOCK_BYTES 176
#elif WTYPE == WT_Q6_K
#define QK 256
#define BLOCK_BYTES 210
#else
#error "unknown WTYPE"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint WM = 64;
layout(constant_id = 4) const uint WN = 32;
layout(constant_id = 5) const uint TM = 16;
layout(constant_id = 6) const uint TN = 16;
layout(constant_id = 7) const uint TK = 16;
layout(constant_id = 8) const uint SG = 32;
layout(constant_id = 9) const uint BK = 32;
layout(constant_id = 10) const uint NBUF = 2;

const uint SROW = (BK + 8) / 4;  // shared row stride in f16vec4 (padded against bank conflicts)
const uint WARPS_M = BM / WM;
const uint WARPS = WARPS_M * (BN / WN);
const uint WG = WARPS * SG;
const uint NI = WM / TM, NJ = WN / TN;
const uint CPR = BK / 16;  // W chunks per row and step
const uint XPR = BK / 4;   // X vec4s per row and step
const uint A_CHUNKS = BM * CPR, B_UNITS = BN * XPR;
const uint A_PER_T = (A_CHUNKS + WG - 1) / WG, B_PER_T = (B_UNITS + WG - 1) / WG;

layout(set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
layout(set = 0, binding = 0) readonly buffer W2 { uint16_t w2[]; };
layout(set = 0, binding = 0) readonly buffer W1 { uint w1[]; };
#if X_F16
layout(set = 0, binding = 1) readonly buffer XH4 { f16vec4 xh4[]; };
#else
layout(set = 0, binding = 1) readonly buffer X1 { float x1[]; };
layout(set = 0, binding = 1) readonly buffer X4 { vec4 x4[]; };
#endif
#if Y_F16
layout(set = 0, binding = 2) writeonly buffer YH { float16_t yh[]; };
layout(set = 0, binding = 2) writeonly buffer YH4 { f16vec4 yh4[]; };
#else
layout(set = 0, binding = 2) buffer Y { float y[]; };
layout(set = 0, binding = 2) buffer Y4 { vec4 y4[]; };
#endif
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Table { int table[]; };
#endif
#if GLU
layout(set = 0, binding = 4) readonly buffer U4 { uvec4 u4[]; };
layout(set = 0, binding = 4) readonly buffer U2 { uint16_t u2[]; };
layout(set = 0, binding = 4) readonly buffer U1 { uint u1[]; };
#endif

layout(push_constant) uniform Push {
  uint ncols, nrows, n_tokens, w_offset;
  uint x_offset, x_stride, y_offset, y_stride;
  uint accumulate, x_vec4;  // x_vec4: x_offset and x_stride are multiples of 4
  uint expert_stride, n_experts, gather_x;
  uint count_off, tile_expert_off, slot_token_off, y_pair_off;  // y_pair_off: moe_y_row.glsl
  uint k_split, split_stride;  // split-K: columns per workgroup z (0: all), floats between z's partial planes
  uint glu_act;                // GLU: the activation (glu.glsl)
  uint y_vec4;                 // y_offset, y_stride and split_stride are multiples of 4
} p;
#if INDEXED
#include "moe_y_row.glsl"
#endif

shared f16vec4 sa[NBUF * BM * SROW];
shared f16vec4 sb[NBUF * BN * SROW];
shared float sout[WARPS * TM * TN];

// Raw global data of one 16-element chunk, loaded a step ahead of its decode.
struct Raw {
  uvec4 a, b, c, d;
};

void put(inout f16vec4 v[4], vec4 f0, vec4 f1, vec4 f2, vec4 f3) {
  v[0] = f16vec4(f0);
  v[1] = f16vec4(f1);
  v[2] = f16vec4(f2);
  v[3] = f16vec4(f3);
}

// The 4 bytes b of a word as f16 values b * s + c, in packed f16 arithmetic
// without integer-to-float conversions: 0x6400 | b is the f16 1024 + b
// (b < 1024 sits in the mantissa), so one subtraction gives b exactly and one
// fused multiply-add rounds once.
f16vec4 bytes_fma(uint w, f16vec2 s, f16vec2 c) {
  const uint lo = (w & 0xFFu) | ((w << 8) & 0xFF0000u);         // b0, b1 in 16-bit lanes
  const uint hi = ((w >> 16) & 0xFFu) | ((w >> 8) & 0xFF0000u);  // b2, b3
  const f16vec2 k = f16vec2(1024.0);
  const f16vec2 a = unpackFloat2x16(lo | 0x64006400u) - k, b = unpackFloat2x16(hi | 0x64006400u) - k;
  return f16vec4(fma(a, s, c), fma(b, s, c));
}

#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
// 6-bit scale and min of sub-block j (0..7) from the 16-byte header h.
vec2 k_scale_min(uvec4 h, uint j) {
  const uint q = j & 3u, sh = 8 * q;
  uint sc, mn;
  if (j < 4) {
    sc = (h.y >> sh) & 0x3Fu;
    mn = (h.z >> sh) & 0x3Fu;
  } else {
    sc = ((h.w >> sh) & 0x0Fu) | (((h.y >> sh) >> 6) & 3u) << 4;
    mn = ((h.w >> (sh + 4)) & 0x0Fu) | (((h.z >> sh) >> 6) & 3u) << 4;
  }
  return vec2(sc, mn);
}
#endif

#define WB4 w4
#define WB2 w2
#define WB1 w1
#define LD32 ld32
#define LD128 ld128
#define LOAD_W load_w
#include "gemm_coopmat_load.glsl"
#if GLU
#undef WB4
#undef WB2
#undef WB1
#undef LD32
#undef LD128
#undef LOAD_W
#define WB4 u4
#define WB2 u2
#define WB1 u1
#define LD32 ld32_u
#define LD128 ld128_u
#define LOAD_W load_u
#include "gemm_coopmat_load.glsl"
#endif

// Decodes a chunk loaded by load_w into 16 f16 values.
void decode_w(Raw r, uint kc, out f16vec4 v[4]) {
  const uint k0 = kc & ~31u, half_ = (kc >> 4) & 1u;
#if !defined(FLOAT_W)
  if (kc >= p.ncols) {
    v[0] = v[1] = v[2] = v[3] = f16vec4(0);
    return;
  }
#endif
#if WTYPE == WT_F32
  const bool lo = kc < p.ncols, hi = kc + 8 < p.ncols;
  put(v, lo ? uintBitsToFloat(r.a) : vec4(0), lo ? uintBitsToFloat(r.b) : vec4(0),
      hi ? uintBitsToFloat(r.c) : vec4(0), hi ? uintBitsToFloat(r.d) : vec4(0));
#elif WTYPE == WT_F16
  const bool lo = kc < p.ncols, hi = kc + 8 < p.ncols;
  const uvec4 a = lo ? r.a : uvec4(0), b = hi ? r.b : uvec4(0);
  v[0] = f16vec4(unpackFloat2x16(a.x), unpackFloat2x16(a.y));
  v[1] = f16vec4(unpackFloat2x16(a.z), unpackFloat2x16(a.w));
  v[2] = f16vec4(unpackFloat2x16(b.x), unpackFloat2x16(b.y));
  v[3] = f16vec4(unpackFloat2x16(b.z), unpackFloat2x16(b.w));
#elif WTYPE == WT_BF16
  const bool lo = kc < p.ncols, hi = kc + 8 < p.ncols;
  const uvec4 a = lo ? r.a : uvec4(0), b = hi ? r.b : uvec4(0);
  [[unroll]] for (uint i = 0; i < 2; ++i) {
    const uvec4 s = i == 0 ? a : b;
    v[2 * i] = f16vec4(uintBitsToFloat(uvec4(s.x << 16, s.x & 0xFFFF0000u, s.y << 16, s.y & 0xFFFF0000u)));
    v[2 * i + 1] = f16vec4(uintBitsToFloat(uvec4(s.z << 16, s.z & 0xFFFF0000u, s.w << 16, s.w & 0xFFFF0000u)));
  }
#elif WTYPE == WT_Q8_0
  // Signed bytes q as q + 128 (the sign bit flipped): d * q = d * (q + 128) - 128 d, exactly.
  const f16vec2 d = f16vec2(unpackHalf2x16(r.b.x).x), offset = f16vec2(-128.0) * d;
  [[unroll]] for (uint t = 0; t < 4; ++t) v[t] = bytes_fma(r.a[t] ^ 0x80808080u, d, offset);
#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
  const uint sub = (k0 % 256) / 32, sh = 4 * (sub & 1u);
  const vec2 dm = unpackHalf2x16(r.a.x);
  const vec2 sm = k_scale_min(r.a, sub);
  // The scale and min products round to f16 before the multiply-add (one rounding more than f32 math).
  const f16vec2 scale = f16vec2(dm.x * sm.x), nbias = f16vec2(-(dm.y * sm.y));
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    uint q = (r.b[t] >> sh) & 0x0F0F0F0Fu;
#if WTYPE == WT_Q5_K
    q |= ((r.c[t] >> sub) & 0x01010101u) << 4;
#endif
    v[t] = bytes_fma(q, scale, nbias);
  }
#elif WTYPE == WT_Q6_K
  const uint e = k0 % 256, m = (e % 128) / 32;
  const float d = unpackHalf2x16(r.c.y).x;
  const uint sb = (r.c.x >> (8 * ((192 + 8 * (e / 128) + 2 * m + half_) & 1u))) & 0xFFu;
  const f16vec2 scale = f16vec2(d * float(int(sb << 24) >> 24));
  const f16vec2 offset = f16vec2(-32.0) * scale;  // exact: (q - 32) * scale rounds once
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    const uint q = ((r.a[t] >> (4 * (m >> 1))) & 0x0F0F0F0Fu) | (((r.b[t] >> (2 * m)) & 0x03030303u) << 4);
    v[t] = bytes_fma(q, scale, offset);
  }
#endif
}

// 4 activations of token row `row` (< 0: zeros) from column k (ncols is a
// multiple of 8).
XVEC load_x(int row, uint k) {
  if (row < 0 || k >= p.ncols) return XVEC(0);
  const uint base = p.x_offset + uint(row) * p.x_stride + k;
#if X_F16
  return xh4[base / 4];
#else
  if (p.x_vec4 != 0) return x4[base / 4];
  return vec4(x1[base], x1[base + 1], x1[base + 2], x1[base + 3]);
#endif
}

#define ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>
// One B fragment times the NI A fragments into one column of accumulators.
#define MMA_COLUMN(fb, x0, x1, x2, x3)                 \
  x0 = coopMatMulAdd(fa0, fb, x0);                     \
  if (NI > 1) x1 = coopMatMulAdd(fa1, fb, x1);         \
  if (NI > 2) x2 = coopMatMulAdd(fa2, fb, x2);         \
  if (NI > 3) x3 = coopMatMulAdd(fa3, fb, x3);

uint row0, col0;  // the workgroup's first weight row and token (or slot)

// A fragment of this subgroup, its rows from the workgroup's row rt on, its
// columns fragment j of the subgroup's: through shared memory, then per element
// with bounds checks.
void store_frag(ACC c, uint rt, uint j) {
  const uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID, wn = warp / WARPS_M;
  coopMatStore(c, sout, warp * TM * TN, TM, gl_CooperativeMatrixLayoutColumnMajor);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  // Four consecutive rows of one column a lane (column-major: 4 consecutive floats of sout).
  for (uint e = 4 * lane; e < TM * TN; e += 4 * SG) {
    const uint r = row0 + rt + e % TM, n = col0 + wn * WN + j * TN + e / TM;
#if INDEXED
    const int yr = moe_y_row(n);
    const bool col_ok = yr >= 0;
    const uint y_col = uint(yr);
#else
    const bool col_ok = n < p.n_tokens;
    const uint y_col = n;
#endif
    if (!col_ok || r >= p.nrows) continue;
    const uint yi = p.y_offset + gl_WorkGroupID.z * p.split_stride + y_col * p.y_stride + r, so = warp * TM * TN + e;
#if Y_F16  // GLU: no accumulation
    if (p.y_vec4 != 0 && r + 3 < p.nrows) {
      yh4[yi / 4] = f16vec4(sout[so], sout[so + 1], sout[so + 2], sout[so + 3]);
    } else {
      for (uint i = 0; i < 4 && r + i < p.nrows; ++i) yh[yi + i] = float16_t(sout[so + i]);
    }
#else
    if (p.y_vec4 != 0 && r + 3 < p.nrows) {
      const vec4 v = vec4(sout[so], sout[so + 1], sout[so + 2], sout[so + 3]);
      y4[yi / 4] = p.accumulate != 0 ? y4[yi / 4] + v : v;
    } else {
      for (uint i = 0; i < 4 && r + i < p.nrows; ++i)
        y[yi + i] = p.accumulate != 0 ? y[yi + i] + sout[so + i] : sout[so + i];
    }
#endif
  }
  subgroupBarrier();
}

#if GLU
#include "glu.glsl"
// The activation element by element (both fragments have one element layout).
ACC glu_frag(ACC g, ACC u) {
  ACC h = ACC(0.0);
  for (int k = 0; k < h.length(); ++k) h[k] = glu(g[k], u[k], p.glu_act);
  return h;
}
#endif

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint wm = warp % WARPS_M, wn = warp / WARPS_M;
  row0 = gl_WorkGroupID.x * (GLU != 0 ? BM / 2 : BM);  // GLU: features
  uint wbase = p.w_offset;
#if INDEXED
  const uint tile = gl_WorkGroupID.y;
  if (tile >= uint(table[p.count_off])) return;
  const int expert = table[p.tile_expert_off + tile];
  if (expert < 0 || uint(expert) >= p.n_experts) return;
  wbase += uint(expert) * p.expert_stride;
  col0 = tile * BN;  // first slot
#else
  col0 = gl_WorkGroupID.y * BN;  // first token
#endif
  const uint row_bytes = p.ncols / QK * BLOCK_BYTES;

  // Per-thread chunk assignments (fixed over the K loop).
  uint a_rb[A_PER_T];
#if GLU
  bool a_up[A_PER_T];  // the chunk is from the up weights
#endif
  int b_row[B_PER_T];
  [[unroll]] for (uint i = 0; i < A_PER_T; ++i) {
    const uint c = min(tid + i * WG, A_CHUNKS - 1), lr = c / CPR;
#if GLU
    // Fragment row f of the tile: gate (f even) or up (f odd) of features row0 + (f / 2) TM ...
    const uint f = lr / TM, r = row0 + (f >> 1) * TM + lr % TM;
    a_up[i] = (f & 1u) != 0;
#else
    const uint r = row0 + lr;
#endif
    a_rb[i] = wbase + min(r, p.nrows - 1) * row_bytes;  // tail rows repeat the last row
  }
  [[unroll]] for (uint i = 0; i < B_PER_T; ++i) {
    const uint n = min(tid + i * WG, B_UNITS - 1) / XPR;
#if INDEXED
    const int tok = table[p.slot_token_off + col0 + n];
    b_row[i] = tok < 0 ? -1 : (p.gather_x != 0 ? tok : int(col0 + n));
#else
    b_row[i] = col0 + n < p.n_tokens ? int(col0 + n) : -1;
#endif
  }

  // Accumulators as separate variables, not an array: NVIDIA's compiler keeps
  // arrays of more than two fragments in local memory. Unused ones (NI < 4,
  // NJ < 2) are removed at specialization.
  ACC c00 = ACC(0.0), c10 = ACC(0.0), c20 = ACC(0.0), c30 = ACC(0.0);
  ACC c01 = ACC(0.0), c11 = ACC(0.0), c21 = ACC(0.0), c31 = ACC(0.0);

  Raw ra[A_PER_T];
  XVEC rx[B_PER_T];
  const uint k_begin = gl_WorkGroupID.z * p.k_split;  // k_split: a multiple of BK
  const uint k_end = p.k_split == 0 ? p.ncols : min(p.ncols, k_begin + p.k_split);
  const uint steps = (k_end - k_begin + BK - 1) / BK;
  // Stores step k0's chunks (in ra/rx) into shared buffer `buf`.
#define STORE_STEP(k0, buf)                                                   \
  [[unroll]] for (uint i = 0; i < A_PER_T; ++i) {                             \
    const uint c = tid + i * WG, q = c % CPR;                                 \
    if (A_CHUNKS % WG == 0 || c < A_CHUNKS) {                                 \
      const uint o = (buf) * BM * SROW + (c / CPR) * SROW;                    \
      f16vec4 v[4];                                                           \
      decode_w(ra[i], (k0) + 16 * q, v);                                      \
      [[unroll]] for (uint t = 0; t < 4; ++t) sa[o + 4 * q + t] = v[t];       \
    }                                                                         \
  }                                                                           \
  [[unroll]] for (uint i = 0; i < B_PER_T; ++i) {                             \
    const uint u = tid + i * WG;                                              \
    if (B_UNITS % WG == 0 || u < B_UNITS)                                     \
      sb[(buf) * BN * SROW + (u / XPR) * SROW + u % XPR] = f16vec4(rx[i]);    \
  }
#if GLU
#define LOAD_A(i, kc) \
  if (a_up[i])        \
    ra[i] = load_u(a_rb[i], kc); \
  else                \
    ra[i] = load_w(a_rb[i], kc);
#else
#define LOAD_A(i, kc) ra[i] = load_w(a_rb[i], kc);
#endif
#define LOAD_STEP(k0)                                                                   \
  [[unroll]] for (uint i = 0; i < A_PER_T; ++i) {                                       \
    LOAD_A(i, (k0) + 16 * ((tid + i * WG) % CPR))                                       \
  }                                                                                     \
  [[unroll]] for (uint i = 0; i < B_PER_T; ++i)                                         \
    rx[i] = load_x(b_row[i], (k0) + 4 * ((tid + i * WG) % XPR));

  LOAD_STEP(k_begin)
  STORE_STEP(k_begin, 0)
  barrier();
  for (uint s = 0; s < steps; ++s) {
    const uint cur = s % NBUF;
    const bool more = s + 1 < steps;
    if (more) {
      LOAD_STEP(k_begin + (s + 1) * BK)
    }
    [[unroll]] for (uint kk = 0; kk < BK / TK; ++kk) {
      const uint a0 = cur * BM * SROW + (wm * WM) * SROW + kk * (TK / 4);
      const uint b0 = cur * BN * SROW + (wn * WN) * SROW + kk * (TK / 4);
      FRAG_A fa0, fa1, fa2, fa3;
      coopMatLoad(fa0, sa, a0, SROW, gl_CooperativeMatrixLayoutRowMajor);
      if (NI > 1) coopMatLoad(fa1, sa, a0 + TM * SROW, SROW, gl_CooperativeMatrixLayoutRowMajor);
      if (NI > 2) coopMatLoad(fa2, sa, a0 + 2 * TM * SROW, SROW, gl_CooperativeMatrixLayoutRowMajor);
      if (NI > 3) coopMatLoad(fa3, sa, a0 + 3 * TM * SROW, SROW, gl_CooperativeMatrixLayoutRowMajor);
      {
        FRAG_B fb;
        coopMatLoad(fb, sb, b0, SROW, gl_CooperativeMatrixLayoutColumnMajor);
        MMA_COLUMN(fb, c00, c10, c20, c30)
      }
      if (NJ > 1) {
        FRAG_B fb;
        coopMatLoad(fb, sb, b0 + TN * SROW, SROW, gl_CooperativeMatrixLayoutColumnMajor);
        MMA_COLUMN(fb, c01, c11, c21, c31)
      }
    }
    if (NBUF == 1) barrier();  // every subgroup done with the buffer
    if (more) {
      STORE_STEP(k_begin + (s + 1) * BK, (s + 1) % NBUF)
    }
    barrier();
  }

#if GLU
  // Fragments (0, 1) and (2, 3) of a column: gate and up of TM features each.
  const uint rt = wm * (NI / 2) * TM;
  store_frag(glu_frag(c00, c10), rt, 0);
  if (NI > 2) store_frag(glu_frag(c20, c30), rt + TM, 0);
  if (NJ > 1) {
    store_frag(glu_frag(c01, c11), rt, 1);
    if (NI > 2) store_frag(glu_frag(c21, c31), rt + TM, 1);
  }
#else
  const uint rt = wm * WM;
  store_frag(c00, rt, 0);
  if (NI > 1) store_frag(c10, rt + TM, 0);
  if (NI > 2) store_frag(c20, rt + 2 * TM, 0);
  if (NI > 3) store_frag(c30, rt + 3 * TM, 0);
  if (NJ > 1) {
    store_frag(c01, rt, 1);
    if (NI > 1) store_frag(c11, rt + TM, 1);
    if (NI > 2) store_frag(c21, rt + 2 * TM, 1);
    if (NI > 3) store_frag(c31, rt + 3 * TM, 1);
  }
#endif
}
