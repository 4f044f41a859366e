#version 450
// In-place rotary embedding of n_heads heads of head_dim values at position pos.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer V { float v[]; };
layout(push_constant) uniform P {
  uint head_dim, n_heads, pos, off, neox;
  float theta;
} p;
void main() {
  const uint half_d = p.head_dim / 2;
  const uint idx = gl_GlobalInvocationID.x;
  if (idx >= p.n_heads * half_d) return;
  const uint h = idx / half_d, i = idx % half_d;
  const float freq = pow(p.theta, -2.0 * float(i) / float(p.head_dim));
  const float ang = float(p.pos) * freq;
  const float c = cos(ang), s = sin(ang);
  const uint base = p.off + h * p.head_dim;
  const uint a = base + (p.neox != 0 ? i : 2 * i), b = base + (p.neox != 0 ? i + half_d : 2 * i + 1);
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}
