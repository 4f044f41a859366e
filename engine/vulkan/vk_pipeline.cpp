// Compute pipelines of the embedded shaders, created once per (shader, specialization).
#include "engine/vulkan/vk_runtime.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>

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
    Pipeline& p = *it->second;
    if (p.n_bindings != n_bindings || p.push_bytes != push_bytes)
      throw Error("internal error: pipeline " + shader + " requested with different bindings/push size");
    if (p.pipeline == VK_NULL_HANDLE && !collecting_) compile_pipeline(p);
    return p;
  }
  if (!find_shader(shader)) throw Error("internal error: no embedded shader named '" + shader + "'");
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
  if (collecting_) {
    collected_.push_back(p.get());
  } else {
    try {
      compile_pipeline(*p);
    } catch (...) {
      vkDestroyPipelineLayout(device_, p->layout, nullptr);
      vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
      throw;
    }
  }
  const Pipeline& ref = *p;
  pipelines_.emplace(std::move(key), std::move(p));
  return ref;
}

// The driver's compile of p (its layouts made): the slow part of a pipeline.
void Context::compile_pipeline(Pipeline& p) const {
  const EmbeddedShader* es = find_shader(p.shader);
  VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  smi.codeSize = es->words * 4;
  smi.pCode = es->code;
  VkShaderModule module = VK_NULL_HANDLE;
  VkResult r = vkCreateShaderModule(device_, &smi, nullptr, &module);
  if (r == VK_SUCCESS) {
    std::vector<VkSpecializationMapEntry> entries(p.spec.size());
    for (uint32_t i = 0; i < p.spec.size(); ++i) entries[i] = {i, i * 4, 4};
    VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), p.spec.size() * 4, p.spec.data()};
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = p.spec.empty() ? nullptr : &si;
    ci.layout = p.layout;
    if (pipeline_stats_) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    VkPipeline handle = VK_NULL_HANDLE;
    r = vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &ci, nullptr, &handle);
    vkDestroyShaderModule(device_, module, nullptr);
    if (r == VK_SUCCESS) {
      if (pipeline_stats_) print_pipeline_stats(device_, handle, p.shader, p.spec);
      p.pipeline = handle;
    }
  }
  check(r, ("creating compute pipeline " + p.shader).c_str());
}

void Context::collect_pipelines() {
  std::lock_guard<std::mutex> lock(pipeline_mutex_);
  collecting_ = true;
}

void Context::compile_collected(unsigned threads) {
  std::vector<Pipeline*> todo;
  {
    std::lock_guard<std::mutex> lock(pipeline_mutex_);
    collecting_ = false;
    todo.swap(collected_);
  }
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto work = [&] {
    for (size_t i; (i = next++) < todo.size();) {
      try {
        compile_pipeline(*todo[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> helpers;
  const size_t n = std::min<size_t>(std::max(threads, 1u), todo.size());
  for (size_t t = 1; t < n; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {  // fewer threads then
      break;
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace vkmoe::vk
