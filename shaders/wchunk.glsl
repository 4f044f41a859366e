// 16-element chunks of a weight row of any type (WTYPE, wtype.glsl), shared
// by gemm.comp and head_matmul.comp: fetch_w(rb, e0) loads the raw bytes of
// elements [e0, e0 + 16) of the row at load unit rb, dequant(r, e0, t) is
// element e0 + t. QK: elements per block; BU: load units per block (uvec4, or
// uint16 for W16 types). Declares binding 0 (the weights); include it right
// after wtype.glsl (it may enable extensions).
#if WTYPE == WT_F32
#define QK 4
#define BU 1
#elif WTYPE == WT_F16 || WTYPE == WT_BF16
#define QK 8
#define BU 1
#elif WTYPE == WT_Q8_0
#define QK 32
#define BU 17
#define W16 1
#elif WTYPE == WT_Q4_K
#define QK 256
#define BU 9
#elif WTYPE == WT_Q5_K
#define QK 256
#define BU 11
#elif WTYPE == WT_Q6_K
#define QK 256
#define BU 105
#define W16 1
#elif defined(DQ)
// Decoded by dequant.glsl; load units of DQ_UNIT bytes.
#define QK DQ_QK
#define BU (DQ_BYTES / DQ_UNIT)
#else
#error "unknown WTYPE"
#endif

#ifdef W16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

#ifdef W16
layout(set = 0, binding = 0) readonly buffer W2 { uint16_t w2[]; };
#else
layout(set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
#endif

#include "dequant.glsl"

// Raw weight bytes of one 16-element chunk of a row.
#ifdef DQ
#define Raw DqRaw
#else
struct Raw {
  uvec4 a, b, c, d;
};
#endif

#ifdef W16
uint ld32(uint i) { return uint(w2[i]) | (uint(w2[i + 1]) << 16); }
uvec4 ld128(uint i) { return uvec4(ld32(i), ld32(i + 2), ld32(i + 4), ld32(i + 6)); }
#endif

// Loads the chunk of elements [e0, e0 + 16) of the row at load unit rb.
Raw fetch_w(uint rb, uint e0) {
  Raw r;
#if WTYPE == WT_F32
  const uint i = rb + e0 / 4;
  r.a = w4[i];
  r.b = w4[i + 1];
  r.c = w4[i + 2];
  r.d = w4[i + 3];
#elif WTYPE == WT_F16 || WTYPE == WT_BF16
  const uint i = rb + e0 / 8;
  r.a = w4[i];
  r.b = w4[i + 1];
#elif WTYPE == WT_Q8_0
  // Block: d (f16), qs[32]; the chunk is qs[16h, 16h + 16).
  const uint base = rb + (e0 / 32) * BU;
  r.a.x = uint(w2[base]);
  r.b = ld128(base + 1 + 8 * ((e0 / 16) & 1u));
#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
  // Elements 64j + l / 64j + 32 + l are the low / high nibbles of qs[32j + l].
  const uint base = rb + (e0 / 256) * BU, w = e0 % 256, half16 = (w / 16) & 1u;
  r.a = w4[base];  // d, dmin, scales[12]
#if WTYPE == WT_Q4_K
  r.b = w4[base + 1 + 2 * (w / 64) + half16];
#else
  r.c = w4[base + 1 + half16];                 // qh[16 * half16, +16)
  r.b = w4[base + 3 + 2 * (w / 64) + half16];  // qs @48
#endif
#elif WTYPE == WT_Q6_K
  // Block: ql[128] @0, qh[64] @128, scales[16] @192, d @208. Element
  // 128n + 32m + l: low bits in ql[64n + 32(m&1) + l] (nibble m>>1), high bits
  // in qh[32n + l] (bits 2m), scale scales[8n + l/16 + 2m].
  const uint base = rb + (e0 / 256) * BU, w = e0 % 256;
  const uint n = w / 128, m = (w / 32) & 3u, l0 = w % 32;
  r.a = ld128(base + 32 * n + 16 * (m & 1u) + l0 / 2);
  r.b = ld128(base + 64 + 16 * n + l0 / 2);
  r.c.x = uint(w2[base + 96 + 4 * n + m]);
  r.c.y = uint(w2[base + 104]);
#elif defined(DQ)
  r = dq_fetch(rb + (e0 / QK) * BU, e0 % QK);
#endif
  return r;
}

#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
uint hbyte(uvec4 h, uint i) { return bitfieldExtract(word_of(h, 1 + i / 4), int(8 * (i % 4)), 8); }
// Scale and min of sub-block j (ggml's get_scale_min_k4), times d and dmin.
vec2 k_scale_min(uvec4 h, uint j) {
  uint sc, mn;
  if (j < 4) {
    sc = hbyte(h, j) & 63u;
    mn = hbyte(h, j + 4) & 63u;
  } else {
    sc = (hbyte(h, j + 4) & 0xFu) | ((hbyte(h, j - 4) >> 6) << 4);
    mn = (hbyte(h, j + 4) >> 4) | ((hbyte(h, j) >> 6) << 4);
  }
  const vec2 dm = unpackHalf2x16(h.x);
  return vec2(dm.x * float(sc), dm.y * float(mn));
}
#endif

// Byte i (0..15) of a uvec4.
uint byte16(uvec4 v, uint i) { return bitfieldExtract(word_of(v, i / 4), int(8 * (i % 4)), 8); }

// Element t (0..15) of the chunk starting at row element e0.
float dequant(Raw r, uint e0, uint t) {
#if WTYPE == WT_F32
  const uvec4 v = t < 4 ? r.a : t < 8 ? r.b : t < 12 ? r.c : r.d;
  return uintBitsToFloat(word_of(v, t % 4));
#elif WTYPE == WT_F16
  const uint v = word_of(t < 8 ? r.a : r.b, (t % 8) / 2);
  return unpackHalf2x16(v)[t % 2];
#elif WTYPE == WT_BF16
  const uint v = word_of(t < 8 ? r.a : r.b, (t % 8) / 2);
  return uintBitsToFloat((t % 2) == 0 ? v << 16 : v & 0xFFFF0000u);
#elif WTYPE == WT_Q8_0
  return unpackHalf2x16(r.a.x).x * float(bitfieldExtract(int(word_of(r.b, t / 4)), int(8 * (t % 4)), 8));
#elif WTYPE == WT_Q4_K
  const uint w = e0 % 256;
  const vec2 sm = k_scale_min(r.a, w / 32);
  const uint q = (byte16(r.b, t) >> (4 * ((w / 32) & 1u))) & 0xFu;
  return sm.x * float(q) - sm.y;
#elif WTYPE == WT_Q5_K
  const uint w = e0 % 256, j = w / 32;
  const vec2 sm = k_scale_min(r.a, j);
  const uint q = ((byte16(r.b, t) >> (4 * (j & 1u))) & 0xFu) | (((byte16(r.c, t) >> j) & 1u) << 4);
  return sm.x * float(q) - sm.y;
#elif WTYPE == WT_Q6_K
  const uint w = e0 % 256, m = (w / 32) & 3u;
  const uint q = ((byte16(r.a, t) >> (4 * (m >> 1))) & 0xFu) | (((byte16(r.b, t) >> (2 * m)) & 3u) << 4);
  const float sc = float(bitfieldExtract(int(r.c.x), int(8 * ((w % 32) / 16)), 8));
  return unpackHalf2x16(r.c.y).x * sc * float(int(q) - 32);
#elif defined(DQ)
  return dq_value(r, e0 % QK, t);
#endif
}
