// The gated activation of a SwiGLU FFN: act 0 = SiLU, silu(g) * u; act 1 =
// gpt-oss's clamped variant (ggml's swiglu_oai, alpha 1.702, limit 7):
// xg = min(g, 7), xu = clamp(u, -7, 7), xg / (1 + exp(-1.702 xg)) * (xu + 1).
const float OAI_ALPHA = 1.702;
const float OAI_LIMIT = 7.0;
vec4 glu(vec4 g, vec4 u, uint act) {
  if (act == 1) {
    const vec4 xg = min(g, vec4(OAI_LIMIT)), xu = clamp(u, vec4(-OAI_LIMIT), vec4(OAI_LIMIT));
    return xg / (1.0 + exp(-OAI_ALPHA * xg)) * (xu + 1.0);
  }
  return g / (1.0 + exp(-g)) * u;
}
