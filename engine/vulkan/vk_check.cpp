// Vulkan result checks and small helpers the runtime files share (vk_check.h).
#include "engine/vulkan/vk_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/vulkan/device_lost.h"
#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {

namespace {

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    default: return "VkResult error";
  }
}

}  // namespace

void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_DEVICE_LOST) {
    mark_device_lost();
    throw DeviceLost(std::string("Vulkan device lost during ") + what +
                     " (GPU hang, driver reset or out-of-bounds access)");
  }
  throw Error(std::string("Vulkan error in ") + what + ": " + result_name(r) + " (" +
              std::to_string(static_cast<int>(r)) + ")");
}

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / (1024.0 * 1024.0));
  return buf;
}

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

void check_binding(const char* kernel, const char* what, const BufferRange& b, uint64_t end_bytes) {
  if (b.buffer == VK_NULL_HANDLE)
    throw Error(std::string("internal error: ") + kernel + " " + what + " binding is empty");
  if (end_bytes > b.range)
    throw Error(std::string("internal error: ") + kernel + " " + what + " needs " + std::to_string(end_bytes) +
                " bytes but its binding covers " + std::to_string(b.range));
}

void check_binding_32bit(const char* kernel, const char* what, const BufferRange& b, uint64_t end_bytes) {
  check_binding(kernel, what, b, end_bytes);
  if (end_bytes > UINT32_MAX)
    throw Error(std::string("internal error: ") + kernel + " " + what + " range exceeds 4 GiB");
}

}  // namespace vkmoe::vk
