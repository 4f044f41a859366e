#include "engine/vulkan/pipeline_stats.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace vkmoe::vk {

bool pipeline_stats_requested() {
  static const bool on = [] {
    const char* v = std::getenv("VKMOE_PIPELINE_STATS");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void print_pipeline_stats(VkDevice device, VkPipeline pipeline, const std::string& shader,
                          const std::vector<uint32_t>& spec) {
  auto props = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutablePropertiesKHR"));
  auto stats = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(device, "vkGetPipelineExecutableStatisticsKHR"));
  if (!props || !stats) return;
  std::string line = "pipeline " + shader + " [";
  for (size_t i = 0; i < spec.size(); ++i) line += (i ? "," : "") + std::to_string(spec[i]);
  line += "]";
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = pipeline;
  uint32_t n_exec = 0;
  if (props(device, &pi, &n_exec, nullptr) != VK_SUCCESS) return;
  for (uint32_t e = 0; e < n_exec; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = pipeline;
    ei.executableIndex = e;
    uint32_t n = 0;
    if (stats(device, &ei, &n, nullptr) != VK_SUCCESS) continue;
    std::vector<VkPipelineExecutableStatisticKHR> s(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (stats(device, &ei, &n, s.data()) != VK_SUCCESS) continue;
    for (const auto& st : s) {
      line += std::string(" | ") + st.name + "=";
      switch (st.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: line += st.value.b32 ? "true" : "false"; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: line += std::to_string(st.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: line += std::to_string(st.value.u64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: line += std::to_string(st.value.f64); break;
        default: line += "?";
      }
    }
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace vkmoe::vk
