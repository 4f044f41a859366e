// Global loads of one weight chunk for gemm_coopmat.comp, included once per
// weight binding: the includer defines WB4, WB2, WB1 (the binding's uvec4, u16 and
// uint views) and the names LD32, LD128 and LOAD_W to give these functions.
uint LD32(uint i) { return uint(WB2[i]) | (uint(WB2[i + 1]) << 16); }

// The 16 bytes from 16-bit word i on, by 32-bit loads (a word more, shifted,
// where i is odd; those 2 bytes past the end stay inside the block).
uvec4 LD128(uint i) {
  const uint j = i >> 1;
  if ((i & 1u) == 0) return uvec4(WB1[j], WB1[j + 1], WB1[j + 2], WB1[j + 3]);
  const uint a = WB1[j], b = WB1[j + 1], c = WB1[j + 2], d = WB1[j + 3], f = WB1[j + 4];
  return uvec4((a >> 16) | (b << 16), (b >> 16) | (c << 16), (c >> 16) | (d << 16), (d >> 16) | (f << 16));
}

// Loads the 16-element chunk at column kc (a multiple of 16) of weight row bytes rb.
Raw LOAD_W(uint rb, uint kc) {
  Raw r;
  const uint k0 = kc & ~31u, half_ = (kc >> 4) & 1u;
#if !defined(FLOAT_W)
  r.a = r.b = r.c = r.d = uvec4(0);
  if (kc >= p.ncols) return r;  // past the row (BK > 32): decodes to zeros
#endif
#if WTYPE == WT_F32
  const uint i = (rb >> 4) + kc / 4;
  if (kc < p.ncols) { r.a = WB4[i]; r.b = WB4[i + 1]; }
  if (kc + 8 < p.ncols) { r.c = WB4[i + 2]; r.d = WB4[i + 3]; }
#elif WTYPE == WT_F16 || WTYPE == WT_BF16
  const uint i = (rb >> 4) + kc / 8;
  if (kc < p.ncols) r.a = WB4[i];
  if (kc + 8 < p.ncols) r.b = WB4[i + 1];
#elif WTYPE == WT_Q8_0
  const uint hw = (rb >> 1) + (k0 / 32) * 17;  // 34-byte block = 17 u16
  const uint q = hw + 1 + 8 * half_;
  r.a = uvec4(LD32(q), LD32(q + 2), LD32(q + 4), LD32(q + 6));
  r.b.x = uint(WB2[hw]);
#elif WTYPE == WT_Q4_K
  const uint bi = (rb >> 4) + (k0 / 256) * 9;  // 144-byte block = 9 uvec4
  const uint sub = (k0 % 256) / 32;
  r.a = WB4[bi];                                  // d, dmin, scales
  r.b = WB4[bi + 1 + (sub >> 1) * 2 + half_];     // qs[32*(sub/2) + 16*half ..]
#elif WTYPE == WT_Q5_K
  const uint bi = (rb >> 4) + (k0 / 256) * 11;  // 176-byte block = 11 uvec4
  const uint sub = (k0 % 256) / 32;
  r.a = WB4[bi];
  r.c = WB4[bi + 1 + half_];                     // qh[16*half ..]
  r.b = WB4[bi + 3 + (sub >> 1) * 2 + half_];    // qs[32*(sub/2) + 16*half ..]
#elif WTYPE == WT_Q6_K
  // ql[128] @0, qh[64] @128, scales[16] @192, d @208; elements 128n + 32m + l.
  const uint hw = (rb >> 1) + (k0 / 256) * 105;  // 210-byte block = 105 u16
  const uint e = k0 % 256, n = e / 128, m = (e % 128) / 32;
  const uint ql = hw + (64 * n + 32 * (m & 1u) + 16 * half_) / 2;
  const uint qh = hw + (128 + 32 * n + 16 * half_) / 2;
  r.a = LD128(ql);
  r.b = LD128(qh);
  r.c.x = uint(WB2[hw + (192 + 8 * n + 2 * m + half_) / 2]);  // scale byte pair
  r.c.y = uint(WB2[hw + 104]);
#endif
  return r;
}
