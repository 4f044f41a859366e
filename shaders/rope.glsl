// Rotary embedding's angles as cpu/rope.cpp computes them, for shaders whose
// push constants hold freq_scale, ext_factor, theta_scale, corr0 and corr1
// (cpu/rope.h's RopeParams / RopeConsts), or that define ROPE_PARAM(name) as
// where they hold them.
#ifndef ROPE_PARAM
#define ROPE_PARAM(name) p.name
#endif

// Rotation unit m (< head_dim / 2) of a head: the elements (a, b) of rotated
// pair m (NeoX: m and m + n_rot / 2, else 2m and 2m + 1), or past n_rot / 2
// two adjacent elements past n_rot, not rotated; returns whether it rotates.
bool rope_unit_pair(uint m, uint n_rot, bool neox, out uint a, out uint b) {
  const uint half_r = n_rot / 2;
  if (m < half_r) {
    a = neox ? m : 2 * m;
    b = neox ? m + half_r : 2 * m + 1;
    return true;
  }
  a = n_rot + 2 * (m - half_r);
  b = a + 1;
  return false;
}

// The rotation unit of element e (< head_dim): rope_unit_pair's m whose a or b is e.
uint rope_unit_of(uint e, uint n_rot, bool neox) {
  const uint half_r = n_rot / 2;
  return e >= n_rot ? half_r + (e - n_rot) / 2 : neox ? e % half_r : e / 2;
}

// ggml's rope_yarn angle of pair i: pos * theta_scale^i as i successive
// products, then the YaRN mix with the extrapolated angle.
float angle(float pos, uint i) {
  precise float te = pos;
  for (uint j = 0; j < i; ++j) te *= ROPE_PARAM(theta_scale);
  precise float th = ROPE_PARAM(freq_scale) * te;
  if (ROPE_PARAM(ext_factor) != 0.0) {
    precise const float y = (float(i) - ROPE_PARAM(corr0)) / max(0.001, ROPE_PARAM(corr1) - ROPE_PARAM(corr0));
    precise const float mix = (1.0 - min(1.0, max(0.0, y))) * ROPE_PARAM(ext_factor);
    th = th * (1.0 - mix) + te * mix;
  }
  return th;
}

// cos and sin of x, reduced to [-pi, pi] first (where GPU sin/cos are
// specified) by x - n 2 pi with 2 pi in three parts, the first two of 8 bits:
// exact products for |n| < 2^16 (|x| < 4e5).
vec2 cos_sin(float x) {
  const float n = round(x * 0.15915494309189535);
  precise float r = x - n * 6.28125;
  r = r - n * 0.00193023681640625;
  r = r - n * 5.070363386039389e-06;
  return vec2(cos(r), sin(r));
}
