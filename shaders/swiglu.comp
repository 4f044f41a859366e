#version 450
// g[i] = silu(g[i]) * u[i] for n values (in place on g).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(push_constant) uniform P { uint n, g_off, u_off; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  const float a = g[p.g_off + i];
  g[p.g_off + i] = a / (1.0 + exp(-a)) * u[p.u_off + i];
}
