#pragma once
// VKMOE_FUSED_CLOCKS=1: device-clock stamps of a decoded token's fused MoE
// dispatches (vk::FusedClock, per workgroup and layer) and of the attention
// dispatch before each of them (vk::AttnClock, the one-token kernel), read
// after each token and reported as one layer's timelines: when the
// workgroups reach each edge, the fused dispatch's counted from its first
// start, the attention's from the previous fused dispatch's last end (chained
// layers, LayerProgram::FusedDecode: each may start before the one it waits
// for ends). The stamps go to device memory and are copied back (stamps
// written across the bus would lengthen the steps they time).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/vulkan/vk_attention.h"
#include "engine/vulkan/vk_moe_fused.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {

class DecodeClocks {
 public:
  DecodeClocks(vk::Context& ctx, uint32_t n_layer, uint32_t grid);
  const vk::Buffer& fused() const { return fused_; }
  const vk::Buffer& attention() const { return attn_; }
  uint32_t grid() const { return grid_; }
  // Where layer il's stamps start in each buffer.
  uint32_t fused_base(int il) const { return uint32_t(il) * grid_ * vk::kFusedClockSlots; }
  static uint32_t attention_base(int il) { return uint32_t(il) * vk::kAttnClockWorkgroups * vk::kAttnClockSlots; }
  // After a token's commands completed (reads the stamps back).
  void collect();
  std::string report() const;

 private:
  // One edge's running sums over dispatches: the earliest, mean and latest
  // workgroup of each (from one dispatch's EdgeSum, decode_clocks.cpp).
  struct Edge {
    double first_ns = 0, mean_ns = 0, last_ns = 0;
    uint64_t n = 0;  // dispatches that stamped it
    void add(double first, double mean, double last) {
      first_ns += first;
      mean_ns += mean;
      last_ns += last;
      ++n;
    }
  };
  vk::Context& ctx_;
  vk::Buffer fused_, attn_;
  uint32_t n_layer_, grid_;
  std::vector<uint64_t> fused_host_, attn_host_;
  std::array<Edge, size_t(vk::FusedClock::Count)> edges_{};
  // VKMOE_FUSED_CLOCKS_LAYERS=1: each layer's latest workgroup per edge too.
  bool per_layer_ = false;
  std::vector<std::array<Edge, size_t(vk::FusedClock::Count)>> layer_edges_;
  std::array<Edge, size_t(vk::AttnClock::Count)> attn_edges_{};
  double gap_ns_ = 0;       // a fused dispatch's last end to the next layer's first start (not chained)
  double work_ns_ = 0;      // to the next layer's block at work (chained: its wait for the attention done)
  double attn_gap_ns_ = 0;  // the attention's last end to that
  double attn_wgs_ = 0;     // workgroups that stamped
  uint64_t gaps_ = 0, works_ = 0, attn_gaps_ = 0, tokens_ = 0;
};

}  // namespace vkmoe
