#pragma once
// The cooperative-matrix prompt attention behind record_attention
// (vk_attention.h; shaders/attn_flash_cm.comp).
#include "engine/vulkan/vk_attention.h"

namespace vkmoe::vk {

// Records the kernel for `a`, which attention_uses_coopmat took and
// record_attention validated: one dispatch.
void record_attention_coopmat(Recorder& rec, const AttentionArgs& a);

}  // namespace vkmoe::vk
