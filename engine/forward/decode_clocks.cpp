#include "engine/forward/decode_clocks.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace vkmoe {
namespace {

constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

vk::Buffer zeroed_buffer(vk::Context& ctx, uint64_t bytes, const char* name) {
  vk::Buffer b = ctx.create_buffer(bytes, vk::MemoryKind::Device, name);
  vk::Recorder r(ctx);
  r.begin();
  r.fill(b, 0, b.size(), 0);  // 0: a slot no dispatch stamped
  r.submit().wait();
  return b;
}

// Running sums of one edge over dispatches: each dispatch adds the earliest,
// mean and latest of its workgroups' stamps in [from, to], counted from `from`.
struct EdgeSum {
  double first = 0, sum = 0, last = 0;
  uint64_t n = 0;
  void add(uint64_t v, uint64_t from) {
    const double t = double(int64_t(v - from));  // negative: before `from`
    first = n ? std::min(first, t) : t;
    last = std::max(last, t);
    sum += t;
    ++n;
  }
};

}  // namespace

DecodeClocks::DecodeClocks(vk::Context& ctx, uint32_t n_layer, uint32_t grid)
    : ctx_(ctx),
      fused_(zeroed_buffer(ctx, uint64_t(n_layer) * grid * vk::kFusedClockSlots * 8, "fused MoE clocks")),
      attn_(zeroed_buffer(ctx, uint64_t(n_layer) * vk::kAttnClockWorkgroups * vk::kAttnClockSlots * 8,
                          "attention clocks")),
      n_layer_(n_layer),
      grid_(grid),
      fused_host_(fused_.size() / 8),
      attn_host_(attn_.size() / 8),
      per_layer_(vk::env_on("VKMOE_FUSED_CLOCKS_LAYERS")),
      layer_edges_(per_layer_ ? n_layer : 0) {}

void DecodeClocks::collect() {
  ctx_.read_buffer(fused_, 0, fused_host_.data(), fused_.size());
  ctx_.read_buffer(attn_, 0, attn_host_.data(), attn_.size());
  const uint64_t* s = fused_host_.data();
  auto at = [&](uint32_t il, uint32_t w, vk::FusedClock c) {
    return s[fused_base(int(il)) + uint64_t(w) * vk::kFusedClockSlots + uint32_t(c)];
  };
  // Each fused layer's first start and last end (0: not a fused layer).
  std::vector<uint64_t> t0(n_layer_, 0), t_end(n_layer_, 0);
  for (uint32_t il = 0; il < n_layer_; ++il) {
    uint64_t first = kNone;
    for (uint32_t w = 0; w < grid_; ++w)
      if (const uint64_t v = at(il, w, vk::FusedClock::Start)) first = std::min(first, v);
    if (first == kNone) continue;
    t0[il] = first;
    for (uint32_t w = 0; w < grid_; ++w) t_end[il] = std::max(t_end[il], at(il, w, vk::FusedClock::End));
  }
  for (uint32_t il = 0; il < n_layer_; ++il) {
    if (!t0[il]) continue;
    uint64_t waited = 0;  // chained: the latest workgroup's end of the wait for the attention
    for (uint32_t c = 0; c < uint32_t(vk::FusedClock::Count); ++c) {
      EdgeSum e;
      for (uint32_t w = 0; w < grid_; ++w) {
        const uint64_t v = at(il, w, vk::FusedClock(c));
        if (v >= t0[il]) e.add(v, t0[il]);  // not unstamped (0) or left from an earlier token
      }
      if (e.n == 0) continue;
      edges_[c].add(e.first, e.sum / double(e.n), e.last);
      if (per_layer_) layer_edges_[il][c].add(e.first, e.sum / double(e.n), e.last);
      if (vk::FusedClock(c) == vk::FusedClock::Waited) waited = t0[il] + uint64_t(e.last);
    }
    if (il == 0 || !t0[il - 1] || t_end[il - 1] < t0[il - 1]) continue;
    const uint64_t prev_end = t_end[il - 1], work = waited ? waited : t0[il];
    if (t0[il] > prev_end) {  // not chained: the next dispatch started after it
      gap_ns_ += double(t0[il] - prev_end);
      ++gaps_;
    }
    work_ns_ += double(int64_t(work - prev_end));
    ++works_;
    // This layer's attention ran after the fused dispatch before started (chained:
    // its workgroups may start, and wait, before that one ends) and before this one ended.
    const uint64_t* a = attn_host_.data() + attention_base(int(il));
    std::array<EdgeSum, size_t(vk::AttnClock::Count)> e{};
    uint32_t wgs = 0;
    for (uint32_t w = 0; w < vk::kAttnClockWorkgroups; ++w) {
      const uint64_t* st = a + uint64_t(w) * vk::kAttnClockSlots;
      const uint64_t start = st[uint32_t(vk::AttnClock::Start)];
      if (start < t0[il - 1] || start > t_end[il]) continue;  // unstamped, or left from an earlier token
      ++wgs;
      for (uint32_t c = 0; c < uint32_t(vk::AttnClock::Count); ++c)
        if (st[c] >= t0[il - 1] && st[c] <= t_end[il]) e[c].add(st[c], prev_end);
    }
    if (wgs) {
      attn_wgs_ += wgs;
      ++attn_gaps_;
      for (uint32_t c = 0; c < uint32_t(vk::AttnClock::Count); ++c)
        if (e[c].n) attn_edges_[c].add(e[c].first, e[c].sum / double(e[c].n), e[c].last);
      attn_gap_ns_ += double(int64_t(work - prev_end)) - e[uint32_t(vk::AttnClock::End)].last;
    }
  }
  ++tokens_;
}

std::string DecodeClocks::report() const {
  if (tokens_ == 0 || edges_[0].n == 0) return {};
  char line[320];
  std::snprintf(line, sizeof line,
                "fused MoE dispatch, one layer's timeline (device clock as ns; %llu tokens, %.0f layers a token, "
                "%u workgroups), us from its first workgroup's start:\n  %-22s %8s %8s\n",
                (unsigned long long)tokens_, double(edges_[0].n) / double(tokens_), grid_, "edge", "mean", "latest");
  std::string o = line;
  for (uint32_t c = 0; c < uint32_t(vk::FusedClock::Count); ++c) {
    const Edge& e = edges_[c];
    if (e.n == 0) continue;
    std::snprintf(line, sizeof line, "  %-22s %8.2f %8.2f\n", vk::fused_clock_name(vk::FusedClock(c)),
                  e.mean_ns / double(e.n) / 1e3, e.last_ns / double(e.n) / 1e3);
    o += line;
  }
  if (per_layer_) {
    o += "  each layer, the latest workgroup at:";
    for (uint32_t c = 0; c < uint32_t(vk::FusedClock::Count); ++c)
      if (edges_[c].n) o += std::string(c ? ", " : " ") + vk::fused_clock_name(vk::FusedClock(c));
    o += "\n";
    for (size_t il = 0; il < layer_edges_.size(); ++il) {
      if (layer_edges_[il][0].n == 0) continue;
      std::snprintf(line, sizeof line, "  layer %3zu", il);
      o += line;
      for (uint32_t c = 0; c < uint32_t(vk::FusedClock::Count); ++c) {
        const Edge& e = layer_edges_[il][c];
        if (!edges_[c].n) continue;
        std::snprintf(line, sizeof line, " %6.2f", e.n ? e.last_ns / double(e.n) / 1e3 : 0.0);
        o += line;
      }
      o += "\n";
    }
  }
  if (gaps_) {
    std::snprintf(line, sizeof line, "  from a dispatch's last end to the next layer's first start: %.2f us\n",
                  gap_ns_ / double(gaps_) / 1e3);
    o += line;
  }
  if (works_) {
    std::snprintf(line, sizeof line,
                  "  from a dispatch's last end to the next layer's block at work (its first start, or chained its "
                  "latest end of the wait for the attention): %.2f us\n",
                  work_ns_ / double(works_) / 1e3);
    o += line;
  }
  if (attn_gaps_) {
    std::snprintf(line, sizeof line,
                  "attention between them (%.0f of %llu layer gaps, %.1f workgroups), us from the fused dispatch's "
                  "last end (chained: before it where negative):\n  %-22s %8s %8s %8s\n",
                  double(attn_gaps_), (unsigned long long)works_, attn_wgs_ / double(attn_gaps_), "edge", "first",
                  "mean", "latest");
    o += line;
    for (uint32_t c = 0; c < uint32_t(vk::AttnClock::Count); ++c) {
      const Edge& e = attn_edges_[c];
      if (e.n == 0) continue;
      std::snprintf(line, sizeof line, "  %-22s %8.2f %8.2f %8.2f\n", vk::attn_clock_name(vk::AttnClock(c)),
                    e.first_ns / double(e.n) / 1e3, e.mean_ns / double(e.n) / 1e3, e.last_ns / double(e.n) / 1e3);
      o += line;
    }
    std::snprintf(line, sizeof line, "  from the attention's last end to the next block at work: %.2f us\n",
                  attn_gap_ns_ / double(attn_gaps_) / 1e3);
    o += line;
  }
  return o;
}

}  // namespace vkmoe
