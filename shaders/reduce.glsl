// Workgroup-wide sum/max through shared memory. WG must be a power of two
// and equal to gl_WorkGroupSize.x; every invocation must call these.
shared float red_buf[WG];
float wg_sum(float v) {
  red_buf[gl_LocalInvocationID.x] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (gl_LocalInvocationID.x < s) red_buf[gl_LocalInvocationID.x] += red_buf[gl_LocalInvocationID.x + s];
    barrier();
  }
  float r = red_buf[0];
  barrier();
  return r;
}
float wg_max(float v) {
  red_buf[gl_LocalInvocationID.x] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (gl_LocalInvocationID.x < s)
      red_buf[gl_LocalInvocationID.x] = max(red_buf[gl_LocalInvocationID.x], red_buf[gl_LocalInvocationID.x + s]);
    barrier();
  }
  float r = red_buf[0];
  barrier();
  return r;
}
