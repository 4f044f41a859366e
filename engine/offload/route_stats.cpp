#include "engine/offload/route_stats.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <utility>

#include "base/error.h"

namespace vkmoe {

namespace {

double ratio(uint64_t num, uint64_t den) { return den ? double(num) / double(den) : 0.0; }

std::string pct(uint64_t num, uint64_t den) {
  if (den == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * double(num) / double(den));
  return buf;
}

std::vector<int> distinct(std::span<const int> v) {
  std::vector<int> out(v.begin(), v.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

double RouteStats::Totals::precision() const { return ratio(correct, predicted); }
double RouteStats::Totals::recall() const { return ratio(correct, actual); }
double RouteStats::Totals::hit_rate() const { return ratio(hits, hits + misses); }
double RouteStats::Totals::reuse() const { return ratio(reused, reuse_of); }

RouteStats::Totals& RouteStats::Totals::operator+=(const Totals& o) {
  routings += o.routings;
  predicted += o.predicted;
  actual += o.actual;
  correct += o.correct;
  hits += o.hits;
  misses += o.misses;
  bytes_uploaded += o.bytes_uploaded;
  gpu_experts += o.gpu_experts;
  cpu_experts += o.cpu_experts;
  reuse_pairs += o.reuse_pairs;
  reused += o.reused;
  reuse_of += o.reuse_of;
  return *this;
}

RouteStats::RouteStats(int n_layer, int n_expert) {
  if (n_layer < 0 || n_expert < 0) throw Error("RouteStats: negative layer or expert count");
  layers_.resize(size_t(n_layer));
  chosen_.assign(size_t(n_layer), std::vector<uint64_t>(size_t(n_expert)));
  last_route_.resize(size_t(n_layer));
}

RouteStats::Totals& RouteStats::at(int layer) {
  if (layer < 0 || layer >= n_layer())
    throw Error("RouteStats: layer " + std::to_string(layer) + " outside 0.." +
                std::to_string(n_layer() - 1));
  return layers_[size_t(layer)];
}

void RouteStats::record_routing(int layer, std::span<const int> predicted,
                                std::span<const int> actual) {
  Totals& t = at(layer);
  const std::vector<int> p = distinct(predicted), a = distinct(actual);
  std::vector<int> both;
  std::set_intersection(p.begin(), p.end(), a.begin(), a.end(), std::back_inserter(both));
  t.routings++;
  t.predicted += p.size();
  t.actual += a.size();
  t.correct += both.size();
}

void RouteStats::record_route(int layer, std::span<const int> experts) {
  Totals& t = at(layer);
  std::vector<int> now = distinct(experts);
  std::vector<uint64_t>& chosen = chosen_[size_t(layer)];
  for (int e : now) {
    if (e < 0 || size_t(e) >= chosen.size())
      throw Error("RouteStats: expert " + std::to_string(e) + " outside 0.." + std::to_string(chosen.size() - 1));
    chosen[size_t(e)]++;
  }
  std::vector<int>& last = last_route_[size_t(layer)];
  if (!last.empty()) {
    std::vector<int> both;
    std::set_intersection(now.begin(), now.end(), last.begin(), last.end(), std::back_inserter(both));
    t.reuse_pairs++;
    t.reused += both.size();
    t.reuse_of += now.size();
  }
  last = std::move(now);
}

namespace {

// Routes to the n most chosen experts, and all routes.
std::pair<uint64_t, uint64_t> top_routes(std::vector<uint64_t> chosen) {
  const size_t n = std::max<size_t>(1, chosen.size() / 4);
  if (chosen.empty()) return {0, 0};
  uint64_t all = 0, top = 0;
  for (uint64_t c : chosen) all += c;
  std::nth_element(chosen.begin(), chosen.begin() + std::ptrdiff_t(n - 1), chosen.end(), std::greater<>());
  for (size_t i = 0; i < n; ++i) top += chosen[i];
  return {top, all};
}

// top_routes summed over the layers.
std::pair<uint64_t, uint64_t> top_routes_all_layers(const std::vector<std::vector<uint64_t>>& chosen) {
  uint64_t top = 0, all = 0;
  for (const auto& c : chosen) {
    const auto [t, a] = top_routes(c);
    top += t;
    all += a;
  }
  return {top, all};
}

}  // namespace

double RouteStats::top_quarter_share(int layer) const {
  if (layer < 0 || layer >= n_layer()) throw Error("RouteStats: no layer " + std::to_string(layer));
  const auto [top, all] = top_routes(chosen_[size_t(layer)]);
  return ratio(top, all);
}

double RouteStats::total_top_quarter_share() const {
  const auto [top, all] = top_routes_all_layers(chosen_);
  return ratio(top, all);
}

void RouteStats::record_cache(int layer, uint64_t hits, uint64_t misses) {
  Totals& t = at(layer);
  t.hits += hits;
  t.misses += misses;
}

void RouteStats::record_upload(int layer, uint64_t bytes) { at(layer).bytes_uploaded += bytes; }

void RouteStats::record_compute(int layer, uint64_t on_gpu, uint64_t on_cpu) {
  Totals& t = at(layer);
  t.gpu_experts += on_gpu;
  t.cpu_experts += on_cpu;
}

void RouteStats::add_tokens(uint64_t n) { tokens_ += n; }

void RouteStats::reset() {
  std::fill(layers_.begin(), layers_.end(), Totals{});
  for (auto& c : chosen_) std::fill(c.begin(), c.end(), 0);
  for (auto& r : last_route_) r.clear();
  tokens_ = 0;
}

RouteStats::Totals RouteStats::total() const {
  Totals sum;
  for (const auto& t : layers_) sum += t;
  return sum;
}

double RouteStats::mib_per_token() const {
  return tokens_ ? double(total().bytes_uploaded) / double(1u << 20) / double(tokens_) : 0.0;
}

std::string RouteStats::report() const {
  std::string out;
  char line[256];
  auto row = [&](const std::string& label, const Totals& t, std::pair<uint64_t, uint64_t> top_quarter) {
    const double mib = double(t.bytes_uploaded) / double(1u << 20);
    std::snprintf(line, sizeof line, "%7s %9s %9s %9s %9s %9s %10llu %10llu %10.1f %10.3f\n",
                  label.c_str(), pct(t.correct, t.predicted).c_str(),
                  pct(t.correct, t.actual).c_str(), pct(t.hits, t.hits + t.misses).c_str(),
                  pct(t.reused, t.reuse_of).c_str(), pct(top_quarter.first, top_quarter.second).c_str(),
                  static_cast<unsigned long long>(t.gpu_experts),
                  static_cast<unsigned long long>(t.cpu_experts), mib,
                  tokens_ ? mib / double(tokens_) : 0.0);
    out += line;
  };
  std::snprintf(line, sizeof line, "expert stats: %llu tokens, %d layers\n",
                static_cast<unsigned long long>(tokens_), n_layer());
  out += line;
  std::snprintf(line, sizeof line, "%7s %9s %9s %9s %9s %9s %10s %10s %10s %10s\n", "layer", "pred-prec",
                "pred-rec", "hit-rate", "reuse", "top-25%", "gpu-exp", "cpu-exp", "MiB-up", "MiB/token");
  out += line;
  for (int l = 0; l < n_layer(); ++l) row(std::to_string(l), layers_[size_t(l)], top_routes(chosen_[size_t(l)]));
  row("total", total(), top_routes_all_layers(chosen_));
  return out;
}

}  // namespace vkmoe
