#include "cpu/moe_route.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace vkmoe {

void route_topk(const float* logits, int n_expert, int k, bool normalize, int* ids, float* weights) {
  float mx = *std::max_element(logits, logits + n_expert);
  std::vector<float> p(n_expert);
  double sum = 0;
  for (int e = 0; e < n_expert; ++e) sum += p[e] = std::exp(logits[e] - mx);
  std::vector<int> order(n_expert);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  double sel = 0;
  for (int j = 0; j < k; ++j) sel += p[order[j]];
  double denom = normalize ? sel : sum;
  for (int j = 0; j < k; ++j) {
    ids[j] = order[j];
    weights[j] = static_cast<float>(p[order[j]] / denom);
  }
}

}  // namespace vkmoe
