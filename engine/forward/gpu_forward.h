#pragma once
// Vulkan forward pass. The trunk always runs on the GPU; routed experts are
// either all resident, served from an SLRU slot cache in VRAM (misses run on
// the CPU while the GPU works, and are admitted asynchronously), or always
// computed on the CPU — as the planner decides for the VRAM budget.
#include <memory>

#include "engine/forward/engine_select.h"

namespace vkmoe {

std::unique_ptr<Engine> make_gpu_engine(const Model& m, const EngineOptions& o);

}  // namespace vkmoe
