// One weight type's side of an int8-activation dot product (matvec_q8x.comp's
// numerics): included once per type a shader reads, with
//   Q8X_WT       the type (4 = Q8_0, 5 = Q4_K, 6 = Q5_K, 7 = Q6_K),
//   Q8X(name)    the prefix that keeps this inclusion's names apart,
//   Q8X_W4(i)    the i-th uvec4 of the weights (Q4_K, Q5_K: 16-byte aligned),
//   Q8X_W1(i)    the i-th uint32 of the weights (Q8_0, Q6_K, whose blocks are
//                only 2-byte aligned: read as aligned words and shifted),
// and, declared before: sdot4 (OpSDot), shared xq (ivec4: x as int8, 16 per
// entry) and xds (vec2 per 32-element block: dx, dx * sum of its int8s).
// Defines Q8X(WData), Q8X(XData), Q8X(load_w)(bi, k) (bi in addressing units
// of Q8X(UNIT_BYTES) bytes), Q8X(load_x)(b, k) (block b of x), Q8X(dot_w), and
// Q8X(QK) (block size), Q8X(BLOCK_UNITS) (block size in units), Q8X(UPB)
// (work units per block: what one lane decodes at once).
// 2-byte aligned data (uint16 index i, either parity) is read as the aligned
// words around it: as uint16s each unit took 29 (Q6_K) or 17 (Q8_0) loads of
// 2 bytes, and a Q6_K down product ran at ~1.2 TB/s against Q4_K's ~1.8
// (docs/PERF.md run 44).
// Q8X_XQ(i), where the includer defines it, reads xq's entry i from another
// layout (default: xq[i]).
#ifndef Q8X_XQ
#define Q8X_XQ(i) xq[i]
#endif

#if Q8X_WT == 5 || Q8X_WT == 6
const uint Q8X(QK) = 256;
const uint Q8X(UPB) = 4;  // one 64-element group (32 qs bytes)
const uint Q8X(UNIT_BYTES) = 16;
const uint Q8X(BLOCK_UNITS) = Q8X_WT == 5 ? 9 : 11;  // 144 or 176 bytes

// 6-bit scales and mins of sub-blocks 2j and 2j+1 from the 16-byte header h.
void Q8X(k_scales)(uvec4 h, uint j, out float sc0, out float sc1, out float m0, out float m1) {
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

struct Q8X(WData) {
  uvec4 h, q0, q1;
#if Q8X_WT == 6
  uvec4 h0, h1;
#endif
};

// Unit k (group j = k) of the block starting at uvec4 index bi.
Q8X(WData) Q8X(load_w)(uint bi, uint k) {
  Q8X(WData) w;
  w.h = Q8X_W4(bi);
#if Q8X_WT == 5
  w.q0 = Q8X_W4(bi + 1 + 2 * k);
  w.q1 = Q8X_W4(bi + 2 + 2 * k);
#else
  w.h0 = Q8X_W4(bi + 1);  // qh[0..16)
  w.h1 = Q8X_W4(bi + 2);  // qh[16..32)
  w.q0 = Q8X_W4(bi + 3 + 2 * k);
  w.q1 = Q8X_W4(bi + 4 + 2 * k);
#endif
  return w;
}

// Quantized x of unit k of block b: lo = elements 64k..+32, hi = 64k+32..+64.
struct Q8X(XData) {
  ivec4 lo0, lo1, hi0, hi1;
  vec2 dlo, dhi;
};

Q8X(XData) Q8X(load_x)(uint b, uint k) {
  Q8X(XData) d;
  const uint g = b * 4 + k;  // 64-element group
  d.lo0 = Q8X_XQ(g * 4);
  d.lo1 = Q8X_XQ(g * 4 + 1);
  d.hi0 = Q8X_XQ(g * 4 + 2);
  d.hi1 = Q8X_XQ(g * 4 + 3);
  d.dlo = xds[g * 2];
  d.dhi = xds[g * 2 + 1];
  return d;
}

float Q8X(dot_w)(Q8X(WData) w, uint k, Q8X(XData) x) {
  float sc0, sc1, m0, m1;
  Q8X(k_scales)(w.h, k, sc0, sc1, m0, m1);
  const vec2 dm = unpackHalf2x16(w.h.x);
  int ilo = 0, ihi = 0;
  [[unroll]] for (uint t = 0; t < 8; ++t) {
    const uint q = t < 4 ? w.q0[t] : w.q1[t - 4];
    uint lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
#if Q8X_WT == 6
    const uint hb = (t < 4 ? w.h0[t] : w.h1[t - 4]) >> (2 * k);
    lo |= (hb << 4) & 0x10101010u;
    hi |= (hb << 3) & 0x10101010u;
#endif
    const int xl = t < 4 ? x.lo0[t] : x.lo1[t - 4];
    const int xh = t < 4 ? x.hi0[t] : x.hi1[t - 4];
    ilo = ilo + sdot4(int(lo), xl, 0);
    ihi = ihi + sdot4(int(hi), xh, 0);
  }
  return dm.x * (sc0 * x.dlo.x * float(ilo) + sc1 * x.dhi.x * float(ihi)) - dm.y * (m0 * x.dlo.y + m1 * x.dhi.y);
}

#elif Q8X_WT == 4
const uint Q8X(QK) = 32;
const uint Q8X(UPB) = 1;
const uint Q8X(UNIT_BYTES) = 2;
const uint Q8X(BLOCK_UNITS) = 17;  // 34 bytes
#include "q8x_words.glsl"

struct Q8X(WData) {
  uvec4 q0, q1;
  uint d;
};

// The block starting at uint16 index bi: d (f16), then 32 int8 quants.
Q8X(WData) Q8X(load_w)(uint bi, uint k) {
  Q8X(WData) w;
  w.d = Q8X(ld16)(bi);
  w.q0 = Q8X(ld128)(bi + 1);
  w.q1 = Q8X(ld128)(bi + 9);
  return w;
}

struct Q8X(XData) {
  ivec4 x0, x1;
  float dx;
};

Q8X(XData) Q8X(load_x)(uint b, uint k) {
  Q8X(XData) d;
  d.x0 = Q8X_XQ(b * 2);
  d.x1 = Q8X_XQ(b * 2 + 1);
  d.dx = xds[b].x;
  return d;
}

float Q8X(dot_w)(Q8X(WData) w, uint k, Q8X(XData) x) {
  int i = 0;
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    i = i + sdot4(int(w.q0[t]), x.x0[t], 0);
    i = i + sdot4(int(w.q1[t]), x.x1[t], 0);
  }
  return unpackHalf2x16(w.d).x * x.dx * float(i);
}

#elif Q8X_WT == 7
const uint Q8X(QK) = 256;
const uint Q8X(UPB) = 4;  // half n = k/2, positions l in [16 (k&1), +16) of its four 32-wide quarters
const uint Q8X(UNIT_BYTES) = 2;
const uint Q8X(BLOCK_UNITS) = 105;  // 210 bytes
#include "q8x_words.glsl"

struct Q8X(WData) {
  uvec4 a, b, h;  // ql[64n + 16h'..], ql[64n + 32 + 16h'..], qh[32n + 16h'..]
  uvec4 sc;       // u16 words holding scales[8n + 2m + h'] (byte h' of word m)
  uint d;
};

// Block: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d (f16) @208.
Q8X(WData) Q8X(load_w)(uint bi, uint k) {
  Q8X(WData) w;
  const uint n = k >> 1, hh = k & 1u;
  const uint ia = bi + 32 * n + 8 * hh, ib = ia + 16, ih = bi + 64 + 16 * n + 8 * hh;
  w.a = Q8X(ld128)(ia);
  w.b = Q8X(ld128)(ib);
  w.h = Q8X(ld128)(ih);
  const uvec2 sc = Q8X(ld64)(bi + 96 + 4 * n);
  w.sc = uvec4(sc.x & 0xFFFFu, sc.x >> 16, sc.y & 0xFFFFu, sc.y >> 16);
  w.d = Q8X(ld16)(bi + 104);
  return w;
}

// x of quarter m (elements 128n + 32m + 16h' .. +16) and their int8 sums.
struct Q8X(XData) {
  ivec4 v[4];
  ivec4 s;
  vec4 dx;
};

Q8X(XData) Q8X(load_x)(uint b, uint k) {
  Q8X(XData) d;
  const uint n = k >> 1, hh = k & 1u;
  [[unroll]] for (uint m = 0; m < 4; ++m) {
    const uint blk = b * 8 + 4 * n + m;  // 32-element x block
    d.v[m] = Q8X_XQ(blk * 2 + hh);
    d.dx[m] = xds[blk].x;
    const ivec4 v = d.v[m];
    d.s[m] = sdot4(v.x, 0x01010101, 0) + sdot4(v.y, 0x01010101, 0) + sdot4(v.z, 0x01010101, 0) +
             sdot4(v.w, 0x01010101, 0);
  }
  return d;
}

float Q8X(dot_w)(Q8X(WData) w, uint k, Q8X(XData) x) {
  const uint hh = k & 1u;
  ivec4 i = ivec4(0);
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    const uint A = w.a[t], B = w.b[t], H = w.h[t];
    i.x = i.x + sdot4(int((A & 0x0F0F0F0Fu) | ((H << 4) & 0x30303030u)), x.v[0][t], 0);
    i.y = i.y + sdot4(int((B & 0x0F0F0F0Fu) | ((H << 2) & 0x30303030u)), x.v[1][t], 0);
    i.z = i.z + sdot4(int(((A >> 4) & 0x0F0F0F0Fu) | (H & 0x30303030u)), x.v[2][t], 0);
    i.w = i.w + sdot4(int(((B >> 4) & 0x0F0F0F0Fu) | ((H >> 2) & 0x30303030u)), x.v[3][t], 0);
  }
  // sum (q - 32) x~ = i - 32 s per quarter
  const ivec4 sc = bitfieldExtract(ivec4(w.sc), int(8 * hh), 8);
  const vec4 part = vec4(i - 32 * x.s) * x.dx;
  return unpackHalf2x16(w.d).x * dot(vec4(sc), part);
}
#else
#error "q8x_type.glsl: unsupported Q8X_WT"
#endif
