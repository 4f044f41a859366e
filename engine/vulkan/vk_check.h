#pragma once
// Helpers the Vulkan runtime's files share (engine/vulkan/vk_*.cpp); not for other callers.
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>

namespace vkmoe::vk {

// Throws Error naming `what` unless r is VK_SUCCESS; DeviceLost (and marks the
// device lost) for VK_ERROR_DEVICE_LOST.
void check(VkResult r, const char* what);
// bytes as MiB with one decimal.
std::string mib(uint64_t bytes);

struct BufferRange;
// Throws "internal error: <kernel> <what> ..." unless binding b is bound and
// covers end_bytes.
void check_binding(const char* kernel, const char* what, const BufferRange& b, uint64_t end_bytes);
// The same, and that end_bytes stays within the 32-bit byte offsets a kernel uses.
void check_binding_32bit(const char* kernel, const char* what, const BufferRange& b, uint64_t end_bytes);

}  // namespace vkmoe::vk
