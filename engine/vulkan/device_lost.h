#pragma once
// Internal side of device-loss handling declared in vk_runtime.h: once a queue
// operation reports VK_ERROR_DEVICE_LOST, every later wait fails at once
// instead of waiting on a dead device; tests inject the loss.
#include <cstdint>

namespace vkmoe::vk {

// Applies env VKMOE_FAULT_DEVICE_LOST once per process (first call).
void device_lost_fault_from_env();
// Counts one queue wait; true when the injected fault makes it report the loss.
bool device_lost_fault_fires();
void mark_device_lost();
bool device_was_lost();

}  // namespace vkmoe::vk
