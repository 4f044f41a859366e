#include "engine/vulkan/device_lost.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {
namespace {

std::atomic<bool> g_lost{false};
std::atomic<int64_t> g_waits_left{-1};  // < 0: no injected loss

}  // namespace

void set_device_lost_fault(const std::string& spec) {
  int64_t n = -1;
  if (spec.rfind("after:", 0) == 0 && spec.size() > 6 && spec.size() < 16 &&
      spec.find_first_not_of("0123456789", 6) == std::string::npos)
    n = std::stoll(spec.substr(6));
  else if (!spec.empty() && spec != "off")
    throw Error("bad device-lost fault '" + printable(spec) + "' (after:N or off)");
  g_waits_left.store(n);
  g_lost.store(false);
}

void device_lost_fault_from_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* e = std::getenv("VKMOE_FAULT_DEVICE_LOST")) set_device_lost_fault(e);
  });
}

bool device_lost_fault_fires() {
  if (g_waits_left.load() < 0) return false;
  return g_waits_left.fetch_sub(1) <= 0;
}

void mark_device_lost() { g_lost.store(true); }
bool device_was_lost() { return g_lost.load(); }

}  // namespace vkmoe::vk
