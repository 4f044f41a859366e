// Decoders of the types wtype.glsl marks DQ, shared by matvec.comp, gemm.comp
// and the cooperative-matrix GEMMs. dq_fetch loads the raw bytes of the chunk
// of elements [e, e + 16) of a block (e a multiple of 16) so that loads can be
// issued ahead of their use; dq_value(r, e, t) is element e + t. dq_at(b, e)
// decodes one element straight from the block.
// Blocks come by default from binding 0 in units of DQ_UNIT bytes, a block
// named by its first unit; a shader may instead define DQ_BLK (the block
// handle's type) and DQ_AT(b, u) (unit u of block b) before including this.
// Layouts as in cpu/quant.h (ggml's blocks).
#ifdef DQ

#ifndef DQ_BLK
#if DQ_UNIT == 1
layout(set = 0, binding = 0) readonly buffer DqW { uint8_t dqw[]; };
#elif DQ_UNIT == 2
layout(set = 0, binding = 0) readonly buffer DqW { uint16_t dqw[]; };
#else
layout(set = 0, binding = 0) readonly buffer DqW { uint dqw[]; };
#endif
#define DQ_BLK uint
#define DQ_AT(b, u) dqw[(b) + (u)]
#endif

// Little-endian loads at byte offset `o` of a block (o a multiple of the
// load's width or of DQ_UNIT, whichever is smaller).
#if DQ_UNIT == 1
uint dq_ld8(DQ_BLK b, uint o) { return uint(DQ_AT(b, o)); }
uint dq_ld16(DQ_BLK b, uint o) { return dq_ld8(b, o) | (dq_ld8(b, o + 1) << 8); }
uint dq_word(DQ_BLK b, uint o) { return dq_ld16(b, o) | (dq_ld16(b, o + 2) << 16); }
#elif DQ_UNIT == 2
uint dq_ld16(DQ_BLK b, uint o) { return uint(DQ_AT(b, o / 2)); }
uint dq_ld8(DQ_BLK b, uint o) { return bitfieldExtract(dq_ld16(b, o & ~1u), int(8 * (o & 1u)), 8); }
uint dq_word(DQ_BLK b, uint o) { return dq_ld16(b, o) | (dq_ld16(b, o + 2) << 16); }
#else
uint dq_word(DQ_BLK b, uint o) { return uint(DQ_AT(b, o / 4)); }
uint dq_ld8(DQ_BLK b, uint o) { return bitfieldExtract(dq_word(b, o & ~3u), int(8 * (o & 3u)), 8); }
#endif
uvec4 dq_ld128(DQ_BLK b, uint o) { return uvec4(dq_word(b, o), dq_word(b, o + 4), dq_word(b, o + 8), dq_word(b, o + 12)); }
uint dq_byte(uvec4 v, uint i) { return bitfieldExtract(v[i / 4], int(8 * (i % 4)), 8); }

#if WTYPE == WT_IQ4_NL || WTYPE == WT_IQ4_XS
const float DQ_KV_IQ4[16] = float[16](-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0,
                                      38.0, 53.0, 69.0, 89.0, 113.0);
#elif WTYPE == WT_MXFP4
// e2m1 values doubled, with the E8M0 scale halved (ggml's convention).
const float DQ_KV_MXFP4[16] = float[16](0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0,
                                        -8.0, -12.0);
// 2^(e - 128) as ggml_e8m0_to_fp32_half (subnormal bit patterns for e < 2).
float dq_e8m0_half(uint e) { return uintBitsToFloat(e < 2u ? (0x00200000u << e) : ((e - 1u) << 23)); }
#endif

// Byte offset in the block of the quant byte holding element e. 4-bit types:
// element j of a 32-group is the low nibble of byte j % 16, high for j >= 16.
// Q2_K/Q3_K: 2 bits at 2j of qs[32 (e / 128) + e % 32], j = (e % 128) / 32.
uint dq_qoff(uint e) {
#if WTYPE == WT_Q4_0 || WTYPE == WT_IQ4_NL
  return 2 + e % 16;  // d @0, qs @2
#elif WTYPE == WT_Q4_1
  return 4 + e % 16;  // d, m @0
#elif WTYPE == WT_Q5_0
  return 6 + e % 16;  // d @0, qh @2 (bit j: bit 4 of element j)
#elif WTYPE == WT_Q5_1
  return 8 + e % 16;  // d, m @0, qh @4
#elif WTYPE == WT_MXFP4
  return 1 + e % 16;  // e @0
#elif WTYPE == WT_Q2_K
  return 16 + e / 128 * 32 + e % 32;  // scales[16] @0, qs @16, d, dmin @80
#elif WTYPE == WT_Q3_K
  return 32 + e / 128 * 32 + e % 32;  // hmask[32] @0, qs @32, scales[12] @96, d @108
#else
  return 8 + 16 * (e / 32) + e % 16;  // IQ4_XS: d, scales_h @0, scales_l[4] @4, qs @8
#endif
}

// Scale data of element e's group (the same for a 16-element chunk).
uvec2 dq_scales(DQ_BLK b, uint e) {
#if WTYPE == WT_Q4_0 || WTYPE == WT_IQ4_NL || WTYPE == WT_Q5_0
  return uvec2(dq_ld16(b, 0), WTYPE == WT_Q5_0 ? dq_word(b, 2) : 0u);
#elif WTYPE == WT_Q4_1 || WTYPE == WT_Q5_1
  return uvec2(dq_word(b, 0), WTYPE == WT_Q5_1 ? dq_word(b, 4) : 0u);
#elif WTYPE == WT_MXFP4
  return uvec2(dq_ld8(b, 0), 0u);
#elif WTYPE == WT_Q2_K
  return uvec2(dq_word(b, 80), dq_ld8(b, e / 16));
#elif WTYPE == WT_Q3_K
  const uint is = e / 16;
  const uint lo = dq_ld8(b, 96 + is % 8), hi = dq_ld8(b, 104 + is % 4);
  const uint sc = bitfieldExtract(lo, int(4 * (is / 8)), 4) | (bitfieldExtract(hi, int(2 * (is / 4)), 2) << 4);
  return uvec2(uint(int(sc) - 32), dq_ld16(b, 108));
#else
  const uint ib = e / 32, h = dq_word(b, 0);
  return uvec2(h, bitfieldExtract(dq_word(b, 4), int(4 * ib), 4) | (bitfieldExtract(h, int(16 + 2 * ib), 2) << 4));
#endif
}

// Element e from its quant byte q8 (and Q3_K's hmask byte h8) and its group's scales s.
float dq_elem(uint q8, uint h8, uvec2 s, uint e) {
#if WTYPE == WT_Q2_K || WTYPE == WT_Q3_K
  const uint q = (q8 >> (2 * ((e / 32) % 4))) & 3u;
#if WTYPE == WT_Q2_K
  const vec2 dm = unpackHalf2x16(s.x);
  return dm.x * float(s.y & 0xFu) * float(q) - dm.y * float(s.y >> 4);
#else
  const uint hbit = (h8 >> (e / 32)) & 1u;
  return unpackHalf2x16(s.y).x * float(int(s.x)) * float(int(q) - int(4u - 4u * hbit));
#endif
#else
  uint q = (q8 >> (4 * ((e / 16) & 1u))) & 0xFu;
  const vec2 dm = unpackHalf2x16(s.x);
#if WTYPE == WT_Q4_0
  return dm.x * float(int(q) - 8);
#elif WTYPE == WT_Q4_1
  return dm.x * float(q) + dm.y;
#elif WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1
  q |= ((s.y >> e) & 1u) << 4;
#if WTYPE == WT_Q5_0
  return dm.x * float(int(q) - 16);
#else
  return dm.x * float(q) + dm.y;
#endif
#elif WTYPE == WT_IQ4_NL
  return dm.x * DQ_KV_IQ4[q];
#elif WTYPE == WT_MXFP4
  return DQ_KV_MXFP4[q] * dq_e8m0_half(s.x);
#else
  return dm.x * float(int(s.y) - 32) * DQ_KV_IQ4[q];
#endif
#endif
}

// q: 16 quant bytes; h: Q3_K's hmask bytes; s: dq_scales.
struct DqRaw {
  uvec4 q, h;
  uvec2 s;
};

DqRaw dq_fetch(DQ_BLK b, uint e) {
  DqRaw r;
  r.q = dq_ld128(b, dq_qoff(e));
#if WTYPE == WT_Q3_K
  r.h = dq_ld128(b, e % 32);  // bit i / 32 of hmask[i % 32]
#else
  r.h = uvec4(0);
#endif
  r.s = dq_scales(b, e);
  return r;
}

float dq_value(DqRaw r, uint e, uint t) { return dq_elem(dq_byte(r.q, t), dq_byte(r.h, t), r.s, e + t); }

float dq_at(DQ_BLK b, uint e) {
#if WTYPE == WT_Q3_K
  const uint h8 = dq_ld8(b, e % 32);
#else
  const uint h8 = 0u;
#endif
  return dq_elem(dq_ld8(b, dq_qoff(e)), h8, dq_scales(b, e), e);
}

#endif
