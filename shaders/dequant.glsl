// Decoders of 16-element chunks of a weight row for the types wtype.glsl
// marks DQ, shared by matvec.comp and gemm.comp. dq_fetch loads the raw bytes
// of the chunk of elements [e, e + 16) of the block at unit blk (units of
// DQ_UNIT bytes into binding 0; e a multiple of 16) so that loads can be
// issued ahead of their use; dq_value(r, e, t) is element e + t.
// Layouts as in cpu/quant.h (ggml's blocks).

// Word k of a uvec4 by selects: a vector indexed by a value the compiler does
// not know is kept in local memory on NVIDIA, and a pipeline using local memory
// makes the driver reserve it for every thread the GPU can hold (get_rows_q4_k:
// 384 bytes a thread, ~94 MiB of VRAM on an H200; PERF.md run 34).
uint word_of(uvec4 v, uint k) { return k == 0u ? v.x : k == 1u ? v.y : k == 2u ? v.z : v.w; }

#ifdef DQ

#if DQ_UNIT == 1
layout(set = 0, binding = 0) readonly buffer DqW { uint8_t dqw[]; };
uint dq_ld8(uint u) { return uint(dqw[u]); }
uint dq_ld32(uint u) {
  return uint(dqw[u]) | (uint(dqw[u + 1]) << 8) | (uint(dqw[u + 2]) << 16) | (uint(dqw[u + 3]) << 24);
}
#elif DQ_UNIT == 2
layout(set = 0, binding = 0) readonly buffer DqW { uint16_t dqw[]; };
uint dq_ld16(uint u) { return uint(dqw[u]); }
uint dq_ld32(uint u) { return uint(dqw[u]) | (uint(dqw[u + 1]) << 16); }
#else
layout(set = 0, binding = 0) readonly buffer DqW { uint dqw[]; };
uint dq_ld32(uint u) { return dqw[u]; }
#endif

// 32 bits at byte offset `byte` (a multiple of DQ_UNIT) of the block at blk.
uint dq_word(uint blk, uint byte) { return dq_ld32(blk + byte / DQ_UNIT); }
uvec4 dq_ld128(uint blk, uint byte) {
  const uint u = blk + byte / DQ_UNIT, s = 4 / DQ_UNIT;
  return uvec4(dq_ld32(u), dq_ld32(u + s), dq_ld32(u + 2 * s), dq_ld32(u + 3 * s));
}
uint dq_byte(uvec4 v, uint i) { return bitfieldExtract(word_of(v, i / 4), int(8 * (i % 4)), 8); }

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

// q: 16 quant bytes; h: Q3_K's hmask bytes; s: block scales (decoded per
// chunk where a chunk has its own).
struct DqRaw {
  uvec4 q, h, s;
};

DqRaw dq_fetch(uint blk, uint e) {
  DqRaw r;
#if WTYPE == WT_Q4_0 || WTYPE == WT_IQ4_NL
  // d @0, qs @2: element j < 16 low nibble of qs[j], else high nibble of qs[j - 16].
  r.s.x = dq_ld16(blk);
  r.q = dq_ld128(blk, 2);
#elif WTYPE == WT_Q4_1
  r.s.x = dq_word(blk, 0);  // d, m
  r.q = dq_ld128(blk, 4);
#elif WTYPE == WT_Q5_0
  r.s.x = dq_ld16(blk);
  r.s.y = dq_word(blk, 2);  // qh: bit j is bit 4 of element j
  r.q = dq_ld128(blk, 6);
#elif WTYPE == WT_Q5_1
  r.s.x = dq_word(blk, 0);
  r.s.y = dq_word(blk, 4);
  r.q = dq_ld128(blk, 8);
#elif WTYPE == WT_MXFP4
  r.s.x = dq_ld8(blk);  // e
  r.q = dq_ld128(blk, 1);
#elif WTYPE == WT_Q2_K || WTYPE == WT_Q3_K
  // Element i: 2 bits at 2j of qs[32 (i / 128) + i % 32], j = (i % 128) / 32;
  // the chunk is group i / 16 with its own scale.
  const uint is = e / 16, qs = e / 128 * 32 + e % 32;
#if WTYPE == WT_Q2_K
  // scales[16] @0, qs @16, d, dmin @80
  r.q = dq_ld128(blk, 16 + qs);
  r.s.x = dq_word(blk, 80);
  r.s.y = bitfieldExtract(dq_word(blk, is & ~3u), int(8 * (is & 3u)), 8);
#else
  // hmask[32] @0 (bit i / 32 of hmask[i % 32]), qs @32, scales[12] @96, d @108
  r.q = dq_ld128(blk, 32 + qs);
  r.h = dq_ld128(blk, e % 32);
  const uint lo = dq_ld16(blk + (96 + is % 8) / 2) >> (8 * (is & 1u));
  const uint hi = dq_ld16(blk + (104 + is % 4) / 2) >> (8 * (is & 1u));
  const uint sc = bitfieldExtract(lo, int(4 * (is / 8)), 4) | (bitfieldExtract(hi, int(2 * (is / 4)), 2) << 4);
  r.s.x = uint(int(sc) - 32);
  r.s.y = dq_ld16(blk + 54);
#endif
#elif WTYPE == WT_IQ4_XS
  // d, scales_h @0, scales_l[4] @4, qs @8 (IQ4_NL-like groups of 32).
  const uint ib = e / 32, h = dq_word(blk, 0);
  r.q = dq_ld128(blk, 8 + 16 * ib);
  r.s.x = h;
  r.s.y = bitfieldExtract(dq_word(blk, 4), int(4 * ib), 4) | (bitfieldExtract(h, int(16 + 2 * ib), 2) << 4);
#endif
  return r;
}

float dq_value(DqRaw r, uint e, uint t) {
#if WTYPE == WT_Q2_K || WTYPE == WT_Q3_K
  const uint q = (dq_byte(r.q, t) >> (2 * ((e / 32) % 4))) & 3u;
#if WTYPE == WT_Q2_K
  const vec2 dm = unpackHalf2x16(r.s.x);
  return dm.x * float(r.s.y & 0xFu) * float(q) - dm.y * float(r.s.y >> 4);
#else
  const uint hbit = (dq_byte(r.h, t) >> (e / 32)) & 1u;
  return unpackHalf2x16(r.s.y).x * float(int(r.s.x)) * float(int(q) - int(4u - 4u * hbit));
#endif
#else
  uint q = (dq_byte(r.q, t) >> (4 * ((e / 16) & 1u))) & 0xFu;
  const vec2 dm = unpackHalf2x16(r.s.x);
#if WTYPE == WT_Q4_0
  return dm.x * float(int(q) - 8);
#elif WTYPE == WT_Q4_1
  return dm.x * float(q) + dm.y;
#elif WTYPE == WT_Q5_0 || WTYPE == WT_Q5_1
  q |= ((r.s.y >> (e + t)) & 1u) << 4;
#if WTYPE == WT_Q5_0
  return dm.x * float(int(q) - 16);
#else
  return dm.x * float(q) + dm.y;
#endif
#elif WTYPE == WT_IQ4_NL
  return dm.x * DQ_KV_IQ4[q];
#elif WTYPE == WT_MXFP4
  return DQ_KV_MXFP4[q] * dq_e8m0_half(r.s.x);
#else
  return dm.x * float(int(r.s.y) - 32) * DQ_KV_IQ4[q];
#endif
#endif
}

#endif
