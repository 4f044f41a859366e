#include "engine/forward/fused_clocks.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace vkmoe {

FusedClocks::FusedClocks(vk::Context& ctx, uint32_t n_layer, uint32_t grid)
    : ctx_(ctx),
      buf_(ctx.create_buffer(uint64_t(n_layer) * grid * vk::kFusedClockSlots * 8, vk::MemoryKind::Device,
                             "fused MoE clocks")),
      n_layer_(n_layer),
      grid_(grid),
      host_(buf_.size() / 8) {
  vk::Recorder r(ctx);
  r.begin();
  r.fill(buf_, 0, buf_.size(), 0);  // 0: a slot no dispatch stamped
  r.submit().wait();
}

void FusedClocks::collect() {
  ctx_.read_buffer(buf_, 0, host_.data(), buf_.size());
  const uint64_t* s = host_.data();
  constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  uint64_t prev_end = 0;
  for (uint32_t il = 0; il < n_layer_; ++il) {
    const uint64_t base = uint64_t(il) * grid_ * vk::kFusedClockSlots;
    auto at = [&](uint32_t w, vk::FusedClock c) { return s[base + uint64_t(w) * vk::kFusedClockSlots + uint32_t(c)]; };
    uint64_t t0 = kNone;
    for (uint32_t w = 0; w < grid_; ++w)
      if (const uint64_t v = at(w, vk::FusedClock::Start)) t0 = std::min(t0, v);
    if (t0 == kNone) {  // not a fused layer
      prev_end = 0;
      continue;
    }
    if (prev_end && t0 > prev_end) {
      gap_ns_ += double(t0 - prev_end);
      ++gaps_;
    }
    prev_end = 0;
    for (uint32_t c = 0; c < uint32_t(vk::FusedClock::Count); ++c) {
      double sum = 0;
      uint64_t last = 0, n = 0;
      for (uint32_t w = 0; w < grid_; ++w) {
        const uint64_t v = at(w, vk::FusedClock(c));
        if (v < t0) continue;  // unstamped (0), or left from an earlier token
        sum += double(v - t0);
        last = std::max(last, v - t0);
        ++n;
      }
      if (n == 0) continue;
      edges_[c].mean_ns += sum / double(n);
      edges_[c].last_ns += double(last);
      ++edges_[c].n;
      if (vk::FusedClock(c) == vk::FusedClock::End) prev_end = t0 + last;
    }
  }
  ++tokens_;
}

std::string FusedClocks::report() const {
  if (tokens_ == 0 || edges_[0].n == 0) return {};
  char line[320];
  std::snprintf(line, sizeof line,
                "fused MoE dispatch, one layer's timeline (device clock as ns; %llu tokens, %.0f layers a token, "
                "%u workgroups), us from its first workgroup's start:\n  %-20s %8s %8s\n",
                (unsigned long long)tokens_, double(edges_[0].n) / double(tokens_), grid_, "edge", "mean", "latest");
  std::string o = line;
  for (uint32_t c = 0; c < uint32_t(vk::FusedClock::Count); ++c) {
    const Edge& e = edges_[c];
    if (e.n == 0) continue;
    std::snprintf(line, sizeof line, "  %-20s %8.2f %8.2f\n", vk::fused_clock_name(vk::FusedClock(c)),
                  e.mean_ns / double(e.n) / 1e3, e.last_ns / double(e.n) / 1e3);
    o += line;
  }
  if (gaps_) {
    std::snprintf(line, sizeof line, "  from a dispatch's last end to the next layer's first start: %.2f us\n",
                  gap_ns_ / double(gaps_) / 1e3);
    o += line;
  }
  return o;
}

}  // namespace vkmoe
