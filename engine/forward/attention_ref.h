#pragma once
// The CPU reference attention of one query token (llama.cpp's semantics):
// causal, grouped-query heads (q head h reads kv head h / (n_head / n_head_kv)),
// an optional sliding window and optional attention sinks.
#include <cstdint>
#include <vector>

namespace vkmoe {

struct AttentionRefShape {
  int head_dim = 0, n_head = 0, n_head_kv = 0;
  float scale = 1.f;       // multiplies q . k (not the sinks)
  uint32_t window = 0;     // keys at positions p - window < j <= p (0: all of 0..p)
  const float* sinks = nullptr;  // n_head logits (nullptr: none): each enters its head's
                                 // softmax max and denominator; its probability mass is dropped
};

// out (n_head * head_dim) for the query q (n_head * head_dim) at position p
// over the keys/values at positions 0..p of one layer's cache, whose rows (one
// per position, n_head_kv * head_dim values) are kv_stride floats apart.
// scratch is resized as needed.
void attend_ref(const float* q, const float* k_cache, const float* v_cache, int kv_stride, int p,
                const AttentionRefShape& s, float* out, std::vector<float>& scratch);

}  // namespace vkmoe
