#pragma once
// Fills the planner's input from a loaded model.
#include "engine/model/model.h"
#include "planner/planner.h"

namespace vkmoe {

// The planner's input for this model: trunk and expert tensors, a KV cache of
// kv_type for n_ctx tokens, and the activations of n_ubatch-token passes
// exactly as the GPU engine allocates them (gemm_converts_x, gate_up_in_one:
// as ActivationShape's; the defaults count what the most demanding device needs).
PlanInput plan_input_for(const Model& m, int n_ctx, uint64_t vram_budget, GgmlType kv_type = GgmlType::F16,
                         int n_ubatch = 512, bool gemm_converts_x = true, bool gate_up_in_one = false);

}  // namespace vkmoe
