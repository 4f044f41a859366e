#pragma once
// Routing and expert-cache statistics for --expert-stats. Pure counters.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vkmoe {

class RouteStats {
 public:
  struct Totals {
    uint64_t routings = 0;   // (token, layer) pairs recorded with record_routing
    uint64_t predicted = 0;  // distinct predicted experts, summed
    uint64_t actual = 0;     // distinct actual top-k experts, summed
    uint64_t correct = 0;    // |predicted ∩ actual|, summed
    uint64_t hits = 0, misses = 0;  // expert cache
    uint64_t bytes_uploaded = 0;
    uint64_t gpu_experts = 0, cpu_experts = 0;  // expert evaluations by device
    uint64_t reuse_pairs = 0;  // routings recorded with record_route after one at the same layer
    uint64_t reused = 0;       // experts of such a routing also chosen by the previous one, summed
    uint64_t reuse_of = 0;     // experts of such routings, summed
    // Ratios of sums; 0 when the denominator is 0.
    double precision() const;  // correct / predicted
    double recall() const;     // correct / actual (with |pred| = |actual| = k both are |∩|/k)
    double hit_rate() const;   // hits / (hits + misses)
    double reuse() const;      // reused / reuse_of: token-to-token overlap of expert sets
    Totals& operator+=(const Totals& o);
  };

  // n_expert bounds the ids record_route accepts.
  RouteStats(int n_layer, int n_expert);

  // One token at one layer: the predicted expert set against the experts the
  // router actually chose. Duplicates within a list count once.
  void record_routing(int layer, std::span<const int> predicted, std::span<const int> actual);
  // The experts the router chose for one token at one layer, for the routing
  // statistics (expert popularity, reuse from the previous token).
  void record_route(int layer, std::span<const int> experts);
  void record_cache(int layer, uint64_t hits, uint64_t misses);
  void record_upload(int layer, uint64_t bytes);
  void record_compute(int layer, uint64_t on_gpu, uint64_t on_cpu);
  void add_tokens(uint64_t n = 1);  // tokens processed (all layers)
  void reset();

  int n_layer() const { return int(layers_.size()); }
  uint64_t tokens() const { return tokens_; }
  const Totals& layer(int l) const { return layers_.at(size_t(l)); }
  Totals total() const;
  double mib_per_token() const;  // total bytes uploaded / tokens / 2^20; 0 without tokens
  // Share of a layer's recorded routes that went to its most chosen quarter of
  // the experts (n_expert / 4, at least 1); 0 before any. Uniform routing
  // gives 25% plus sampling noise. total_top_quarter_share: over all layers.
  double top_quarter_share(int layer) const;
  double total_top_quarter_share() const;

  // Per-layer and total table: prediction precision/recall %, cache hit
  // rate %, token-to-token expert reuse %, top-quarter share %, experts on
  // GPU/CPU, MiB uploaded and MiB per token.
  std::string report() const;

 private:
  Totals& at(int layer);
  std::vector<Totals> layers_;
  std::vector<std::vector<uint64_t>> chosen_;  // per layer: times each expert was chosen
  std::vector<std::vector<int>> last_route_;   // per layer: the previous token's experts, sorted
  uint64_t tokens_ = 0;
};

}  // namespace vkmoe
