// Uploader: host-to-device copies through a ring of staging slots.
#include "engine/vulkan/vk_runtime.h"

#include <cstring>

#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {

Uploader::Uploader(Context& ctx, uint64_t staging_bytes, uint32_t slots, CopyFn copy)
    : queue_(&ctx.transfer_queue()), copy_(std::move(copy)) {
  if (slots == 0) slots = 1;
  const uint64_t per_slot = std::max<uint64_t>((staging_bytes / slots) & ~uint64_t(255), 256);
  slots_.resize(slots);
  for (uint32_t i = 0; i < slots; ++i) {
    slots_[i].staging = ctx.create_buffer(per_slot, MemoryKind::Upload, "upload staging");
    slots_[i].rec = std::make_unique<Recorder>(ctx, queue_);
  }
}

Uploader::~Uploader() {
  try {
    flush();
  } catch (...) {
  }
  slots_.clear();  // recorders wait for their submissions
}

void Uploader::enqueue(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  if (dst_offset + bytes > dst.size())
    throw Error("internal error: upload of " + std::to_string(bytes) + " bytes past the end of " + dst.name());
  const uint8_t* p = static_cast<const uint8_t*>(src);
  while (bytes > 0) {
    Slot& s = slots_[cur_];
    if (!s.rec->recording()) {
      s.rec->begin();  // waits until this slot's previous copies have landed
      s.used = 0;
    }
    const uint64_t cap = s.staging.size();
    const uint64_t chunk = std::min(bytes, cap - s.used);
    if (chunk == 0) {
      next_slot();
      continue;
    }
    if (copy_)
      copy_(s.staging.data() + s.used, p, chunk);
    else
      std::memcpy(s.staging.data() + s.used, p, chunk);
    s.rec->copy(s.staging, s.used, dst, dst_offset, chunk);
    s.used = std::min(cap, (s.used + chunk + 15) & ~uint64_t(15));
    p += chunk;
    dst_offset += chunk;
    bytes -= chunk;
    bytes_uploaded_ += chunk;
  }
}

void Uploader::next_slot() {
  Slot& s = slots_[cur_];
  if (s.rec->recording()) last_ = s.rec->submit();
  cur_ = (cur_ + 1) % slots_.size();
}

SyncPoint Uploader::flush() {
  if (slots_.empty()) return last_;
  Slot& s = slots_[cur_];
  if (s.rec->recording() && s.used > 0) next_slot();
  return last_;
}

}  // namespace vkmoe::vk
