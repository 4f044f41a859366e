#version 450
// y[r] = (accumulate ? y[r] : 0) + W[r] . x   for ggml-layout weight rows.
// Compile-time: WTYPE (weight type, shaders/wtype.glsl), INDEXED (MoE expert variant),
// GLU (the input is act(x, u) of a second vector u: a SwiGLU fused into the
// product), TAIL_TOPK (non-indexed: the dispatch's last workgroup also routes
// the logits y, shaders/matvec_tail.glsl), NORM (with TAIL_TOPK: the input is
// the RMS norm of x times a weight vector; each row group sums x^2 as it reads
// x and scales its dot products once reduced, and the last workgroup also
// writes the normalized x for the products after it).
// Specialization: 0 = workgroup size, 1 = TPR lanes per row (power of 2),
// 2 = RPT rows per lane (1..8), 3 = subgroup reductions (1) or shared memory (0),
// 4 = software-pipelined weight loads (1) or not (0), 5 = GLU activation
// (0 SiLU, 1 gpt-oss's clamped SwiGLU; as shaders/swiglu.comp), 6 = GLU_SH
// (the GLU input staged in shared memory: ncols / 4, or 1 for not).
//
// A row is a sequence of "units": fixed slices of a block that one lane
// decodes at once (e.g. 32 quants of a Q4_K block). The TPR lanes of a row
// group walk the units of RPT consecutive rows together, so each x slice is
// loaded once and reused for RPT rows, then the lanes reduce their sums.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require

#include "wtype.glsl"

#ifndef INDEXED
#define INDEXED 0
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef TAIL_TOPK
#define TAIL_TOPK 0
#endif
#ifndef NORM
#define NORM 0
#endif
#if TAIL_TOPK && INDEXED
#error "the top-k tail is for single matrices"
#endif
#if NORM && !TAIL_TOPK
#error "the folded norm is the router's (with its top-k tail)"
#endif

#if WTYPE == WT_F32
#define QK 8
#define BLOCK_BYTES 32
#define UPB 1
#define NXV 2
#elif WTYPE == WT_F16 || WTYPE == WT_BF16
#define QK 8
#define BLOCK_BYTES 16
#define UPB 1
#define NXV 2
#elif WTYPE == WT_Q8_0
#define QK 32
#define BLOCK_BYTES 34
#define UPB 4
#define NXV 2
#define NEED_W16 1
#elif WTYPE == WT_Q4_0 || WTYPE == WT_Q4_1 || WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1 || WTYPE == WT_IQ4_NL
// 32-element blocks, 2-byte aligned; unit k = qs bytes [4k, 4k+4): elements
// 4k.. (low nibbles) and 16+4k.. (high nibbles).
#define QK 32
#define BLOCK_BYTES (WTYPE == WT_Q4_1 ? 20 : WTYPE == WT_Q5_0 ? 22 : WTYPE == WT_Q5_1 ? 24 : 18)
#define UPB 4
#define NXV 2
#define NEED_W16 1
#define Q32 1
#elif WTYPE == WT_MXFP4
// 17-byte blocks at any byte offset: e (E8M0) @0, qs @1. Unit k = qs bytes
// [4k, 4k+4) as in Q32 (elements 4k.. in low nibbles, 16+4k.. in high ones),
// read as aligned 32-bit words (binding 0 as uint[]) and shifted into place.
#define QK 32
#define BLOCK_BYTES 17
#define UPB 4
#define NXV 2
#define MX32 1
#elif WTYPE == WT_IQ4_XS
// 136-byte super-blocks, 4-byte aligned: d, scales_h @0, scales_l[4] @4,
// qs[128] @8. Unit k = sub-block k (elements [32k, 32k+32)), laid out like an
// IQ4_NL block: qs bytes [16k, 16k+16), low nibbles elements 32k.., high
// nibbles 32k+16..; read as 32-bit words (dequant.glsl's dq_ld32).
#define QK 256
#define BLOCK_BYTES 136
#define UPB 8
#define NXV 8
#define XS32 1
#elif defined(DQ)
// Q2_K, Q3_K: unit k = elements [16k, 16k + 16) of a block,
// decoded by dequant.glsl.
#define QK DQ_QK
#define BLOCK_BYTES DQ_BYTES
#define UPB (DQ_QK / 16)
#define NXV 4
#define CHUNK16 1
#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
#define QK 256
#define BLOCK_BYTES (WTYPE == WT_Q4_K ? 144 : 176)
#define UPB 8
#define NXV 8
#elif WTYPE == WT_Q6_K
#define QK 256
#define BLOCK_BYTES 210
#define UPB 8
#define NXV 8
#define NEED_W16 1
#else
#error "unknown WTYPE"
#endif

#ifdef NEED_W16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TPR = 32;
layout(constant_id = 2) const uint RPT = 2;
layout(constant_id = 3) const uint USE_SUBGROUP = 1;
layout(constant_id = 4) const uint PREFETCH = 1;

layout(set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
#ifdef MX32
layout(set = 0, binding = 0) readonly buffer W1 { uint w1[]; };
#endif
#ifdef NEED_W16
layout(set = 0, binding = 0) readonly buffer W2 { uint16_t w2[]; };
#endif
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
#if TAIL_TOPK
// The last workgroup reads rows other workgroups wrote.
layout(set = 0, binding = 2) coherent buffer Y { float y[]; };
#else
layout(set = 0, binding = 2) buffer Y { float y[]; };
#endif
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Ids { int ids[]; };
#endif
#if GLU
layout(set = 0, binding = 3 + INDEXED) readonly buffer U { vec4 u4[]; };
layout(constant_id = 5) const uint GLU_ACT = 0;
// > 1: act(x, u) of the whole row (GLU_SH = ncols / 4 vec4s) is formed once per
// workgroup into shared memory, instead of once per row group as it is read.
layout(constant_id = 6) const uint GLU_SH = 1;
#include "glu.glsl"
shared vec4 glu_sh[GLU_SH];
// (xb: the x base in scope where XV is used, load_x's argument)
#define XV(i) (GLU_SH > 1 ? glu_sh[(i) - xb] : glu(x4[i], u4[i], GLU_ACT))
#else
#define XV(i) x4[i]
#endif

layout(push_constant) uniform Push {
  uint ncols, nrows, w_offset, x_offset, y_offset, accumulate;
  uint row_blocks;
  uint expert_stride, n_experts, ids_offset, x_stride, y_stride;
  uint tail_out_offset, tail_counter;
  uint topk_k, topk_normalize, topk_gating, topk_has_bias, topk_n_group, topk_topk_group;
  float topk_scale;
  float norm_eps;
  uint norm_check;  // NORM: a non-finite sum of x^2 lowers first_bad to this (0: no check)
  uint norm_out_offset;  // NORM: first float of the normalized x (a multiple of 4)
} p;

#if NORM
// The norm weights (indexed from x's first value), the non-finite flag (as
// rms_norm.comp's) and the normalized x the last workgroup writes.
layout(set = 0, binding = 7) readonly buffer NW { vec4 norm_w4[]; };
layout(set = 0, binding = 8) buffer NF { uint first_bad; };
layout(set = 0, binding = 9) writeonly buffer XN { vec4 xn4[]; };
shared float tail_scale;
float x_ss = 0.0;   // this lane's sum of x^2 over the units it read
uint x_first4 = 0;  // x's first vec4
vec4 x_normed(uint i) {
  const vec4 v = x4[i];
  x_ss += dot(v, v);
  return v * norm_w4[i - x_first4];
}
#undef XV
#define XV(i) x_normed(i)
#endif

#include "dequant.glsl"

const uint MAX_WG = 256;
const uint MAX_RPT = 8;
const uint NR = RPT + NORM;  // reduced sums per row group: its rows' dots, then sum(x^2)
shared float red[MAX_WG * (MAX_RPT + 1)];
#if TAIL_TOPK
#include "matvec_tail.glsl"
#endif

// Integer decode without I2F: OR-ing a small integer q into the mantissa of
// 1.0f at bit 16 gives exactly 1 + q/128 (for q < 128). Dot products then use
// sum((1 + q/128) x) = sum(x) + sum(q x)/128, where sum(x) depends on x only
// and is shared by all rows; the cancellation costs at most ~7 bits of the
// 24 (error ~1e-6 relative), far inside the tolerance.
float qfloat(uint v, uint mask) { return uintBitsToFloat((v & mask) | 0x3F800000u); }

// sum_k (1 + byte_k(w)/128) * x[k] for a word of 4 small values (< 128, mask
// selecting the value's bits at bit 16).
float dot4q(uint w, uint mask, vec4 x, float acc) {
  acc = fma(qfloat(w << 16, mask), x.x, acc);
  acc = fma(qfloat(w << 8, mask), x.y, acc);
  acc = fma(qfloat(w, mask), x.z, acc);
  return fma(qfloat(w >> 8, mask), x.w, acc);
}

struct XData {
  vec4 v[NXV];
  vec4 s;  // per-type sums of x slices (shared by all rows)
};

#ifdef NEED_W16
uint ld32(uint i) { return uint(w2[i]) | (uint(w2[i + 1]) << 16); }
#endif

float hsum(vec4 a) { return (a.x + a.y) + (a.z + a.w); }

// x slice of unit k of block b; xb = x base in vec4 units.
XData load_x(uint xb, uint b, uint k) {
  XData d;
#if WTYPE == WT_F32 || WTYPE == WT_F16 || WTYPE == WT_BF16
  const uint e = b * 8;
  d.v[0] = XV(xb + e / 4);
  d.v[1] = XV(xb + e / 4 + 1);
#elif WTYPE == WT_Q8_0
  const uint v = xb + b * 8 + k * 2;
  d.v[0] = XV(v);
  d.v[1] = XV(v + 1);
  d.s.x = hsum(d.v[0] + d.v[1]);
#elif defined(Q32) || defined(MX32)
  d.v[0] = XV(xb + b * 8 + k);
  d.v[1] = XV(xb + b * 8 + 4 + k);
  d.s.x = hsum(d.v[0]);
  d.s.y = hsum(d.v[1]);
#elif defined(CHUNK16)
  const uint v = xb + b * (QK / 4) + k * 4;
  [[unroll]] for (uint i = 0; i < 4; ++i) d.v[i] = XV(v + i);
#elif defined(XS32)
  const uint v = xb + b * 64 + k * 8;
  [[unroll]] for (uint i = 0; i < 8; ++i) d.v[i] = XV(v + i);
#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
  // unit k: quants [16*(k&1), +16) of the 32-quant group j = k/2; low nibbles
  // are elements 64j + l, high nibbles 64j + 32 + l.
  const uint v = xb + b * 64 + (k >> 1) * 16 + (k & 1u) * 4;
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    d.v[i] = XV(v + i);
    d.v[4 + i] = XV(v + 8 + i);
  }
  d.s.x = hsum((d.v[0] + d.v[1]) + (d.v[2] + d.v[3]));
  d.s.y = hsum((d.v[4] + d.v[5]) + (d.v[6] + d.v[7]));
#elif WTYPE == WT_Q6_K
  // unit k: half n = k/4, positions l = 8*(k&3) .. +8 of its 32-wide quarters m.
  const uint v = xb + b * 64 + (k >> 2) * 32 + (k & 3u) * 2;
  [[unroll]] for (uint m = 0; m < 4; ++m) {
    d.v[2 * m] = XV(v + 8 * m);
    d.v[2 * m + 1] = XV(v + 8 * m + 1);
    d.s[m] = hsum(d.v[2 * m] + d.v[2 * m + 1]);
  }
#endif
  return d;
}

#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
// 6-bit scales and mins of sub-blocks 2j and 2j+1 from the 16-byte header h.
void k_scales(uvec4 h, uint j, out float sc0, out float sc1, out float m0, out float m1) {
  const uint sh = (j & 1u) * 16;
  uint sc_w, m_w;
  if (j < 2) {
    sc_w = (h.y >> sh) & 0x3F3Fu;
    m_w = (h.z >> sh) & 0x3F3Fu;
  } else {
    sc_w = ((h.w >> sh) & 0x0F0Fu) | ((h.y >> (sh + 2)) & 0x3030u);
    m_w = ((h.w >> (sh + 4)) & 0x0F0Fu) | ((h.z >> (sh + 2)) & 0x3030u);
  }
  sc0 = float(sc_w & 0xFFu);
  sc1 = float(sc_w >> 8);
  m0 = float(m_w & 0xFFu);
  m1 = float(m_w >> 8);
}
#endif

// Weight bytes of one unit of one row, loaded ahead of their use.
#ifdef CHUNK16
#define WData DqRaw
#else
struct WData {
  uvec4 a, b, c;
};
#endif

// Loads unit k of the block at byte bb.
WData load_w(uint bb, uint k) {
  WData w;
#if WTYPE == WT_F32
  w.a = w4[bb >> 4];
  w.b = w4[(bb >> 4) + 1];
#elif WTYPE == WT_F16 || WTYPE == WT_BF16
  w.a = w4[bb >> 4];
#elif WTYPE == WT_Q8_0
  const uint hw = bb >> 1;
  const uint i = hw + 1 + 4 * k;
  w.a.x = uint(w2[hw]);
  w.a.y = ld32(i);
  w.a.z = ld32(i + 2);
#elif defined(Q32)
  // w.a: x = d (f16, then m for Q4_1/Q5_1), y = qs word, z = qh word (Q5_x).
  // Offsets in u16: Q4_0/IQ4_NL qs @1; Q4_1 m @1, qs @2; Q5_0 qh @1, qs @3;
  // Q5_1 m @1, qh @2, qs @4.
  const uint hw = bb >> 1;
#if WTYPE == WT_Q4_1 || WTYPE == WT_Q5_1
  w.a.x = uint(w2[hw]) | (uint(w2[hw + 1]) << 16);
#else
  w.a.x = uint(w2[hw]);
#endif
#if WTYPE == WT_Q5_0
  w.a.z = ld32(hw + 1);
#elif WTYPE == WT_Q5_1
  w.a.z = ld32(hw + 2);
#endif
  const uint qs = WTYPE == WT_Q4_1 ? 2u : WTYPE == WT_Q5_0 ? 3u : WTYPE == WT_Q5_1 ? 4u : 1u;
  w.a.y = ld32(hw + qs + 2 * k);
#elif defined(MX32)
  // w.a: x = e, y = qs bytes [4k, 4k+4) from the (one or two) aligned words
  // holding them; the second word index is that of the last byte, so no word
  // past the weights' end is read (the matvec rounds the binding up to 4 bytes).
  const uint a = bb + 1 + 4 * k, sh = 8 * (a & 3u);
  const uint lo = w1[a >> 2], hi = w1[(a + 3) >> 2];
  w.a.y = (lo >> sh) | ((hi << 1) << (31 - sh));  // (hi << 1) << 31 = 0 when aligned
  w.a.x = bitfieldExtract(w1[bb >> 2], int(8 * (bb & 3u)), 8);
#elif defined(XS32)
  // w.a: x = d | scales_h << 16, y = scales_l; w.b = qs bytes [16k, 16k+16)
  const uint i = bb >> 2;
  w.a.x = dq_ld32(i);
  w.a.y = dq_ld32(i + 1);
  w.b = uvec4(dq_ld32(i + 2 + 4 * k), dq_ld32(i + 3 + 4 * k), dq_ld32(i + 4 + 4 * k), dq_ld32(i + 5 + 4 * k));
#elif defined(CHUNK16)
  w = dq_fetch(bb / DQ_UNIT, 16 * k);
#elif WTYPE == WT_Q4_K
  const uint i = bb >> 4;
  w.a = w4[i];          // d, dmin, scales
  w.b = w4[i + 1 + k];  // qs bytes [16k, 16k+16)
#elif WTYPE == WT_Q5_K
  // Block: d, dmin, scales[12] @0, qh[32] @16, qs[128] @48.
  const uint i = bb >> 4;
  w.a = w4[i];
  w.c = w4[i + 1 + (k & 1u)];  // qh bytes [16*(k&1), +16)
  w.b = w4[i + 3 + k];         // qs bytes [32j + 16*(k&1), +16), j = k/2
#elif WTYPE == WT_Q6_K
  // Block: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d (f16) @208.
  const uint hw = bb >> 1;
  const uint n = k >> 2, g = k & 3u;
  const uint ia = hw + 32 * n + 4 * g;       // ql[64n + 8g]
  const uint ib = ia + 16;                   // ql[64n + 32 + 8g]
  const uint ih = hw + 64 + 16 * n + 4 * g;  // qh[32n + 8g]
  w.a = uvec4(ld32(ia), ld32(ia + 2), ld32(ib), ld32(ib + 2));
  w.b.xy = uvec2(ld32(ih), ld32(ih + 2));
  // scales[8n + 2m + is] for m = 0..3: byte `is` of u16 words 96 + 4n + m
  const uint sw = hw + 96 + 4 * n;
  w.c = uvec4(uint(w2[sw]), uint(w2[sw + 1]), uint(w2[sw + 2]), uint(w2[sw + 3]));
  w.b.z = uint(w2[hw + 104]);
#endif
  return w;
}

// Dot of unit k (weights w) with its x slice.
float dot_w(WData w, uint k, XData xd) {
#if WTYPE == WT_F32
  return dot(uintBitsToFloat(w.a), xd.v[0]) + dot(uintBitsToFloat(w.b), xd.v[1]);
#elif WTYPE == WT_F16
  return dot(vec4(unpackHalf2x16(w.a.x), unpackHalf2x16(w.a.y)), xd.v[0]) +
         dot(vec4(unpackHalf2x16(w.a.z), unpackHalf2x16(w.a.w)), xd.v[1]);
#elif WTYPE == WT_BF16
  const vec4 a = uintBitsToFloat(uvec4(w.a.x << 16, w.a.x & 0xFFFF0000u, w.a.y << 16, w.a.y & 0xFFFF0000u));
  const vec4 c = uintBitsToFloat(uvec4(w.a.z << 16, w.a.z & 0xFFFF0000u, w.a.w << 16, w.a.w & 0xFFFF0000u));
  return dot(a, xd.v[0]) + dot(c, xd.v[1]);
#elif WTYPE == WT_Q8_0
  // int8 s -> u = s ^ 0x80 = s + 128 in [0, 256), placed at bits 15..22 of 1.0f:
  // f = 1 + u/256, so sum(s x) = 256 sum(f x) - 384 sum(x).
  const float d = unpackHalf2x16(w.a.x).x;
  const uint q0 = w.a.y ^ 0x80808080u, q1 = w.a.z ^ 0x80808080u;
  float a = 0.0;
  a = fma(qfloat(q0 << 15, 0x007F8000u), xd.v[0].x, a);
  a = fma(qfloat(q0 << 7, 0x007F8000u), xd.v[0].y, a);
  a = fma(qfloat(q0 >> 1, 0x007F8000u), xd.v[0].z, a);
  a = fma(qfloat(q0 >> 9, 0x007F8000u), xd.v[0].w, a);
  a = fma(qfloat(q1 << 15, 0x007F8000u), xd.v[1].x, a);
  a = fma(qfloat(q1 << 7, 0x007F8000u), xd.v[1].y, a);
  a = fma(qfloat(q1 >> 1, 0x007F8000u), xd.v[1].z, a);
  a = fma(qfloat(q1 >> 9, 0x007F8000u), xd.v[1].w, a);
  return d * (256.0 * a - 384.0 * xd.s.x);
#elif defined(Q32)
  const uint lo = w.a.y & 0x0F0F0F0Fu, hi = (w.a.y >> 4) & 0x0F0F0F0Fu;
#if WTYPE == WT_IQ4_NL
  const float d = unpackHalf2x16(w.a.x).x;
  float a = 0.0;
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    a = fma(DQ_KV_IQ4[(lo >> (8 * i)) & 15u], xd.v[0][i], a);
    a = fma(DQ_KV_IQ4[(hi >> (8 * i)) & 15u], xd.v[1][i], a);
  }
  return d * a;
#else
#if WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1
  // bit j of qh is bit 4 of element j: elements 4k+i and 16+4k+i.
  const uint hl = w.a.z >> (4 * k), hh = w.a.z >> (16 + 4 * k);
  const uint lo5 = lo | ((hl & 1u) << 4) | ((hl & 2u) << 11) | ((hl & 4u) << 18) | ((hl & 8u) << 25);
  const uint hi5 = hi | ((hh & 1u) << 4) | ((hh & 2u) << 11) | ((hh & 4u) << 18) | ((hh & 8u) << 25);
  const float alo = dot4q(lo5, 0x001F0000u, xd.v[0], 0.0), ahi = dot4q(hi5, 0x001F0000u, xd.v[1], 0.0);
#else
  const float alo = dot4q(lo, 0x000F0000u, xd.v[0], 0.0), ahi = dot4q(hi, 0x000F0000u, xd.v[1], 0.0);
#endif
  // sum(q x) = 128 (a - sum(x)); Q4_0/Q5_0 subtract 8/16 from q, Q4_1/Q5_1 add m.
  const vec2 dm = unpackHalf2x16(w.a.x);
  const float sq = 128.0 * ((alo - xd.s.x) + (ahi - xd.s.y)), sx = xd.s.x + xd.s.y;
#if WTYPE == WT_Q4_0
  return dm.x * (sq - 8.0 * sx);
#elif WTYPE == WT_Q5_0
  return dm.x * (sq - 16.0 * sx);
#else
  return dm.x * sq + dm.y * sx;
#endif
#endif
#elif defined(MX32)
  // A nibble s|c (sign, 3-bit e2m1 code c = 2e + m) placed as the f16 bits
  // s << 15 | c << 9 is (e2m1 value doubled) * 2^-15 exactly: exponent field e,
  // mantissa m/2 (e = 0: the f16 subnormal m * 2^-15). Two nibbles 16 bits
  // apart become the two halves of one unpackHalf2x16: nibbles at bits 0/16
  // are elements 4k/4k+2, 8/24 4k+1/4k+3, 4/20 and 12/28 the same of 16+4k.
  const uint q = w.a.y;
  float a = 0.0;
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    const uint t = q >> (4 * (i & 1u) + 8 * (i >> 1));  // i: 0 -> bits 0, 1 -> 4, 2 -> 8, 3 -> 12
    const vec2 f = unpackHalf2x16(((t & 0x00070007u) << 9) | ((t & 0x00080008u) << 12));
    const vec4 xv = xd.v[i & 1u];
    const uint j = i >> 1;  // element pair (j, j + 2) of the x slice
    a = fma(f.x, xv[j], a);
    a = fma(f.y, xv[j + 2], a);
  }
  // DQ_KV_MXFP4[q] * dq_e8m0_half(e) summed, with the 2^-15 undone first
  return (a * 32768.0) * dq_e8m0_half(w.a.x);
#elif defined(XS32)
  // 6-bit scale of sub-block k: low 4 bits at bit 4k of scales_l, high 2 at bit 2k of scales_h
  const int ls = int(bitfieldExtract(w.a.y, int(4 * k), 4) | (bitfieldExtract(w.a.x, int(16 + 2 * k), 2) << 4));
  float a = 0.0;
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    const uint q = w.b[t];
    [[unroll]] for (uint i = 0; i < 4; ++i) {
      a = fma(DQ_KV_IQ4[(q >> (8 * i)) & 15u], xd.v[t][i], a);
      a = fma(DQ_KV_IQ4[(q >> (8 * i + 4)) & 15u], xd.v[4 + t][i], a);
    }
  }
  return unpackHalf2x16(w.a.x).x * float(ls - 32) * a;
#elif defined(CHUNK16)
  float a = 0.0;
  [[unroll]] for (uint t = 0; t < 16; ++t) a = fma(dq_value(w, 16 * k, t), xd.v[t / 4][t % 4], a);
  return a;
#elif WTYPE == WT_Q4_K
  float sc0, sc1, m0, m1;
  k_scales(w.a, k >> 1, sc0, sc1, m0, m1);
  const vec2 dm = unpackHalf2x16(w.a.x);
  float alo = 0.0, ahi = 0.0;
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    alo = dot4q(w.b[t], 0x000F0000u, xd.v[t], alo);
    ahi = dot4q(w.b[t] >> 4, 0x000F0000u, xd.v[4 + t], ahi);
  }
  // sum(q x) = 128 (a - sum(x)) per sub-block
  return 128.0 * dm.x * (sc0 * (alo - xd.s.x) + sc1 * (ahi - xd.s.y)) - dm.y * (m0 * xd.s.x + m1 * xd.s.y);
#elif WTYPE == WT_Q5_K
  const uint j = k >> 1;
  float sc0, sc1, m0, m1;
  k_scales(w.a, j, sc0, sc1, m0, m1);
  const vec2 dm = unpackHalf2x16(w.a.x);
  float alo = 0.0, ahi = 0.0;
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    const uint hb = w.c[t] >> (2 * j);  // bit 0: low quant's 5th bit, bit 1: high quant's
    const uint lo = (w.b[t] & 0x0F0F0F0Fu) | ((hb << 4) & 0x10101010u);
    const uint hi = ((w.b[t] >> 4) & 0x0F0F0F0Fu) | ((hb << 3) & 0x10101010u);
    alo = dot4q(lo, 0x001F0000u, xd.v[t], alo);
    ahi = dot4q(hi, 0x001F0000u, xd.v[4 + t], ahi);
  }
  return 128.0 * dm.x * (sc0 * (alo - xd.s.x) + sc1 * (ahi - xd.s.y)) - dm.y * (m0 * xd.s.x + m1 * xd.s.y);
#elif WTYPE == WT_Q6_K
  const uint is = (k & 3u) >> 1;
  float s[4];
  [[unroll]] for (uint m = 0; m < 4; ++m) s[m] = 0.0;
  [[unroll]] for (uint t = 0; t < 2; ++t) {
    const uint A = w.a[t], B = w.a[2 + t], H = w.b[t];
    const uint q1 = (A & 0x0F0F0F0Fu) | ((H << 4) & 0x30303030u);
    const uint q2 = (B & 0x0F0F0F0Fu) | ((H << 2) & 0x30303030u);
    const uint q3 = ((A >> 4) & 0x0F0F0F0Fu) | (H & 0x30303030u);
    const uint q4 = ((B >> 4) & 0x0F0F0F0Fu) | ((H >> 2) & 0x30303030u);
    s[0] = dot4q(q1, 0x003F0000u, xd.v[t], s[0]);
    s[1] = dot4q(q2, 0x003F0000u, xd.v[2 + t], s[1]);
    s[2] = dot4q(q3, 0x003F0000u, xd.v[4 + t], s[2]);
    s[3] = dot4q(q4, 0x003F0000u, xd.v[6 + t], s[3]);
  }
  // (q - 32) x summed = 128 (s - sum(x)) - 32 sum(x) = 128 s - 160 sum(x)
  float acc = 0.0;
  [[unroll]] for (uint m = 0; m < 4; ++m) {
    const int sc = bitfieldExtract(int(w.c[m]), int(8 * is), 8);
    acc += float(sc) * (128.0 * s[m] - 160.0 * xd.s[m]);
  }
  return unpackHalf2x16(w.b.z).x * acc;
#endif
}

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
  // Linear thread index in subgroup order, so a row group never straddles subgroups.
  const uint tid = USE_SUBGROUP != 0 ? gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID
                                     : gl_LocalInvocationID.x;
  const uint lane = tid % TPR;
  const uint grp = tid / TPR;
  const uint row0 = wg * rows_per_wg + grp * RPT;
  const uint nb = p.ncols / QK;
  const uint units = nb * UPB;
  const uint row_bytes = nb * BLOCK_BYTES;
  const uint xb = xbase / 4;
#if NORM
  x_first4 = xb;
#endif
#if GLU
  if (GLU_SH > 1) {
    for (uint i = gl_LocalInvocationID.x; i < GLU_SH; i += WG) glu_sh[i] = glu(x4[xb + i], u4[xb + i], GLU_ACT);
    barrier();
  }
#endif

  uint rowb[MAX_RPT];
  float acc[MAX_RPT + 1];
  [[unroll]] for (uint r = 0; r < MAX_RPT; ++r) {
    rowb[r] = wbase + min(row0 + r, p.nrows - 1) * row_bytes;  // clamped: tail rows recompute the last row
    acc[r] = 0.0;
  }
  acc[MAX_RPT] = 0.0;
  // Software-pipelined: the next unit's weights and x are loaded before the
  // current unit is computed, keeping DRAM requests in flight.
  if (PREFETCH == 0) {
    for (uint u = lane; u < units; u += TPR) {
      const uint b = u / UPB, k = u % UPB;
      const XData xd = load_x(xb, b, k);
      [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
        if (r < RPT) acc[r] += dot_w(load_w(rowb[r] + b * BLOCK_BYTES, k), k, xd);
    }
  }
  uint u = PREFETCH != 0 ? lane : units;
  WData w[MAX_RPT];
  XData xd;
  if (u < units) {
    xd = load_x(xb, u / UPB, u % UPB);
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) w[r] = load_w(rowb[r] + (u / UPB) * BLOCK_BYTES, u % UPB);
  }
  while (u < units) {
    const uint k = u % UPB;
    const uint un = u + TPR;
    WData wn[MAX_RPT];
    XData xn;
    if (un < units) {
      xn = load_x(xb, un / UPB, un % UPB);
      [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
        if (r < RPT) wn[r] = load_w(rowb[r] + (un / UPB) * BLOCK_BYTES, un % UPB);
    }
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) acc[r] += dot_w(w[r], k, xd);
    w = wn;
    xd = xn;
    u = un;
  }
#if NORM
  [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
    if (r == RPT) acc[r] = x_ss;
#endif

  // Reduce over the TPR lanes of each row group; lane 0 ends with the sums.
  if (USE_SUBGROUP != 0 && TPR <= gl_SubgroupSize) {
    if (TPR == gl_SubgroupSize) {
      [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
        if (r < NR) acc[r] = subgroupAdd(acc[r]);
    } else {
      for (uint o = TPR / 2; o > 0; o >>= 1) {
        [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
          if (r < NR) acc[r] += subgroupShuffleXor(acc[r], o);
      }
    }
  } else if (USE_SUBGROUP != 0) {
    // TPR spans several subgroups: reduce each, then combine their partials.
    const uint parts = TPR / gl_SubgroupSize;
    [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
      if (r < NR) {
        acc[r] = subgroupAdd(acc[r]);
        if (gl_SubgroupInvocationID == 0) red[(grp * NR + r) * parts + lane / gl_SubgroupSize] = acc[r];
      }
    barrier();
    if (lane == 0) {
      [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
        if (r < NR) {
          float sum = 0.0;
          for (uint i = 0; i < parts; ++i) sum += red[(grp * NR + r) * parts + i];
          acc[r] = sum;
        }
    }
  } else {
    [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
      if (r < NR) red[r * WG + tid] = acc[r];
    barrier();
    for (uint s = TPR / 2; s > 0; s >>= 1) {
      if (lane < s) {
        [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
          if (r < NR) red[r * WG + tid] += red[r * WG + tid + s];
      }
      barrier();
    }
    [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
      if (r < NR) acc[r] = red[r * WG + tid];
  }

  float scale = 1.0;  // lane 0: x's norm scale (NORM)
#if NORM
  float ss = 0.0;
  [[unroll]] for (uint r = 0; r <= MAX_RPT; ++r)
    if (r == RPT) ss = acc[r];
  scale = inversesqrt(ss / float(p.ncols) + p.norm_eps);
  if (tid == 0 && p.norm_check != 0 && wg == 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.norm_check);
#endif
  if (lane == 0) {
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r) {
      const uint row = row0 + r;
      if (r < RPT && row < p.nrows) {
        const uint yi = ybase + row;
        y[yi] = p.accumulate != 0 ? y[yi] + scale * acc[r] : scale * acc[r];
      }
    }
  }
#if TAIL_TOPK
  if (last_workgroup()) {
#if NORM
    // x's scale is the same in every row group: the last workgroup's lane 0
    // of row group 0 has it; the workgroup writes the normalized x.
    if (tid == 0) tail_scale = scale;
    barrier();
    for (uint i = gl_LocalInvocationID.x; i < p.ncols / 4; i += WG)
      xn4[p.norm_out_offset / 4 + i] = x4[xb + i] * tail_scale * norm_w4[i];
#endif
    route_topk(ybase);
  }
#endif
}
