#pragma once
// Offload-mode prompt processing: for each expert a ubatch routes tokens to
// that is not in a VRAM slot, choose between uploading it once into a staging
// slot (then the GPU computes all its tokens) and computing its tokens on the
// CPU in one pass that reads its weights once. Uploads and CPU work run at the
// same time, so experts go greedily (most tokens first) to whichever side
// finishes the layer sooner, from measured costs. Pure policy, no Vulkan.
#include <cstdint>
#include <vector>

namespace vkmoe {

struct ExpertDemand {
  int expert = 0;
  int tokens = 0;
  uint64_t bytes = 0;  // gate + up + down
};

struct SplitCosts {
  double upload_bytes_per_s = 16e9;
  // CPU seconds for one expert = bytes * max(tokens, kCpuMinTokens) * cpu_s_per_token_byte:
  // compute grows with tokens; below a few tokens reading the weights dominates.
  double cpu_s_per_token_byte = 1e-10;
  static constexpr int kCpuMinTokens = 4;
  double cpu_seconds(const ExpertDemand& d) const;
  double upload_seconds(const ExpertDemand& d) const { return double(d.bytes) / upload_bytes_per_s; }
  // Folds a measured CPU pass (seconds for these demands) into the estimate.
  void observe_cpu(const std::vector<ExpertDemand>& done, double seconds);
};

// upload[i] says whether demands[i] is uploaded (at most max_uploads are).
std::vector<bool> split_experts(const std::vector<ExpertDemand>& demands, const SplitCosts& costs, int max_uploads);

}  // namespace vkmoe
