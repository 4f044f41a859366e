#include "engine/forward/non_finite.h"

namespace vkmoe {

std::string describe_non_finite_site(uint32_t site) {
  if (site == 0) return "no recorded place";
  if (site == non_finite_site::kGridWaitLost) return "a fused GPU dispatch whose workgroups did not all run at once";
  if (site == 2) return "the token embeddings";
  const uint32_t il = (site - 2) / 2;
  if (site % 2 == 1) return "the attention output of layer " + std::to_string(il);
  return "the FFN output of layer " + std::to_string(il - 1);
}

}  // namespace vkmoe
