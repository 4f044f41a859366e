#version 450
// g[i] = act(g[i], u[i]) for n values (in place on g).
// act 0: silu(g) * u; act 1: gpt-oss's clamped variant (ggml swiglu_oai with
// alpha 1.702, limit 7): xg = min(g, 7), xu = clamp(u, -7, 7),
// xg / (1 + exp(-1.702 xg)) * (xu + 1).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer G { float g[]; };
layout(std430, binding = 1) readonly buffer U { float u[]; };
layout(push_constant) uniform P { uint n, g_off, u_off, act; } p;
const float OAI_ALPHA = 1.702;
const float OAI_LIMIT = 7.0;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  const float a = g[p.g_off + i], b = u[p.u_off + i];
  if (p.act == 1u) {
    const float xg = min(a, OAI_LIMIT), xu = clamp(b, -OAI_LIMIT, OAI_LIMIT);
    g[p.g_off + i] = xg / (1.0 + exp(-OAI_ALPHA * xg)) * (xu + 1.0);
  } else {
    g[p.g_off + i] = a / (1.0 + exp(-a)) * b;
  }
}
