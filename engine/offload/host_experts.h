#pragma once
// Routed-expert weights copied once into host memory the GPU can read
// directly (pinned, host-visible), so prompt processing streams experts into
// VRAM with plain transfer-queue copies: no CPU copy per upload.
#include <vector>

#include "engine/model/model.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {

class ThreadPool;

class HostExperts {
 public:
  // pool (may be null): its threads make the copies.
  HostExperts(vk::Context& ctx, const Model& m, ThreadPool* pool);
  // Records copies of expert `e` of layer il into slot `slot` of the three pools.
  void record_copy(vk::Recorder& r, int il, int e, const vk::Buffer& gate_pool, const vk::Buffer& up_pool,
                   const vk::Buffer& down_pool, int slot) const;

 private:
  struct Layer {
    vk::Buffer gate, up, down;
  };
  const Model& m_;
  std::vector<Layer> layers_;
};

// Measured host-to-VRAM copy rate (bytes/s) over the transfer queue.
double measure_upload_rate(vk::Context& ctx);

}  // namespace vkmoe
