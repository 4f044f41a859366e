#pragma once
// Internal side of the device-allocation fault injection declared in
// vk_runtime.h (set_device_alloc_fault).
#include <cstdint>
#include <string>

namespace vkmoe::vk {

// Applies env VKMOE_FAIL_DEVICE_ALLOC once per process (first call).
void device_alloc_fault_from_env();
// Counts one device allocation attempt of `bytes` for buffer `name` while
// `in_use` bytes of device memory are allocated; true when the fault makes it fail.
bool device_alloc_fault_fires(uint64_t in_use, uint64_t bytes, const std::string& name);

}  // namespace vkmoe::vk
