#include "engine/model/arch/router_keys.h"

#include <cmath>

namespace vkmoe {

void read_router(const Hparams& h, ModelConfig& c, Gating default_gating, bool default_normalize) {
  RouterParams& r = c.router;
  r.gating = default_gating;
  if (h.has("expert_gating_func")) {
    switch (h.req_int("expert_gating_func")) {
      case 1: r.gating = Gating::Softmax; break;
      case 2: r.gating = Gating::Sigmoid; break;
      case 3: r.gating = Gating::SoftmaxWeight; break;
      default: h.fail("expert_gating_func " + std::to_string(h.req_int("expert_gating_func")) + " is not supported");
    }
  }
  r.normalize = h.opt_bool("expert_weights_norm", default_normalize);
  const double scale = h.file().get_float_or(h.arch() + ".expert_weights_scale", 0.0);
  if (!(scale == 0 || (scale >= 1e-6 && scale <= 1e6))) h.fail("expert_weights_scale is out of range");
  r.scale = scale == 0 ? 1.f : float(scale);
  r.n_group = h.opt_int("expert_group_count", 1);
  r.topk_group = h.opt_int("expert_group_used_count", r.n_group);
  if (c.n_expert % r.n_group != 0 || r.topk_group > r.n_group)
    h.fail("expert groups (" + std::to_string(r.n_group) + " groups, " + std::to_string(r.topk_group) +
           " used) do not divide " + std::to_string(c.n_expert) + " experts");
  if (r.n_group > 1 && int64_t{c.n_expert} / r.n_group * r.topk_group < c.n_expert_used)
    h.fail("the used expert groups hold fewer experts than expert_used_count");
}

void write_router(const ModelConfig& c, GgufWriter& w) {
  const std::string a = c.arch + ".";
  const RouterParams& r = c.router;
  w.add_u32(a + "expert_gating_func", r.gating == Gating::Softmax ? 1 : r.gating == Gating::Sigmoid ? 2 : 3);
  w.add_bool(a + "expert_weights_norm", r.normalize);
  w.add_f32(a + "expert_weights_scale", r.scale);
  if (r.n_group > 1) {
    w.add_u32(a + "expert_group_count", r.n_group);
    w.add_u32(a + "expert_group_used_count", r.topk_group);
  }
}

}  // namespace vkmoe
