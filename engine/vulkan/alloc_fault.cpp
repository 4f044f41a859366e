#include "engine/vulkan/alloc_fault.h"

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>

#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {
namespace {

enum class Fault { Off, After, Over, From };

struct State {
  std::mutex mu;
  Fault fault = Fault::Off;
  uint64_t value = 0;
  std::string name;    // From: the first allocation to fail
  bool named = false;  // From: that allocation was attempted
  uint64_t count = 0;  // attempts since the fault was set
};

State& state() {
  static State s;
  return s;
}

// "123", "64K", "12MiB", "1G" (binary units).
uint64_t parse_bytes(const std::string& s, const std::string& spec) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  const std::string unit = s.substr(i);
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "GiB") shift = 30;
  if (i == 0 || i > 12 || shift < 0)
    throw Error("bad device allocation fault '" + printable(spec) + "' (after:N, over:SIZE, from:NAME or off)");
  return std::stoull(s.substr(0, i)) << shift;  // < 10^12 * 2^30 < 2^64
}

}  // namespace

void set_device_alloc_fault(const std::string& spec) {
  Fault f = Fault::Off;
  uint64_t v = 0;
  if (spec.rfind("after:", 0) == 0) {
    f = Fault::After;
    v = parse_bytes(spec.substr(6), spec);
    if (spec.find_first_not_of("0123456789", 6) != std::string::npos)
      throw Error("bad device allocation fault '" + printable(spec) + "' (after:N is a count)");
  } else if (spec.rfind("over:", 0) == 0) {
    f = Fault::Over;
    v = parse_bytes(spec.substr(5), spec);
  } else if (spec.rfind("from:", 0) == 0 && spec.size() > 5) {
    f = Fault::From;
  } else if (!spec.empty() && spec != "off") {
    throw Error("bad device allocation fault '" + printable(spec) + "' (after:N, over:SIZE, from:NAME or off)");
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.fault = f;
  s.value = v;
  s.name = f == Fault::From ? spec.substr(5) : std::string();
  s.named = false;
  s.count = 0;
}

uint64_t device_alloc_count() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.count;
}

void device_alloc_fault_from_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* e = std::getenv("VKMOE_FAIL_DEVICE_ALLOC")) set_device_alloc_fault(e);
  });
}

bool device_alloc_fault_fires(uint64_t in_use, uint64_t bytes, const std::string& name) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const uint64_t n = s.count++;
  switch (s.fault) {
    case Fault::Off: return false;
    case Fault::After: return n >= s.value;
    case Fault::Over: return in_use + bytes > s.value;
    case Fault::From: return s.named = s.named || name == s.name;
  }
  return false;
}

}  // namespace vkmoe::vk
