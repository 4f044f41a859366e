#pragma once
// Fills the planner's input from a loaded model.
#include "engine/model/model.h"
#include "planner/planner.h"

namespace vkmoe {

bool is_expert_tensor(const std::string& name);  // routed experts: "*_exps.weight"
PlanInput plan_input_for(const Model& m, int n_ctx, uint64_t vram_budget, GgmlType kv_type);

}  // namespace vkmoe
