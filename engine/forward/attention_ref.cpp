#include "engine/forward/attention_ref.h"

#include <algorithm>
#include <cmath>

namespace vkmoe {

void attend_ref(const float* q, const float* k_cache, const float* v_cache, int kv_stride, int p,
                const AttentionRefShape& s, float* out, std::vector<float>& scratch) {
  const int D = s.head_dim, group = s.n_head / s.n_head_kv;
  // First visible key: llama.cpp masks key j for the query at p when p - j >= window.
  const int j0 = s.window > 0 && int64_t(p) + 1 > int64_t(s.window) ? int(p + 1 - int64_t(s.window)) : 0;
  const int n = p + 1 - j0;
  if (scratch.size() < size_t(n)) scratch.resize(size_t(n));
  float* scores = scratch.data();
  for (int h = 0; h < s.n_head; ++h) {
    const float* qh = q + size_t(h) * D;
    const int kvh = h / group;
    float mx = -INFINITY;
    for (int j = j0; j <= p; ++j) {
      const float* kj = k_cache + size_t(j) * kv_stride + size_t(kvh) * D;
      float dot = 0;
      for (int i = 0; i < D; ++i) dot += qh[i] * kj[i];
      scores[j - j0] = dot * s.scale;
      mx = std::max(mx, scores[j - j0]);
    }
    if (s.sinks) mx = std::max(mx, s.sinks[h]);
    double sum = 0;
    for (int j = 0; j < n; ++j) sum += scores[j] = std::exp(scores[j] - mx);
    if (s.sinks) sum += std::exp(s.sinks[h] - mx);
    float* oh = out + size_t(h) * D;
    std::fill(oh, oh + D, 0.f);
    for (int j = j0; j <= p; ++j) {
      const float w = static_cast<float>(scores[j - j0] / sum);
      const float* vj = v_cache + size_t(j) * kv_stride + size_t(kvh) * D;
      for (int i = 0; i < D; ++i) oh[i] += w * vj[i];
    }
  }
}

}  // namespace vkmoe
