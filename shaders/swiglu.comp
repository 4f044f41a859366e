#version 450
// g[i] = act(g[i], u[i]) for n values (in place on g), as shaders/glu.glsl:
// act 0: silu(g) * u; act 1: gpt-oss's clamped variant (ggml swiglu_oai).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(push_constant) uniform P { uint n, g_off, u_off, act; } p;
#include "glu.glsl"
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  g[p.g_off + i] = glu(vec4(g[p.g_off + i]), vec4(u[p.u_off + i]), p.act).x;
}
