#pragma once
// Compiler statistics of compute pipelines (shader development): with
// VKMOE_PIPELINE_STATS=1 and a driver offering VK_KHR_pipeline_executable_properties,
// every pipeline is created with statistics capture and its statistics
// (registers, spills, shared memory... as the driver names them) go to stderr.
#include <string>
#include <vector>

#include <vulkan/vulkan.h>

namespace vkmoe::vk {

bool pipeline_stats_requested();
void print_pipeline_stats(VkDevice device, VkPipeline pipeline, const std::string& shader,
                          const std::vector<uint32_t>& spec);

}  // namespace vkmoe::vk
