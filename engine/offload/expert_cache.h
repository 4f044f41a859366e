#pragma once
// The VRAM expert cache of the offload modes: per MoE layer a pool of slots
// (one expert's gate/up/down each) governed by an SLRU policy, filled from a
// background thread over the transfer queue. Only the thread that calls
// lookup/admit touches the policies; the upload thread only copies.
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/model/model.h"
#include "engine/offload/route_stats.h"
#include "engine/offload/slru_policy.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {

class HostExperts;

class ExpertCache {
 public:
  // fill_on_miss: ExpertCache mode (misses are admitted); otherwise slots
  // are only filled once (pinned experts of cpu-moe mode).
  ExpertCache(vk::Context& ctx, const Model& m, int slots, bool fill_on_miss, RouteStats& stats);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  int slots() const { return slots_; }
  const vk::Buffer& gate_pool(int il) const { return pools_[il].gate; }
  const vk::Buffer& up_pool(int il) const { return pools_[il].up; }
  const vk::Buffer& down_pool(int il) const { return pools_[il].down; }

  // The slot holding (il, expert) when it is ready; appends to `waits` the
  // point its copy completes if still in flight on the GPU.
  std::optional<int> lookup(int il, int expert, std::vector<vk::SyncPoint>& waits);
  // Queues a fill of (il, expert) into a slot (evicting by SLRU) when the
  // policy admits it.
  void admit(int il, int expert);
  // Reserves a slot for (il, expert) that the caller fills itself (e.g. by a
  // device copy recorded in its own command buffer); report with filled().
  std::optional<int> reserve(int il, int expert);
  void filled(int il, int slot, vk::SyncPoint done);
  // Marks finished background fills as ready; rethrows what stopped the
  // background thread (e.g. vk::DeviceLost).
  void drain();
  // Pins the pin_per_layer most frequently used resident experts per layer.
  void pin_hot(int pin_per_layer);
  // From now on slots are filled by transfer-queue copies from host's pinned
  // copy of the experts (no CPU copy into staging memory). Call before the
  // first admit; host must outlive the cache.
  void copy_from(const HostExperts& host);
  bool pinned() const { return pinned_; }

 private:
  struct Job {
    int layer, expert, slot;
  };
  struct Pools {
    vk::Buffer gate, up, down;
  };
  vk::SyncPoint upload(const Job& j);
  void upload_loop();

  const Model& m_;
  int slots_;
  bool fill_on_miss_;
  RouteStats& stats_;
  std::vector<Pools> pools_;
  std::vector<std::unique_ptr<SlruPolicy>> policy_;     // per layer
  std::vector<std::vector<vk::SyncPoint>> slot_ready_;  // per layer, per slot
  std::unique_ptr<vk::Uploader> uploader_;  // staging, created by the upload thread when first needed
  vk::Context& ctx_;
  const HostExperts* host_ = nullptr;                  // set by copy_from
  std::vector<std::unique_ptr<vk::Recorder>> copiers_;  // used round robin by the upload thread
  size_t next_copier_ = 0;
  bool pinned_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<std::pair<Job, vk::SyncPoint>> done_;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace vkmoe
