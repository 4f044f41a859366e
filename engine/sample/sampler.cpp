#include "engine/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace vkmoe {

Sampler::Sampler(SamplerParams p) : p_(p) {
  seed_ = p_.seed != 0 ? p_.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  rng_.seed(seed_);
}

void Sampler::accept(int32_t id) {
  if (p_.repeat_last_n == 0) return;
  history_.push_back(id);
  if (p_.repeat_last_n > 0)
    while (history_.size() > static_cast<size_t>(p_.repeat_last_n)) history_.pop_front();
}

std::vector<std::pair<int32_t, float>> Sampler::distribution(const float* logits, int n_vocab) const {
  if (n_vocab <= 0 || logits == nullptr)
    throw Error("sampler: no logits (n_vocab = " + std::to_string(n_vocab) + ")");
  std::vector<float> l(logits, logits + n_vocab);
  for (float& x : l)
    if (std::isnan(x)) x = -INFINITY;
  if (p_.repeat_penalty != 1.f) {
    std::unordered_set<int32_t> seen;
    for (int32_t id : history_) {
      if (id < 0 || id >= n_vocab || !seen.insert(id).second) continue;
      l[id] = l[id] > 0 ? l[id] / p_.repeat_penalty : l[id] * p_.repeat_penalty;
    }
  }
  if (p_.temperature <= 0.f) {
    const auto best = std::max_element(l.begin(), l.end());  // first of the maxima
    return {{static_cast<int32_t>(best - l.begin()), 1.f}};
  }

  std::vector<std::pair<float, int32_t>> cand(n_vocab);
  for (int k = 0; k < n_vocab; ++k) cand[k] = {l[k], k};
  auto higher = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  if (p_.top_k > 0 && p_.top_k < n_vocab) {
    std::partial_sort(cand.begin(), cand.begin() + p_.top_k, cand.end(), higher);
    cand.resize(p_.top_k);
  } else {
    std::sort(cand.begin(), cand.end(), higher);
  }

  // Softmax with temperature (in double), then the nucleus and min-p cuts.
  const double max_logit = cand[0].first;
  if (!std::isfinite(max_logit)) return {{cand[0].second, 1.f}};
  std::vector<double> prob(cand.size());
  double sum = 0;
  for (size_t k = 0; k < cand.size(); ++k) sum += prob[k] = std::exp((cand[k].first - max_logit) / p_.temperature);
  size_t keep = cand.size();
  if (p_.top_p < 1.f) {
    double cum = 0;
    for (size_t k = 0; k < keep; ++k) {
      cum += prob[k] / sum;
      if (cum >= p_.top_p) {
        keep = k + 1;
        break;
      }
    }
  }
  if (p_.min_p > 0.f) {
    const double floor = p_.min_p * prob[0];
    size_t k = 1;
    while (k < keep && prob[k] >= floor) ++k;
    keep = k;
  }
  double kept_sum = 0;
  for (size_t k = 0; k < keep; ++k) kept_sum += prob[k];
  std::vector<std::pair<int32_t, float>> out(keep);
  for (size_t k = 0; k < keep; ++k) out[k] = {cand[k].second, static_cast<float>(prob[k] / kept_sum)};
  return out;
}

int32_t Sampler::sample(const float* logits, int n_vocab) {
  const auto dist = distribution(logits, n_vocab);
  if (dist.size() == 1) return dist[0].first;
  double total = 0;
  for (const auto& d : dist) total += d.second;
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;  // uniform in [0, total)
  double cum = 0;
  for (const auto& d : dist) {
    cum += d.second;
    if (u < cum) return d.first;
  }
  return dist.back().first;
}

}  // namespace vkmoe
