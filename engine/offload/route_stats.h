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
    // Ratios of sums; 0 when the denominator is 0.
    double precision() const;  // correct / predicted
    double recall() const;     // correct / actual (with |pred| = |actual| = k both are |∩|/k)
    double hit_rate() const;   // hits / (hits + misses)
    Totals& operator+=(const Totals& o);
  };

  explicit RouteStats(int n_layer);

  // One token at one layer: the predicted expert set against the experts the
  // router actually chose. Duplicates within a list count once.
  void record_routing(int layer, std::span<const int> predicted, std::span<const int> actual);
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

  // Per-layer and total table: prediction precision/recall %, cache hit
  // rate %, experts on GPU/CPU, MiB uploaded and MiB per token.
  std::string report() const;

 private:
  Totals& at(int layer);
  std::vector<Totals> layers_;
  uint64_t tokens_ = 0;
};

}  // namespace vkmoe
