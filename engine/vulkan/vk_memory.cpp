// Device and host-visible buffers: allocation by memory kind, budgets, copies in and out.
#include "engine/vulkan/vk_runtime.h"

#include <cstring>

#include "engine/vulkan/alloc_fault.h"
#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = o.ctx_;
    buffer_ = o.buffer_;
    memory_ = o.memory_;
    size_ = o.size_;
    kind_ = o.kind_;
    mapped_ = o.mapped_;
    name_ = std::move(o.name_);
    o.ctx_ = nullptr;
    o.buffer_ = VK_NULL_HANDLE;
    o.memory_ = VK_NULL_HANDLE;
    o.size_ = 0;
    o.mapped_ = nullptr;
  }
  return *this;
}

void Buffer::release() {
  if (ctx_ && buffer_ != VK_NULL_HANDLE) ctx_->free_buffer(*this);
  ctx_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  size_ = 0;
}

namespace {
// Best memory type among `bits` that has `required`, scoring preferred and
// avoided property flags.
int pick_memory_type(const VkPhysicalDeviceMemoryProperties& mp, uint32_t bits,
                     VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                     VkMemoryPropertyFlags avoided) {
  int best = -1, best_score = -1000;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    if (!(bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    int score = 0;
    score += 2 * __builtin_popcount(f & preferred);
    score -= __builtin_popcount(f & avoided);
    if (score > best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}
}  // namespace

Buffer Context::create_buffer(uint64_t bytes, MemoryKind kind, const std::string& what) {
  if (bytes == 0) throw Error("internal error: zero-sized buffer requested for " + what);
  if (info_.max_allocation_bytes && bytes > info_.max_allocation_bytes)
    throw Error("buffer of " + mib(bytes) + " MiB for " + what + " exceeds the device's largest allocation (" +
                mib(info_.max_allocation_bytes) + " MiB)");
  const uint64_t vk_size = (bytes + 15) & ~uint64_t(15);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = vk_size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // cm2 shaders form buffer references (decode callbacks) into bound buffers.
  if (info_.cooperative_matrix2) bci.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  uint32_t families[2] = {compute_->family(), transfer_ ? transfer_->family() : compute_->family()};
  if (families[0] != families[1]) {
    bci.sharingMode = VK_SHARING_MODE_CONCURRENT;
    bci.queueFamilyIndexCount = 2;
    bci.pQueueFamilyIndices = families;
  } else {
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  }
  auto out_of_memory = [&](bool injected) {
    const MemoryBudget mb = memory_budget();
    const std::string msg = std::string(kind == MemoryKind::Device ? "out of device memory"
                                                                   : "out of host-visible memory") +
                            " allocating " + mib(bytes) + " MiB for " + what + " (budget " + mib(mb.free()) +
                            " MiB free" + (injected ? ", failure injected by VKMOE_FAIL_DEVICE_ALLOC" : "") +
                            "); lower --vram-budget or close other GPU programs";
    if (kind == MemoryKind::Device)
      throw OutOfDeviceMemory(msg, what, bytes, allocated_bytes(MemoryKind::Device), injected);
    throw Error(msg);
  };
  Buffer b;
  VkResult r = vkCreateBuffer(device_, &bci, nullptr, &b.buffer_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY) out_of_memory(false);
  if (r != VK_SUCCESS) check(r, ("vkCreateBuffer for " + what).c_str());
  b.ctx_ = this;
  b.size_ = bytes;
  b.kind_ = kind;
  b.name_ = what;

  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  int type = -1;
  const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                              CA = VK_MEMORY_PROPERTY_HOST_CACHED_BIT, DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  switch (kind) {
    case MemoryKind::Device: type = pick_memory_type(mem_props_, req.memoryTypeBits, DL, 0, HV); break;
    case MemoryKind::Upload: type = pick_memory_type(mem_props_, req.memoryTypeBits, HV | HC, 0, CA | DL); break;
    case MemoryKind::Readback: type = pick_memory_type(mem_props_, req.memoryTypeBits, HV | HC, CA, DL); break;
  }
  if (type < 0) {
    throw Error("no suitable Vulkan memory type for " + what);
  }
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  VkMemoryDedicatedAllocateInfo dedicated{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  if (req.size >= (16u << 20)) {
    dedicated.buffer = b.buffer_;
    mai.pNext = &dedicated;
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  if (info_.cooperative_matrix2) {
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    flags.pNext = const_cast<void*>(mai.pNext);
    mai.pNext = &flags;
  }
  // An injected fault (set_device_alloc_fault) takes the path of a real failure.
  const bool injected =
      kind == MemoryKind::Device && device_alloc_fault_fires(allocated_bytes(MemoryKind::Device), bytes, what);
  r = injected ? VK_ERROR_OUT_OF_DEVICE_MEMORY : vkAllocateMemory(device_, &mai, nullptr, &b.memory_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_TOO_MANY_OBJECTS)
    out_of_memory(injected);
  check(r, ("vkAllocateMemory for " + what).c_str());
  check(vkBindBufferMemory(device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory");
  if (kind != MemoryKind::Device) {
    void* p = nullptr;
    check(vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    b.mapped_ = static_cast<uint8_t*>(p);
  }
  allocated_total_ += bytes;
  allocated_kind_[static_cast<int>(kind)] += bytes;
  return b;
}

void Context::free_buffer(Buffer& b) {
  if (b.mapped_) vkUnmapMemory(device_, b.memory_);
  vkDestroyBuffer(device_, b.buffer_, nullptr);
  if (b.memory_) {
    vkFreeMemory(device_, b.memory_, nullptr);
    allocated_total_ -= b.size_;
    allocated_kind_[static_cast<int>(b.kind_)] -= b.size_;
  }
}

uint64_t Context::allocated_bytes(MemoryKind kind) const {
  return allocated_kind_[static_cast<int>(kind)].load();
}

void Context::write_buffer(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) {
  if (offset + bytes > dst.size()) throw Error("internal error: write past the end of " + dst.name());
  if (bytes == 0) return;
  if (dst.data()) {
    wait_idle();
    std::memcpy(dst.data() + offset, src, bytes);
    return;
  }
  Buffer staging = create_buffer(bytes, MemoryKind::Upload, "staging for " + dst.name());
  std::memcpy(staging.data(), src, bytes);
  Recorder rec(*this);
  rec.begin();
  rec.barrier();
  rec.copy(staging, 0, dst, offset, bytes);
  rec.barrier();
  rec.submit().wait();
}

void Context::read_buffer(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  if (offset + bytes > src.size()) throw Error("internal error: read past the end of " + src.name());
  if (bytes == 0) return;
  if (src.data()) {
    wait_idle();
    std::memcpy(dst, src.data() + offset, bytes);
    return;
  }
  Buffer staging = create_buffer(bytes, MemoryKind::Readback, "readback of " + src.name());
  Recorder rec(*this);
  rec.begin();
  rec.barrier();
  rec.copy(src, offset, staging, 0, bytes);
  rec.submit().wait();
  std::memcpy(dst, staging.data(), bytes);
}

}  // namespace vkmoe::vk
