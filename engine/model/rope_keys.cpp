#include "engine/model/rope_keys.h"

#include <cmath>

namespace vkmoe {
namespace {

float opt_float(const Hparams& h, const std::string& key, double fallback, double lo, double hi) {
  const double v = h.file().get_float_or(h.arch() + "." + key, fallback);
  if (!(v >= lo && v <= hi)) h.fail("hyper-parameter '" + h.arch() + "." + key + "' = " + std::to_string(v) + " is out of range");
  return static_cast<float>(v);
}

}  // namespace

void read_rope_scaling(const Hparams& h, ModelConfig& c) {
  const std::string type = h.opt_str("rope.scaling.type", "linear");
  float factor = opt_float(h, "rope.scaling.factor", 0.0, 0.0, 1e6);
  if (factor == 0) factor = opt_float(h, "rope.scale_linear", 0.0, 0.0, 1e6);
  c.rope_freq_scale = factor == 0 ? 1.f : 1.f / factor;
  c.n_ctx_orig_yarn = h.opt_int("rope.scaling.original_context_length", c.n_ctx_train);
  c.rope_attn_factor = opt_float(h, "rope.scaling.attn_factor", 1.0, 1e-6, 1e6);
  if (type == "none") {
    c.rope_freq_scale = 1.f;
  } else if (type == "yarn") {
    c.yarn_ext_factor = opt_float(h, "rope.scaling.yarn_ext_factor", 1.0, 0.0, 1e6);
    c.yarn_beta_fast = opt_float(h, "rope.scaling.yarn_beta_fast", 32.0, 0.0, 1e6);
    c.yarn_beta_slow = opt_float(h, "rope.scaling.yarn_beta_slow", 1.0, 0.0, 1e6);
    c.yarn_log_mul = opt_float(h, "rope.scaling.yarn_log_multiplier", 0.0, 0.0, 1e6);
    if (c.yarn_ext_factor != 0) {
      const float f = 1.0f / c.rope_freq_scale;
      const float mscale = f <= 1.0f ? 1.0f : 0.1f * std::log(f) + 1.0f;
      // ggml's rope multiplies by 1 + 0.1 ln(f) again when ext_factor != 0.
      c.yarn_attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(f)));
    }
  } else if (type != "linear") {
    h.fail("rope scaling '" + printable(type) + "' is not supported (none, linear, yarn)");
  }
  c.yarn_attn_factor *= c.rope_attn_factor;
}

void write_yarn(const ModelConfig& c, float factor, int n_ctx_orig, GgufWriter& w) {
  const std::string a = c.arch + ".rope.scaling.";
  w.add_str(a + "type", "yarn");
  w.add_f32(a + "factor", factor);
  w.add_u32(a + "original_context_length", n_ctx_orig);
}

}  // namespace vkmoe
