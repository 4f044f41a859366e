// Little-endian data at uint16 index i of either parity, from the aligned
// uint32 words Q8X_W1 around it (q8x_type.glsl's Q8_0 and Q6_K blocks are
// 2-byte aligned): n words from i take n + 1 loads where i is odd, n where
// even, instead of 2n loads of 2 bytes. Included inside q8x_type.glsl's
// per-type sections, with its Q8X(name) prefix.

// The uint16 at i (zero-extended).
uint Q8X(ld16)(uint i) { return (Q8X_W1(i >> 1) >> (16 * (i & 1u))) & 0xFFFFu; }

// Where odd, the word that starts in the middle of lo: lo's upper half, then
// hi's lower half; else lo.
uint Q8X(funnel)(uint lo, uint hi, bool odd) { return odd ? (lo >> 16) | (hi << 16) : lo; }

// Four uint16s from i as two words.
uvec2 Q8X(ld64)(uint i) {
  const uint w = i >> 1;
  const bool odd = (i & 1u) != 0;
  const uint a = Q8X_W1(w), b = Q8X_W1(w + 1), c = odd ? Q8X_W1(w + 2) : 0u;
  return uvec2(Q8X(funnel)(a, b, odd), Q8X(funnel)(b, c, odd));
}

// Eight uint16s from i as four words.
uvec4 Q8X(ld128)(uint i) {
  const uint w = i >> 1;
  const bool odd = (i & 1u) != 0;
  const uvec4 v = uvec4(Q8X_W1(w), Q8X_W1(w + 1), Q8X_W1(w + 2), Q8X_W1(w + 3));
  const uint e = odd ? Q8X_W1(w + 4) : 0u;
  return uvec4(Q8X(funnel)(v.x, v.y, odd), Q8X(funnel)(v.y, v.z, odd), Q8X(funnel)(v.z, v.w, odd),
               Q8X(funnel)(v.w, e, odd));
}
