#pragma once
namespace vkmoe {

// Router: softmax over n_expert logits, pick the k most probable experts
// (lower index wins ties), optionally renormalize their weights to sum to 1.
void route_topk(const float* logits, int n_expert, int k, bool normalize, int* ids, float* weights);

inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }

}  // namespace vkmoe
