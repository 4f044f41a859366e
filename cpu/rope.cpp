#include "cpu/rope.h"

#include <algorithm>
#include <cmath>

// Built with -ffp-contract=off (CMakeLists.txt): the angles must be the same
// float operations as the GPU kernel's (`precise` there).
namespace vkmoe {
namespace {

// ggml_rope_yarn_corr_dim: the dim whose wavelength fits n_rot turns into n_ctx_orig.
float corr_dim(const RopeParams& p, float n_rot) {
  return p.n_rot * std::log(p.n_ctx_orig / (n_rot * 2 * float(M_PI))) / (2 * std::log(p.theta));
}

}  // namespace

RopeConsts rope_consts(const RopeParams& p) {
  RopeConsts c;
  c.theta_scale = std::pow(p.theta, -2.0f / p.n_rot);
  c.mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) c.mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  const float start = std::floor(corr_dim(p, p.beta_fast)), end = std::ceil(corr_dim(p, p.beta_slow));
  c.corr0 = std::max(0.0f, start);
  c.corr1 = std::min(float(p.n_rot - 1), end);
  return c;
}

void rope(float* v, int head_dim, int pos, const RopeParams& p) {
  const RopeConsts c = rope_consts(p);
  const int half = p.n_rot / 2;
  float theta_extrap = float(pos);
  for (int i = 0; i < half; ++i, theta_extrap *= c.theta_scale) {
    float theta = p.freq_scale * theta_extrap;
    if (p.ext_factor != 0.0f) {
      const float y = (i - c.corr0) / std::max(0.001f, c.corr1 - c.corr0);
      const float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = theta * (1 - ramp_mix) + theta_extrap * ramp_mix;
    }
    const float cs = std::cos(theta) * c.mscale, sn = std::sin(theta) * c.mscale;
    const int a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * cs - x1 * sn;
    v[b] = x0 * sn + x1 * cs;
  }
}

}  // namespace vkmoe
