// Pieces the flash-attention kernels share (attn_flash.comp, attn_flash_cm.comp).

// The first key the query at position pos sees with a sliding window (0: none).
uint first_key(uint pos, uint window) { return window > 0 && pos + 1 > window ? pos + 1 - window : 0; }

// 1 / softmax denominator of a row with running max m and sum l (base 2),
// where the sink logit (natural log units) joins the max and the sum.
float inv_sum_with_sink(float l, float m, float sink) {
  const float sk = sink * 1.4426950408889634, m2 = max(m, sk), a = exp2(m - m2);
  return a / (l * a + exp2(sk - m2));
}
