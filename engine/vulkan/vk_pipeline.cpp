// Compute pipelines of the embedded shaders, created once per (shader, specialization).
#include "engine/vulkan/vk_runtime.h"

#include "engine/vulkan/pipeline_stats.h"
#include "engine/vulkan/shaders.h"
#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {

const Pipeline& Context::pipeline(const std::string& shader, uint32_t n_bindings, uint32_t push_bytes,
                                  const std::vector<uint32_t>& spec) {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  auto key = std::make_pair(shader, spec);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) {
    const Pipeline& p = *it->second;
    if (p.n_bindings != n_bindings || p.push_bytes != push_bytes)
      throw Error("internal error: pipeline " + shader + " requested with different bindings/push size");
    return p;
  }
  const EmbeddedShader* es = find_shader(shader);
  if (!es) throw Error("internal error: no embedded shader named '" + shader + "'");
  if (push_bytes % 4 != 0 || push_bytes > 128)
    throw Error("internal error: push constants of " + std::to_string(push_bytes) + " bytes for " + shader);

  auto p = std::make_unique<Pipeline>();
  p->shader = shader;
  p->spec = spec;
  p->n_bindings = n_bindings;
  p->push_bytes = push_bytes;

  std::vector<VkDescriptorSetLayoutBinding> binds(n_bindings);
  for (uint32_t i = 0; i < n_bindings; ++i) {
    binds[i].binding = i;
    binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    binds[i].descriptorCount = 1;
    binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  if (push_descriptors_) dl.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
  dl.bindingCount = n_bindings;
  dl.pBindings = binds.data();
  check(vkCreateDescriptorSetLayout(device_, &dl, nullptr, &p->set_layout), "vkCreateDescriptorSetLayout");

  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p->set_layout;
  pl.pushConstantRangeCount = push_bytes ? 1 : 0;
  pl.pPushConstantRanges = &pr;
  VkResult r = vkCreatePipelineLayout(device_, &pl, nullptr, &p->layout);
  if (r != VK_SUCCESS) {
    vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
    check(r, "vkCreatePipelineLayout");
  }

  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smi.codeSize = es->words * 4;
  smi.pCode = es->code;
  VkShaderModule module = VK_NULL_HANDLE;
  r = vkCreateShaderModule(device_, &smi, nullptr, &module);
  if (r == VK_SUCCESS) {
    std::vector<VkSpecializationMapEntry> entries(spec.size());
    for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4, 4};
    VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), spec.size() * 4, spec.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
    ci.layout = p->layout;
    if (pipeline_stats_) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    r = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &ci, nullptr, &p->pipeline);
    vkDestroyShaderModule(device_, module, nullptr);
    if (r == VK_SUCCESS && pipeline_stats_) print_pipeline_stats(device_, p->pipeline, shader, spec);
  }
  if (r != VK_SUCCESS) {
    vkDestroyPipelineLayout(device_, p->layout, nullptr);
    vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
    check(r, ("creating compute pipeline " + shader).c_str());
  }
  const Pipeline& ref = *p;
  pipelines_.emplace(std::move(key), std::move(p));
  return ref;
}

}  // namespace vkmoe::vk
