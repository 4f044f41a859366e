// Queues with timeline semaphores (SyncPoint), timestamp pools and command recording (Recorder).
#include "engine/vulkan/vk_runtime.h"

#include <chrono>
#include <thread>

#include "engine/vulkan/device_lost.h"
#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {

bool SyncPoint::reached() const { return !queue || queue->completed() >= value; }

void SyncPoint::wait() const {
  if (queue) queue->wait(value);
}

SyncPoint Queue::submit(std::span<const VkCommandBuffer> cbs, std::span<const SyncPoint> waits) {
  std::vector<VkSemaphore> wait_sems;
  std::vector<uint64_t> wait_values;
  std::vector<VkPipelineStageFlags> wait_stages;
  for (const SyncPoint& w : waits) {
    if (!w.queue || w.value == 0) continue;
    wait_sems.push_back(w.queue->timeline());
    wait_values.push_back(w.value);
    wait_stages.push_back(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t value = last_submitted_.load() + 1;
  VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ts.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
  ts.pWaitSemaphoreValues = wait_values.data();
  ts.signalSemaphoreValueCount = 1;
  ts.pSignalSemaphoreValues = &value;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ts;
  si.waitSemaphoreCount = static_cast<uint32_t>(wait_sems.size());
  si.pWaitSemaphores = wait_sems.data();
  si.pWaitDstStageMask = wait_stages.data();
  si.commandBufferCount = static_cast<uint32_t>(cbs.size());
  si.pCommandBuffers = cbs.data();
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &timeline_;
  check(vkQueueSubmit(queue_, 1, &si, VK_NULL_HANDLE), "vkQueueSubmit");
  last_submitted_.store(value);
  return SyncPoint{this, value};
}

uint64_t Queue::completed() const {
  uint64_t v = 0;
  check(vkGetSemaphoreCounterValue(device_, timeline_, &v), "vkGetSemaphoreCounterValue");
  return v;
}

void Queue::wait(uint64_t value) const {
  if (value == 0) return;
  if (value > last_submitted_.load())
    throw Error("internal error: waiting for timeline value " + std::to_string(value) +
                " that was never submitted");
  if (device_was_lost()) check(VK_ERROR_DEVICE_LOST, "an earlier command");  // it would never signal
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &timeline_;
  wi.pValues = &value;
  VkResult r = VK_NOT_READY;
  if (poll_ns_ > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(poll_ns_);
    uint64_t reached = 0;
    do {
      if (vkGetSemaphoreCounterValue(device_, timeline_, &reached) != VK_SUCCESS) break;  // the wait reports it
      if (reached >= value) r = VK_SUCCESS;
      else std::this_thread::yield();
    } while (r != VK_SUCCESS && std::chrono::steady_clock::now() < until);
  }
  if (r != VK_SUCCESS) r = vkWaitSemaphores(device_, &wi, UINT64_MAX);
  if (r == VK_SUCCESS && device_lost_fault_fires()) r = VK_ERROR_DEVICE_LOST;
  check(r, "vkWaitSemaphores");
}


// ---------------------------------------------------------------- TimestampPool

TimestampPool::TimestampPool(Context& ctx, uint32_t count) : ctx_(ctx), count_(count) {
  if (!ctx.info().timestamps) throw Error("this Vulkan device does not support timestamps on its compute queue");
  VkQueryPoolCreateInfo ci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = count;
  check(vkCreateQueryPool(ctx.device(), &ci, nullptr, &pool_), "vkCreateQueryPool");
}

TimestampPool::~TimestampPool() { vkDestroyQueryPool(ctx_.device(), pool_, nullptr); }

std::vector<double> TimestampPool::read_ns(uint32_t first, uint32_t count) const {
  std::vector<uint64_t> ticks(count);
  check(vkGetQueryPoolResults(ctx_.device(), pool_, first, count, count * sizeof(uint64_t), ticks.data(),
                              sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
  std::vector<double> ns(count);
  for (uint32_t i = 0; i < count; ++i) ns[i] = static_cast<double>(ticks[i]) * ctx_.info().timestamp_period_ns;
  return ns;
}

// ---------------------------------------------------------------- Recorder

Recorder::Recorder(Context& ctx, Queue* queue) : ctx_(ctx), queue_(queue ? queue : &ctx.compute_queue()) {
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_->family();
  check(vkCreateCommandPool(ctx.device(), &pci, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult r = vkAllocateCommandBuffers(ctx.device(), &ai, &cb_);
  if (r != VK_SUCCESS) {
    vkDestroyCommandPool(ctx.device(), pool_, nullptr);
    check(r, "vkAllocateCommandBuffers");
  }
}

Recorder::~Recorder() {
  try {
    last_.wait();
  } catch (...) {
    ctx_.idle_for_teardown();
  }
  if (recording_ && !dry_) vkEndCommandBuffer(cb_);
  for (VkDescriptorPool p : desc_pools_) vkDestroyDescriptorPool(ctx_.device(), p, nullptr);
  vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
}

void Recorder::begin() {
  if (recording_) throw Error("internal error: Recorder::begin while already recording");
  last_.wait();
  check(vkResetCommandBuffer(cb_, 0), "vkResetCommandBuffer");
  for (VkDescriptorPool p : desc_pools_) vkResetDescriptorPool(ctx_.device(), p, 0);
  desc_pool_cur_ = 0;
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
  recording_ = true;
  dry_ = false;
  has_commands_ = false;
  bound_ = nullptr;
  dispatches_ = 0;
}

void Recorder::begin_dry() {
  if (recording_) throw Error("internal error: Recorder::begin_dry while already recording");
  recording_ = dry_ = true;
  bound_ = nullptr;
  dispatches_ = 0;
}

void Recorder::discard() {
  if (!recording_) return;
  if (dry_) {
    recording_ = dry_ = false;
    return;
  }
  check(vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
  recording_ = false;
  has_commands_ = false;
}

void Recorder::require_recording(const char* what) const {
  if (!recording_) throw Error(std::string("internal error: Recorder::") + what + " outside begin()/submit()");
}

VkDescriptorSet Recorder::allocate_set(VkDescriptorSetLayout layout) {
  constexpr uint32_t kSets = 256, kDescriptors = kSets * 8;
  for (;;) {
    if (desc_pool_cur_ == desc_pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kDescriptors};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.maxSets = kSets;
      ci.poolSizeCount = 1;
      ci.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      check(vkCreateDescriptorPool(ctx_.device(), &ci, nullptr, &pool), "vkCreateDescriptorPool");
      desc_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = desc_pools_[desc_pool_cur_];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkResult r = vkAllocateDescriptorSets(ctx_.device(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) check(r, "vkAllocateDescriptorSets");
    ++desc_pool_cur_;
  }
}

void Recorder::dispatch(const Pipeline& p, std::span<const BufferRange> bindings, const void* push,
                        uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  require_recording("dispatch");
  const DeviceInfo& di = ctx_.info();
  if (bindings.size() != p.n_bindings)
    throw Error("internal error: " + p.shader + " expects " + std::to_string(p.n_bindings) + " bindings, got " +
                std::to_string(bindings.size()));
  if (push_bytes != p.push_bytes)
    throw Error("internal error: " + p.shader + " expects " + std::to_string(p.push_bytes) +
                " bytes of push constants, got " + std::to_string(push_bytes));
  if (gx > di.max_workgroup_count[0] || gy > di.max_workgroup_count[1] || gz > di.max_workgroup_count[2])
    throw Error("internal error: " + p.shader + " dispatch of " + std::to_string(gx) + "x" + std::to_string(gy) +
                "x" + std::to_string(gz) + " workgroups exceeds the device limit");
  // 32: the least maxPushDescriptors a push-descriptor driver has.
  constexpr size_t kMaxBindings = 32;
  VkDescriptorBufferInfo infos[kMaxBindings];
  VkWriteDescriptorSet writes[kMaxBindings];
  if (bindings.size() > kMaxBindings)
    throw Error("internal error: more than " + std::to_string(kMaxBindings) + " bindings");
  for (size_t i = 0; i < bindings.size(); ++i) {
    const BufferRange& b = bindings[i];
    if (b.buffer == VK_NULL_HANDLE) throw Error("internal error: " + p.shader + " binding " + std::to_string(i) + " is empty");
    if (b.range > di.max_storage_buffer_range)
      throw Error("internal error: " + p.shader + " binding " + std::to_string(i) + " covers " + mib(b.range) +
                  " MiB, more than the device's storage range of " + mib(di.max_storage_buffer_range) + " MiB");
    if (di.min_storage_offset_alignment && b.offset % di.min_storage_offset_alignment)
      throw Error("internal error: " + p.shader + " binding " + std::to_string(i) + " offset " +
                  std::to_string(b.offset) + " is not a multiple of " + std::to_string(di.min_storage_offset_alignment));
    infos[i] = {b.buffer, b.offset, b.range};
    writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  if (dry_) {
    ++dispatches_;
    return;
  }
  if (bound_ != &p) {
    vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    bound_ = &p;
  }
  const uint32_t n = static_cast<uint32_t>(bindings.size());
  if (n > 0) {
    if (ctx_.push_descriptors()) {
      ctx_.push_descriptor_fn()(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, n, writes);
    } else {
      VkDescriptorSet set = allocate_set(p.set_layout);
      for (uint32_t i = 0; i < n; ++i) writes[i].dstSet = set;
      vkUpdateDescriptorSets(ctx_.device(), n, writes, 0, nullptr);
      vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    }
  }
  if (push_bytes) vkCmdPushConstants(cb_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vkCmdDispatch(cb_, gx, gy, gz);
  has_commands_ = true;
  ++dispatches_;
}

namespace {
VkPipelineStageFlags work_stages(const Context& ctx, const Queue& q) {
  // A transfer-only queue supports neither the compute stage nor shader access.
  const bool compute = q.family() == ctx.info().compute_family;
  return VK_PIPELINE_STAGE_TRANSFER_BIT | (compute ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : 0);
}
}  // namespace

void Recorder::barrier() {
  require_recording("barrier");
  if (dry_) return;
  const VkPipelineStageFlags stages = work_stages(ctx_, *queue_);
  const bool compute = stages & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | (compute ? VK_ACCESS_SHADER_WRITE_BIT : 0);
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     (compute ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT : 0);
  vkCmdPipelineBarrier(cb_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Recorder::copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  require_recording("copy");
  if (bytes == 0) return;
  if (src_offset + bytes > src.size() || dst_offset + bytes > dst.size())
    throw Error("internal error: copy of " + std::to_string(bytes) + " bytes out of bounds (" + src.name() + " -> " +
                dst.name() + ")");
  if (dry_) return;
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
  has_commands_ = true;
}

void Recorder::fill(const Buffer& dst, uint64_t offset, uint64_t bytes, uint32_t value) {
  require_recording("fill");
  if (bytes == 0) return;
  if (offset % 4 || bytes % 4 || offset + bytes > ((dst.size() + 15) & ~uint64_t(15)))
    throw Error("internal error: fill of " + dst.name() + " misaligned or out of bounds");
  if (dry_) return;
  vkCmdFillBuffer(cb_, dst.handle(), offset, bytes, value);
  has_commands_ = true;
}

void Recorder::reset_timestamps(TimestampPool& pool, uint32_t first, uint32_t count) {
  require_recording("reset_timestamps");
  if (dry_) return;
  vkCmdResetQueryPool(cb_, pool.handle(), first, count);
}

void Recorder::timestamp(TimestampPool& pool, uint32_t index) {
  require_recording("timestamp");
  if (dry_) return;
  vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool.handle(), index);
  has_commands_ = true;
}

SyncPoint Recorder::submit(std::span<const SyncPoint> waits) {
  if (dry_) throw Error("internal error: Recorder::submit of a dry recording");
  if (recording_) {
    // Make device writes visible to host reads after the host waits.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    const VkPipelineStageFlags stages = work_stages(ctx_, *queue_);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT |
                       ((stages & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT) ? VK_ACCESS_SHADER_WRITE_BIT : 0);
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb_, stages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    check(vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
    recording_ = false;
    has_commands_ = true;
  } else if (!has_commands_) {
    throw Error("internal error: Recorder::submit without recorded commands");
  } else {
    last_.wait();  // re-submission of the same commands
  }
  VkCommandBuffer cb = cb_;
  last_ = queue_->submit(std::span<const VkCommandBuffer>(&cb, 1), waits);
  return last_;
}

}  // namespace vkmoe::vk
