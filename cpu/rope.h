#pragma once
// Rotary position embedding with the semantics of ggml's rope (ggml_rope_ext,
// CPU backend): partial rotary, NeoX or adjacent pairs, YaRN scaling.
namespace vkmoe {

struct RopeParams {
  int n_rot = 0;          // rotated dimensions (even, <= head_dim); dims >= n_rot pass through unchanged
  bool neox = false;      // NeoX: pairs (i, i + n_rot/2); else adjacent pairs (2i, 2i+1)
  float theta = 10000.f;  // freq_base
  // YaRN as ggml's rope_yarn: freq_scale 1 and ext_factor 0 give plain RoPE.
  float freq_scale = 1.f, ext_factor = 0.f, attn_factor = 1.f, beta_fast = 32.f, beta_slow = 1.f;
  int n_ctx_orig = 0;     // original training context (YaRN's correction dims)
};

// What the rotation of pair i needs besides the position, computed once per
// call as ggml does (also the GPU kernel's push constants):
// theta_scale = theta^(-2/n_rot); mscale multiplies cos and sin (attn_factor,
// times 1 + 0.1 ln(1/freq_scale) when ext_factor != 0); corr = YaRN's
// correction dims (ggml_rope_yarn_corr_dims).
struct RopeConsts {
  float theta_scale, mscale, corr0, corr1;
};
RopeConsts rope_consts(const RopeParams& p);

// Rotates one head of head_dim values in place for position pos. Pair i turns
// by theta_i: theta_extrap = pos * theta_scale^i (repeated float products, as
// ggml), theta_interp = freq_scale * theta_extrap, and with ext_factor != 0
// mixed: theta = theta_interp (1 - m) + theta_extrap m, m = ext_factor *
// ramp(i) (1 below corr0, 0 above corr1, linear between).
void rope(float* v, int head_dim, int pos, const RopeParams& p);

}  // namespace vkmoe
