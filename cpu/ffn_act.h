#pragma once
// The gated activation of an FFN, h = act(g, u), as plain scalar functions
// (cpu/ must not depend on engine/; the engine maps its FfnAct onto GluAct).
//   SiLU:      h = silu(g) * u
//   OaiSwiGLU: gpt-oss's clamped variant (ggml's swiglu_oai, alpha 1.702,
//              limit 7): xg = min(g, 7), xu = clamp(u, -7, 7),
//              h = xg / (1 + exp(-1.702 xg)) * (xu + 1)
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace vkmoe {

enum class GluAct : uint8_t { SiLU, OaiSwiGLU };

constexpr float kOaiSwigluAlpha = 1.702f;
constexpr float kOaiSwigluLimit = 7.0f;

inline float glu_silu(float g, float u) { return g / (1.f + std::exp(-g)) * u; }

inline float glu_oai(float g, float u) {
  const float xg = std::min(g, kOaiSwigluLimit);
  const float xu = std::clamp(u, -kOaiSwigluLimit, kOaiSwigluLimit);
  return xg / (1.f + std::exp(-kOaiSwigluAlpha * xg)) * (xu + 1.f);
}

inline float glu(GluAct a, float g, float u) { return a == GluAct::OaiSwiGLU ? glu_oai(g, u) : glu_silu(g, u); }

// g[i] = act(g[i] + gb[i], u[i] + ub[i]) for i < n; gb, ub may be null (no bias).
inline void glu_rows(GluAct a, float* g, const float* u, int64_t n, const float* gb = nullptr,
                     const float* ub = nullptr) {
  if (a == GluAct::SiLU && !gb && !ub) {
    for (int64_t i = 0; i < n; ++i) g[i] = glu_silu(g[i], u[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float gi = gb ? g[i] + gb[i] : g[i];
    const float ui = ub ? u[i] + ub[i] : u[i];
    g[i] = glu(a, gi, ui);
  }
}

}  // namespace vkmoe
