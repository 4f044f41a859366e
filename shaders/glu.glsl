// The gated activation of a SwiGLU FFN: act 0 = SiLU, silu(g) * u; act 1 =
// gpt-oss's clamped variant (ggml's swiglu_oai, alpha 1.702, limit 7):
// xg = min(g, 7), xu = clamp(u, -7, 7), xg / (1 + exp(-1.702 xg)) * (xu + 1).
const float OAI_ALPHA = 1.702;
const float OAI_LIMIT = 7.0;
#define GLU_OF(T)                                                         \
  T glu(T g, T u, uint act) {                                             \
    if (act == 1) {                                                       \
      const T xg = min(g, T(OAI_LIMIT)), xu = clamp(u, T(-OAI_LIMIT), T(OAI_LIMIT)); \
      return xg / (1.0 + exp(-OAI_ALPHA * xg)) * (xu + 1.0);              \
    }                                                                     \
    return g / (1.0 + exp(-g)) * u;                                       \
  }
GLU_OF(float)
GLU_OF(vec4)
#undef GLU_OF
