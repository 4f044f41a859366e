#pragma once
// Next-token sampling: greedy, or repeat penalty -> top-k -> temperature
// softmax -> top-p -> min-p -> seeded draw.
#include <cstdint>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "base/error.h"

namespace vkmoe {

struct SamplerParams {
  float temperature = 0.f;   // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.f;         // <= 0: off
  float repeat_penalty = 1.f;  // 1: off (applies to greedy too)
  int repeat_last_n = 64;    // tokens of history penalized; < 0: all accepted
  uint64_t seed = 0;         // 0: random
};

class Sampler {
 public:
  explicit Sampler(SamplerParams p);
  // Throws Error if n_vocab <= 0. Lowest id wins ties in greedy mode.
  int32_t sample(const float* logits, int n_vocab);
  void accept(int32_t id);  // records a token for the repeat penalty
  const SamplerParams& params() const { return p_; }
  uint64_t seed() const { return seed_; }  // the seed in use

  // The candidate distribution the next draw uses (id, probability), after all
  // filters; exposed for tests. Greedy returns the single argmax with 1.0.
  std::vector<std::pair<int32_t, float>> distribution(const float* logits, int n_vocab) const;

 private:
  SamplerParams p_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;
};

}  // namespace vkmoe
