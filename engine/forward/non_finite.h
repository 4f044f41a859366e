#pragma once
// Where a forward pass first produced NaN/Inf, as a code both backends record:
// checks sit where the residual stream is read, in order, so the smallest
// code seen is the earliest place. 0 means none.
#include <cstdint>
#include <string>

#include "cpu/finite_check.h"

namespace vkmoe {

namespace non_finite_site {
// Not a place in the model: a fused GPU dispatch whose workgroups did not all
// run at once gave up waiting for each other and poisoned its output
// (shaders/moe_decode_fused.comp).
constexpr uint32_t kGridWaitLost = 1;
// The residual stream entering layer il (after the previous layer's FFN).
inline uint32_t layer_input(int il) { return 2 * uint32_t(il) + 2; }
// The residual stream after layer il's attention.
inline uint32_t after_attention(int il) { return 2 * uint32_t(il) + 3; }
}  // namespace non_finite_site

// "the token embeddings", "the attention output of layer 3", "the FFN output of layer 2" ...
std::string describe_non_finite_site(uint32_t site);

}  // namespace vkmoe
