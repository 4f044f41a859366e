// Included by matvec.comp with TAIL_NORM: once every workgroup has written its
// rows of y, the last one to finish (counted on counter[tail_counter], which
// it leaves at 0 again) writes
//   norm_out[tail_out_offset + i] = y[i] / sqrt(mean(y^2) + eps) * norm_w[i]
// for all nrows values of y, saving the separate RMS-norm dispatch and its
// barrier. A non-finite sum of squares lowers first_bad to tail_check (when
// tail_check != 0), as rms_norm.comp does.
layout(set = 0, binding = 3) readonly buffer NormW { float norm_w[]; };
layout(set = 0, binding = 4) writeonly buffer NormOut { float norm_out[]; };
layout(set = 0, binding = 5) buffer Counter { uint counter[]; };
layout(set = 0, binding = 6) buffer Bad { uint first_bad; };

shared bool tail_is_last;

void norm_tail(uint ybase) {
  const uint WG = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x;
  // This workgroup's y writes before its count (the classic last-block pattern).
  memoryBarrierBuffer();
  barrier();
  if (t == 0) tail_is_last = atomicAdd(counter[p.tail_counter], 1u) == p.row_blocks - 1;
  barrier();
  if (!tail_is_last) return;
  memoryBarrierBuffer();
  float ss = 0.0;
  for (uint i = t; i < p.nrows; i += WG) {
    const float v = y[ybase + i];
    ss += v * v;
  }
  red[t] = ss;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  ss = red[0];
  if (t == 0) {
    if (p.tail_check != 0 && (isnan(ss) || isinf(ss))) atomicMin(first_bad, p.tail_check);
    counter[p.tail_counter] = 0u;
  }
  const float scale = inversesqrt(ss / float(p.nrows) + p.tail_eps);
  for (uint i = t; i < p.nrows; i += WG) norm_out[p.tail_out_offset + i] = y[ybase + i] * scale * norm_w[i];
}
