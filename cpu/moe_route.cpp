#include "cpu/moe_route.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace vkmoe {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kMinWeightSum = 6.103515625e-5;  // llama.cpp's clamp: the smallest normal f16

float no_nan(float x) { return std::isnan(x) ? kNegInf : x; }
bool better(float v, int i, float ov, int oi) { return v > ov || (v == ov && i < oi); }

}  // namespace

void route_topk(const float* logits, const float* bias, int n_expert, int k, const RouterParams& p, int* ids,
                float* weights, float* margin) {
  const int n = n_expert;
  float gap = std::numeric_limits<float>::infinity();
  std::vector<float> l(n), prob(n), s(n);
  for (int e = 0; e < n; ++e) l[e] = no_nan(logits[e]);
  const float mx = *std::max_element(l.begin(), l.end());
  double sum = 0;  // softmax denominator
  for (int e = 0; e < n; ++e) {
    switch (p.gating) {
      case Gating::Softmax: sum += prob[e] = l[e] == mx ? 1.f : std::exp(l[e] - mx); break;
      case Gating::Sigmoid: prob[e] = 1.f / (1.f + std::exp(-l[e])); break;
      case Gating::SoftmaxWeight: prob[e] = l[e]; break;
    }
  }
  const bool values = bias || p.n_group > 1;  // else the logits order the experts as the probs do
  for (int e = 0; e < n; ++e) {
    const float pr = p.gating == Gating::Softmax ? float(prob[e] / sum) : prob[e];
    s[e] = values ? no_nan(pr + (bias ? bias[e] : 0.f)) : l[e];
  }
  if (p.n_group > 1) {  // group score: the sum of the group's 2 best scores
    const int per = n / p.n_group;
    std::vector<float> gs(p.n_group);
    for (int g = 0; g < p.n_group; ++g) {
      float b1 = kNegInf, b2 = kNegInf;
      for (int e = g * per; e < (g + 1) * per; ++e)
        if (s[e] > b1) b2 = b1, b1 = s[e];
        else if (s[e] > b2) b2 = s[e];
      gs[g] = per > 1 ? no_nan(b1 + b2) : b1;
    }
    float last_kept = 0, first_dropped = 0;  // the group scores ranked topk_group - 1 and topk_group
    for (int g = 0; g < p.n_group; ++g) {
      int rank = 0;
      for (int o = 0; o < p.n_group; ++o) rank += better(gs[o], o, gs[g], g);
      if (rank == p.topk_group - 1) last_kept = gs[g];
      if (rank == p.topk_group) first_dropped = gs[g];
      if (rank >= p.topk_group) std::fill(s.begin() + g * per, s.begin() + (g + 1) * per, kNegInf);
    }
    if (p.topk_group < p.n_group) gap = last_kept - first_dropped;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return better(s[a], a, s[b], b); });
  std::copy_n(order.begin(), k, ids);
  if (k < n) {
    const int next = *std::max_element(order.begin() + k, order.end(), [&](int a, int b) { return s[a] < s[b]; });
    gap = std::min(gap, s[ids[k - 1]] - s[next]);
  }
  if (margin) *margin = std::isnan(gap) ? 0.f : gap;  // NaN: -inf scores on both sides

  std::vector<double> w(k);
  double sel = 0;
  if (p.gating == Gating::SoftmaxWeight) {
    float m = kNegInf;
    for (int j = 0; j < k; ++j) m = std::max(m, l[ids[j]]);
    for (int j = 0; j < k; ++j) sel += w[j] = l[ids[j]] == m ? 1.f : std::exp(l[ids[j]] - m);
    for (int j = 0; j < k; ++j) w[j] /= sel;
    sel = 1;  // the sum of the softmax (up to rounding: llama.cpp divides by it)
    if (p.normalize) sel = std::accumulate(w.begin(), w.end(), 0.0);
  } else {
    for (int j = 0; j < k; ++j) sel += w[j] = prob[ids[j]];
  }
  // Softmax: the probs are prob / sum, so the clamped renormalization divides by max(sel, clamp * sum).
  double denom = p.gating == Gating::Softmax ? sum : 1;
  if (p.normalize) denom = std::max(sel, kMinWeightSum * denom);
  const double scale = p.scale != 0.f ? p.scale : 1.f;
  for (int j = 0; j < k; ++j) weights[j] = static_cast<float>(w[j] / denom * scale);
}

}  // namespace vkmoe
