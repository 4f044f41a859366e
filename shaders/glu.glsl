// The gated activation of a SwiGLU FFN, act(g) * u, as shaders/swiglu.comp:
// act 0 = SiLU, 1 = gpt-oss's clamped SwiGLU.
const float OAI_ALPHA = 1.702;
const float OAI_LIMIT = 7.0;
vec4 glu(vec4 g, vec4 u, uint act) {
  if (act == 1) {
    const vec4 xg = min(g, vec4(OAI_LIMIT)), xu = clamp(u, vec4(-OAI_LIMIT), vec4(OAI_LIMIT));
    return xg / (1.0 + exp(-OAI_ALPHA * xg)) * (xu + 1.0);
  }
  return g / (1.0 + exp(-g)) * u;
}
