#pragma once
// Bounds for tests of glu(g, u) (shaders/glu.glsl, cpu/ffn_act.h; act 0:
// SiLU, g / (1 + e^-g) * u; 1: gpt-oss's clamped form,
// xg / (1 + e^(-1.702 xg)) * (xu + 1)) when g and u may be eg and eu off.
#include <algorithm>
#include <cmath>

namespace vkmoe::test {

// The largest magnitudes of glu's g factor's argument (g, or xg = min(g, 7))
// and of its u factor (u, or xu + 1) over those ranges. Its change is then at
// most slope * eg * u + g * eu, where slope bounds the g factor's derivative
// (1.1 for both forms; the clamps only shrink changes).
struct GluFactors {
  double g, u;
};
inline GluFactors glu_factors(double g, double u, double eg, double eu, int act) {
  if (act == 1) return {std::fabs(std::min(g, 7.0)) + eg, std::fabs(std::clamp(u, -7.0, 7.0) + 1) + eu};
  return {std::fabs(g) + eg, std::fabs(u) + eu};
}

}  // namespace vkmoe::test
