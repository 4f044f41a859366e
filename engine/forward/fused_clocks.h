#pragma once
// VKMOE_FUSED_CLOCKS=1: the fused MoE decode dispatch's device-clock stamps
// (vk::FusedClock, per workgroup and layer), read after each decoded token
// and reported as one layer's timeline: when its workgroups reach each step's
// edge, counted from the dispatch's first start. The stamps go to device
// memory and are copied back (stamps written across the bus would lengthen
// the steps they time).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/vulkan/vk_moe_fused.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {

class FusedClocks {
 public:
  FusedClocks(vk::Context& ctx, uint32_t n_layer, uint32_t grid);
  const vk::Buffer& buffer() const { return buf_; }
  // After a token's commands completed (reads the stamps back).
  void collect();
  std::string report() const;

 private:
  struct Edge {
    double mean_ns = 0, last_ns = 0;  // over workgroups: the mean, the latest
    uint64_t n = 0;                   // dispatches that stamped it
  };
  vk::Context& ctx_;
  vk::Buffer buf_;
  uint32_t n_layer_, grid_;
  std::vector<uint64_t> host_;
  std::array<Edge, size_t(vk::FusedClock::Count)> edges_{};
  double gap_ns_ = 0;  // a dispatch's last end to the next layer's first start
  uint64_t gaps_ = 0, tokens_ = 0;
};

}  // namespace vkmoe
