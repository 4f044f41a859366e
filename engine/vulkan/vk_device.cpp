// Vulkan devices: discovery, capabilities (DeviceInfo), and opening one (Context::create).
#include "engine/vulkan/vk_runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "engine/vulkan/alloc_fault.h"
#include "engine/vulkan/device_lost.h"
#include "engine/vulkan/pipeline_stats.h"
#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {

namespace {

const char* kNoDriver =
    "no Vulkan driver found: install your GPU vendor's Vulkan driver, or mesa-vulkan-drivers "
    "for the CPU driver lavapipe";

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (const auto& e : exts)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

// VK_KHR_cooperative_matrix, declared here when the Vulkan headers predate it
// (Debian 12's are 1.3.239).
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
constexpr VkStructureType kStypeCoopMatFeatures = static_cast<VkStructureType>(1000506000);
constexpr VkStructureType kStypeCoopMatProperties = static_cast<VkStructureType>(1000506001);
struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
};
struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation;
  uint32_t scope;  // VkScopeKHR
};
#else
constexpr VkStructureType kStypeCoopMatFeatures = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
constexpr VkStructureType kStypeCoopMatProperties = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
#endif
using PfnCoopMatProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, VkCooperativeMatrixPropertiesKHR*);

// VK_NV_cooperative_matrix2 (newer than Debian 12's headers), as the registry defines it.
constexpr const char* kCoopMat2Extension = "VK_NV_cooperative_matrix2";
constexpr VkStructureType kStypeCoopMat2Features = static_cast<VkStructureType>(1000593000);
constexpr VkStructureType kStypeCoopMat2Flexible = static_cast<VkStructureType>(1000593001);
constexpr VkStructureType kStypeCoopMat2Properties = static_cast<VkStructureType>(1000593002);
struct CoopMat2Features {
  VkStructureType sType;
  void* pNext;
  VkBool32 workgroup_scope, flexible_dimensions, reductions, conversions, per_element_operations,
      tensor_addressing, block_loads;
};
struct CoopMat2FlexibleDimensions {
  VkStructureType sType;
  void* pNext;
  uint32_t MGranularity, NGranularity, KGranularity;
  uint32_t AType, BType, CType, ResultType;  // VkComponentTypeKHR
  VkBool32 saturatingAccumulation;
  uint32_t scope;  // VkScopeKHR
  uint32_t workgroupInvocations;
};
struct CoopMat2Properties {
  VkStructureType sType;
  void* pNext;
  uint32_t workgroup_scope_max_workgroup_size, flexible_dimensions_max_dimension, workgroup_scope_reserved_shared;
};
using PfnCoopMat2Flexible = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CoopMat2FlexibleDimensions*);

// s (a features or properties struct with its sType set) filled in alone.
template <class T>
T query_features(VkPhysicalDevice phys, T s) {
  VkPhysicalDeviceFeatures2 g2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  g2.pNext = &s;
  vkGetPhysicalDeviceFeatures2(phys, &g2);
  return s;
}
template <class T>
T query_properties(VkPhysicalDevice phys, T s) {
  VkPhysicalDeviceProperties2 q2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  q2.pNext = &s;
  vkGetPhysicalDeviceProperties2(phys, &q2);
  return s;
}

// The features the cm2 GEMM needs (queried; also what is enabled).
CoopMat2Features query_coopmat2_features(VkPhysicalDevice phys) {
  return query_features(phys, CoopMat2Features{kStypeCoopMat2Features, nullptr, 0, 0, 0, 0, 0, 0, 0});
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice phys) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, exts.data());
  exts.resize(n);
  return exts;
}

// Creates an instance (Vulkan 1.2+), optionally with the validation layer.
VkInstance create_instance(bool validation) {
  uint32_t loader_version = VK_API_VERSION_1_0;
  auto enumerate_version = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      vkGetInstanceProcAddr(nullptr, "vkEnumerateInstanceVersion"));
  if (enumerate_version) enumerate_version(&loader_version);
  if (loader_version < VK_API_VERSION_1_2)
    throw Error("the Vulkan loader is older than 1.2: update the Vulkan loader (libvulkan1)");

  uint32_t n = 0;
  vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());
  exts.resize(n);
  std::vector<const char*> enabled;
  VkInstanceCreateFlags flags = 0;
  if (has_extension(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    enabled.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  std::vector<const char*> layers;
  if (validation) {
    uint32_t nl = 0;
    vkEnumerateInstanceLayerProperties(&nl, nullptr);
    std::vector<VkLayerProperties> props(nl);
    vkEnumerateInstanceLayerProperties(&nl, props.data());
    for (uint32_t i = 0; i < nl; ++i)
      if (std::strcmp(props[i].layerName, "VK_LAYER_KHRONOS_validation") == 0)
        layers.push_back("VK_LAYER_KHRONOS_validation");
    if (layers.empty())
      std::fprintf(stderr, "vkmoe: validation requested but VK_LAYER_KHRONOS_validation is not installed\n");
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkmoe";
  app.pEngineName = "vkmoe";
  app.apiVersion = std::min<uint32_t>(loader_version, VK_API_VERSION_1_3);
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.flags = flags;
  ci.pApplicationInfo = &app;
  ci.enabledExtensionCount = static_cast<uint32_t>(enabled.size());
  ci.ppEnabledExtensionNames = enabled.data();
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  VkInstance inst = VK_NULL_HANDLE;
  VkResult r = vkCreateInstance(&ci, nullptr, &inst);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED) throw Error(kNoDriver);
  check(r, "vkCreateInstance");
  return inst;
}

// The process's instance (one per validation setting): created on first use,
// shared by every Context and list_devices. NVIDIA's driver (580.159, H100
// machine) refuses a process's 30th vkCreateInstance even when the earlier
// instances were destroyed (docs/PERF.md run 21). It is never destroyed:
// from a static destructor, vkDestroyInstance ran after the driver's own
// exit handlers and crashed there.
VkInstance process_instance(bool validation) {
  static std::mutex m;
  static VkInstance kept[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
  std::lock_guard<std::mutex> lock(m);
  VkInstance& inst = kept[validation ? 1 : 0];
  if (!inst) inst = create_instance(validation);
  return inst;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance inst) {
  uint32_t n = 0;
  VkResult r = vkEnumeratePhysicalDevices(inst, &n, nullptr);
  if (r == VK_ERROR_INITIALIZATION_FAILED || n == 0) throw Error(kNoDriver);
  std::vector<VkPhysicalDevice> devs(n);
  check(vkEnumeratePhysicalDevices(inst, &n, devs.data()), "vkEnumeratePhysicalDevices");
  devs.resize(n);
  return devs;
}

const char* vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x1022: return "AMD";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x106B: return "Apple";
    case 0x1010: return "ImgTec";
    case 0x14E4: return "Broadcom";
    case VK_VENDOR_ID_MESA: return "Mesa";
    default: return "unknown";
  }
}

// Budget/usage summed over device-local heaps (requires VK_EXT_memory_budget).
void query_budget(VkPhysicalDevice phys, uint64_t& budget, uint64_t& usage) {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT bp{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 mp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2};
  mp.pNext = &bp;
  vkGetPhysicalDeviceMemoryProperties2(phys, &mp);
  budget = usage = 0;
  for (uint32_t h = 0; h < mp.memoryProperties.memoryHeapCount; ++h) {
    if (!(mp.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    budget += bp.heapBudget[h];
    usage += bp.heapUsage[h];
  }
}

DeviceInfo describe_device(VkInstance inst, VkPhysicalDevice phys, int index) {
  DeviceInfo d;
  d.index = index;
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(phys, &props);
  d.name = props.deviceName;
  d.vendor_id = props.vendorID;
  d.vendor = vendor_name(props.vendorID);
  d.api_version = props.apiVersion;
  switch (props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: d.type = DeviceType::Discrete; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: d.type = DeviceType::Integrated; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: d.type = DeviceType::Virtual; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: d.type = DeviceType::Cpu; break;
    default: d.type = DeviceType::Other; break;
  }
  const VkPhysicalDeviceLimits& lim = props.limits;
  for (int i = 0; i < 3; ++i) {
    d.max_workgroup_size[i] = lim.maxComputeWorkGroupSize[i];
    d.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
  }
  d.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  d.max_shared_memory_bytes = lim.maxComputeSharedMemorySize;
  d.max_storage_buffer_range = lim.maxStorageBufferRange;
  d.max_storage_buffers = std::min(lim.maxPerStageDescriptorStorageBuffers, lim.maxPerStageResources);
  d.min_storage_offset_alignment = lim.minStorageBufferOffsetAlignment;
  d.timestamp_period_ns = lim.timestampPeriod;

  const auto exts = device_extensions(phys);
  d.push_descriptor = has_extension(exts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  d.has_memory_budget = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  const bool v12 = props.apiVersion >= VK_API_VERSION_1_2;

  VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &sg;
  sg.pNext = &m3;
  if (v12) m3.pNext = &drv;
  vkGetPhysicalDeviceProperties2(phys, &p2);
  d.subgroup_size = sg.subgroupSize;
  const bool sg_compute = sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT;
  d.subgroup_arithmetic = sg_compute && (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  d.subgroup_shuffle = sg_compute && (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  d.subgroup_clustered = sg_compute && (sg.supportedOperations & VK_SUBGROUP_FEATURE_CLUSTERED_BIT);
  d.max_allocation_bytes = m3.maxMemoryAllocationSize;
  if (has_extension(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
    d.compute_units = query_properties(phys, VkPhysicalDeviceShaderSMBuiltinsPropertiesNV{
                                                 VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV})
                          .shaderSMCount;
  } else if (has_extension(exts, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
    const auto cp = query_properties(
        phys, VkPhysicalDeviceShaderCorePropertiesAMD{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD});
    d.compute_units = cp.shaderEngineCount * cp.shaderArraysPerEngineCount * cp.computeUnitsPerShaderArray;
  }
  if (v12) {
    d.driver_name = drv.driverName;
    d.driver_info = drv.driverInfo;
  }

  if (v12) {
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &f11;
    f11.pNext = &f12;
    vkGetPhysicalDeviceFeatures2(phys, &f2);
    d.storage_16bit = f11.storageBuffer16BitAccess;
    d.storage_8bit = f12.storageBuffer8BitAccess;
    d.shader_int8 = f12.shaderInt8;
    d.shader_float16 = f12.shaderFloat16;
    d.shader_int16 = f2.features.shaderInt16;
    d.timeline_semaphore = f12.timelineSemaphore;
    d.buffer_device_address = f12.bufferDeviceAddress;
    d.vulkan_memory_model = f12.vulkanMemoryModel;
    if (has_extension(exts, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) {
      const auto idf = query_features(
          phys, VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR{
                    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR});
      const auto idp = query_properties(
          phys, VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR{
                    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR});
      d.integer_dot = idf.shaderIntegerDotProduct;
      d.integer_dot_accelerated = d.integer_dot && idp.integerDotProduct4x8BitPackedSignedAccelerated;
    }
    if (has_extension(exts, VK_KHR_SHADER_CLOCK_EXTENSION_NAME))
      d.device_clock = query_features(phys, VkPhysicalDeviceShaderClockFeaturesKHR{
                                                VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR})
                           .shaderDeviceClock;
    const auto coopmat_props = reinterpret_cast<PfnCoopMatProperties>(
        vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
    if (has_extension(exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME) && coopmat_props) {
      const auto cmf =
          query_features(phys, VkPhysicalDeviceCooperativeMatrixFeaturesKHR{kStypeCoopMatFeatures});
      uint32_t n = 0;
      if (cmf.cooperativeMatrix && coopmat_props(phys, &n, nullptr) == VK_SUCCESS && n > 0) {
        std::vector<VkCooperativeMatrixPropertiesKHR> props(n, VkCooperativeMatrixPropertiesKHR{kStypeCoopMatProperties});
        if (coopmat_props(phys, &n, props.data()) == VK_SUCCESS) {
          d.cooperative_matrix = true;
          for (uint32_t i = 0; i < n; ++i) {
            const auto& c = props[i];
            d.coopmat_shapes.push_back({c.MSize, c.NSize, c.KSize, static_cast<uint32_t>(c.AType),
                                        static_cast<uint32_t>(c.BType), static_cast<uint32_t>(c.CType),
                                        static_cast<uint32_t>(c.ResultType), c.saturatingAccumulation != VK_FALSE,
                                        static_cast<uint32_t>(c.scope)});
          }
        }
      }
    }
    const auto flexible = reinterpret_cast<PfnCoopMat2Flexible>(
        vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
    if (d.cooperative_matrix && has_extension(exts, kCoopMat2Extension) && flexible && f12.bufferDeviceAddress &&
        f12.vulkanMemoryModel) {
      const CoopMat2Features f = query_coopmat2_features(phys);
      const CoopMat2Properties cp =
          query_properties(phys, CoopMat2Properties{kStypeCoopMat2Properties, nullptr, 0, 0, 0});
      uint32_t n = 0;
      if (f.workgroup_scope && f.flexible_dimensions && f.tensor_addressing && f.block_loads &&
          f.per_element_operations && flexible(phys, &n, nullptr) == VK_SUCCESS && n > 0) {
        std::vector<CoopMat2FlexibleDimensions> props(n, CoopMat2FlexibleDimensions{kStypeCoopMat2Flexible});
        if (flexible(phys, &n, props.data()) == VK_SUCCESS) {
          d.cooperative_matrix2 = true;
          d.coopmat2_max_workgroup = cp.workgroup_scope_max_workgroup_size;
          d.coopmat2_reserved_shared = cp.workgroup_scope_reserved_shared;
          for (uint32_t i = 0; i < n; ++i) {
            const auto& c = props[i];
            d.coopmat2_shapes.push_back({c.MGranularity, c.NGranularity, c.KGranularity, c.AType, c.BType, c.CType,
                                         c.ResultType, c.saturatingAccumulation != VK_FALSE, c.scope,
                                         c.workgroupInvocations});
          }
        }
      }
    }
  }

  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(phys, &mp);
  for (uint32_t h = 0; h < mp.memoryHeapCount; ++h)
    if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d.device_local_bytes += mp.memoryHeaps[h].size;
  if (d.has_memory_budget) {
    query_budget(phys, d.budget_bytes, d.usage_bytes);
  } else {
    d.budget_bytes = d.device_local_bytes;
  }

  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qf.data());
  bool found = false;
  for (uint32_t i = 0; i < nq && !found; ++i) {
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      d.compute_family = i;
      d.compute_queue_count = qf[i].queueCount;
      d.timestamps = qf[i].timestampValidBits > 0 && lim.timestampPeriod > 0;
      found = true;
    }
  }
  for (uint32_t i = 0; i < nq; ++i) {
    const VkQueueFlags f = qf[i].queueFlags;
    if ((f & VK_QUEUE_TRANSFER_BIT) && !(f & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))) {
      d.transfer_family = static_cast<int>(i);
      d.dedicated_transfer = true;
      break;
    }
  }
  return d;
}

bool usable(const DeviceInfo& d) {
  return d.api_version >= VK_API_VERSION_1_2 && d.timeline_semaphore && d.compute_queue_count > 0;
}

int type_rank(DeviceType t) {
  switch (t) {
    case DeviceType::Discrete: return 4;
    case DeviceType::Integrated: return 3;
    case DeviceType::Virtual: return 2;
    case DeviceType::Cpu: return 1;
    default: return 0;
  }
}

}  // namespace

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::Discrete: return "discrete";
    case DeviceType::Integrated: return "integrated";
    case DeviceType::Virtual: return "virtual";
    case DeviceType::Cpu: return "cpu";
    default: return "other";
  }
}

std::string DeviceInfo::api_version_string() const {
  return std::to_string(VK_API_VERSION_MAJOR(api_version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(api_version)) + "." +
         std::to_string(VK_API_VERSION_PATCH(api_version));
}

bool DeviceInfo::has_coopmat2(uint32_t m, uint32_t n, uint32_t k, uint32_t invocations) const {
  if (!cooperative_matrix2) return false;
  for (const auto& c : coopmat2_shapes)
    if (c.a_type == kCoopMatF16 && c.b_type == kCoopMatF16 && c.c_type == kCoopMatF32 &&
        c.result_type == kCoopMatF32 && !c.saturating && c.scope == kCoopMatScopeWorkgroup &&
        c.invocations == invocations && c.m_granularity && m % c.m_granularity == 0 && c.n_granularity &&
        n % c.n_granularity == 0 && c.k_granularity && k % c.k_granularity == 0)
      return true;
  return false;
}

bool DeviceInfo::has_coopmat(uint32_t m, uint32_t n, uint32_t k, uint32_t ab_type, uint32_t cd_type,
                             uint32_t scope) const {
  if (!cooperative_matrix) return false;
  for (const auto& c : coopmat_shapes)
    if (c.m == m && c.n == n && c.k == k && c.a_type == ab_type && c.b_type == ab_type && c.c_type == cd_type &&
        c.result_type == cd_type && c.scope == scope)
      return true;
  return false;
}

std::string DeviceInfo::summary() const {
  std::ostringstream o;
  char vid[16];
  std::snprintf(vid, sizeof vid, "0x%04x", vendor_id);
  o << "[" << index << "] " << name << " (" << vendor << " " << vid << ", "
    << device_type_name(type) << ", Vulkan " << api_version_string();
  if (!driver_name.empty()) o << ", " << driver_name << " " << driver_info;
  o << ")\n";
  o << "    device-local memory " << mib(device_local_bytes) << " MiB";
  if (has_memory_budget) o << ", budget " << mib(budget_bytes) << " MiB, used " << mib(usage_bytes) << " MiB";
  o << "\n    queues: compute family " << compute_family << " (" << compute_queue_count << " queues)";
  if (dedicated_transfer)
    o << ", dedicated transfer family " << transfer_family;
  else
    o << ", no dedicated transfer family";
  o << "\n    subgroup " << subgroup_size << (subgroup_arithmetic ? " arithmetic" : "")
    << (subgroup_shuffle ? " shuffle" : "") << (subgroup_clustered ? " clustered" : "")
    << "; storage 8-bit " << (storage_8bit ? "yes" : "no") << ", 16-bit " << (storage_16bit ? "yes" : "no")
    << "; int8 " << (shader_int8 ? "yes" : "no") << ", int dot " << (integer_dot_accelerated ? "accelerated" : integer_dot ? "yes" : "no") << ", fp16 " << (shader_float16 ? "yes" : "no")
    << "; push descriptors " << (push_descriptor ? "yes" : "no")
    << "; timeline semaphores " << (timeline_semaphore ? "yes" : "no")
    << "; device clock " << (device_clock ? "yes" : "no") << "\n";
  if (compute_units) o << "    compute units " << compute_units << "\n";
  o << "    max workgroup " << max_workgroup_size[0] << "x" << max_workgroup_size[1] << "x"
    << max_workgroup_size[2] << " (" << max_workgroup_invocations << " invocations), shared memory "
    << max_shared_memory_bytes / 1024 << " KiB, storage range " << mib(max_storage_buffer_range)
    << " MiB, timestamps " << (timestamps ? "yes" : "no") << " (" << timestamp_period_ns << " ns/tick)\n";
  if (cooperative_matrix) {
    // e.g. "16x16x16 f16->f32"; types by VkComponentTypeKHR value.
    auto type = [](uint32_t t) -> std::string {
      static const char* names[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
      return t < 11 ? names[t] : "type" + std::to_string(t);
    };
    o << "    cooperative matrices (MxNxK A/B->C):";
    for (const auto& c : coopmat_shapes)
      o << " " << c.m << "x" << c.n << "x" << c.k << " " << type(c.a_type)
        << (c.b_type != c.a_type ? "/" + type(c.b_type) : "") << "->" << type(c.result_type)
        << (c.scope != kCoopMatScopeSubgroup ? " (scope " + std::to_string(c.scope) + ")" : "") << ";";
    o << "\n";
    if (cooperative_matrix2) {
      o << "    VK_NV_cooperative_matrix2 (granularity MxNxK A/B->C, invocations):";
      for (const auto& c : coopmat2_shapes)
        o << " " << c.m_granularity << "x" << c.n_granularity << "x" << c.k_granularity << " " << type(c.a_type)
          << (c.b_type != c.a_type ? "/" + type(c.b_type) : "") << "->" << type(c.result_type) << " "
          << c.invocations << (c.scope != kCoopMatScopeWorkgroup ? " (scope " + std::to_string(c.scope) + ")" : "")
          << ";";
      o << "\n";
    }
  }
  return o.str();
}

std::vector<DeviceInfo> list_devices() {
  VkInstance inst = process_instance(false);
  std::vector<DeviceInfo> out;
  auto devs = physical_devices(inst);
  for (size_t i = 0; i < devs.size(); ++i) out.push_back(describe_device(inst, devs[i], static_cast<int>(i)));
  return out;
}



std::unique_ptr<Context> Context::create(int device_index, const ContextOptions& opts) {
  device_alloc_fault_from_env();
  device_lost_fault_from_env();
  std::unique_ptr<Context> ctx(new Context());
  ctx->init(device_index, opts);
  return ctx;
}

void Context::init(int device_index, const ContextOptions& opts) {
  instance_ = process_instance(opts.validation || env_on("VKMOE_VK_VALIDATION"));
  auto devs = physical_devices(instance_);
  std::vector<DeviceInfo> infos;
  for (size_t i = 0; i < devs.size(); ++i) infos.push_back(describe_device(instance_, devs[i], static_cast<int>(i)));
  int pick = -1;
  if (device_index >= 0) {
    if (device_index >= static_cast<int>(devs.size()))
      throw Error("Vulkan device " + std::to_string(device_index) + " does not exist (" +
                  std::to_string(devs.size()) + " found; see `vkmoe info`)");
    if (!usable(infos[device_index]))
      throw Error("Vulkan device " + std::to_string(device_index) + " (" + infos[device_index].name +
                  ") lacks Vulkan 1.2 with timeline semaphores and compute queues");
    pick = device_index;
  } else {
    for (size_t i = 0; i < infos.size(); ++i) {
      if (!usable(infos[i])) continue;
      if (pick < 0 || type_rank(infos[i].type) > type_rank(infos[pick].type) ||
          (type_rank(infos[i].type) == type_rank(infos[pick].type) &&
           infos[i].device_local_bytes > infos[pick].device_local_bytes))
        pick = static_cast<int>(i);
    }
    if (pick < 0)
      throw Error("no usable Vulkan device: Vulkan 1.2 with timeline semaphores is required; "
                  "update your GPU driver");
  }
  phys_ = devs[pick];
  info_ = infos[pick];

  // Queues: one compute queue, plus a separate transfer queue when possible.
  const uint32_t cf = info_.compute_family;
  int tf = -1;
  uint32_t t_index = 0;
  if (opts.allow_transfer_queue) {
    if (info_.dedicated_transfer) {
      tf = info_.transfer_family;
    } else if (info_.compute_queue_count >= 2) {
      tf = static_cast<int>(cf);
      t_index = 1;
    }
  }
  const float priorities[2] = {1.0f, 1.0f};
  std::vector<VkDeviceQueueCreateInfo> qcis;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueFamilyIndex = cf;
  q.queueCount = (tf == static_cast<int>(cf)) ? 2 : 1;
  q.pQueuePriorities = priorities;
  qcis.push_back(q);
  if (tf >= 0 && tf != static_cast<int>(cf)) {
    q.queueFamilyIndex = static_cast<uint32_t>(tf);
    q.queueCount = 1;
    qcis.push_back(q);
  }

  // Features: everything useful that the device has.
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f2.pNext = &f11;
  f11.pNext = &f12;
  f11.storageBuffer16BitAccess = info_.storage_16bit;
  f12.storageBuffer8BitAccess = info_.storage_8bit;
  f12.shaderInt8 = info_.shader_int8;
  f12.shaderFloat16 = info_.shader_float16;
  f12.timelineSemaphore = VK_TRUE;
  f2.features.shaderInt16 = info_.shader_int16;
  VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idf{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
  if (info_.integer_dot) {
    idf.shaderIntegerDotProduct = VK_TRUE;
    f12.pNext = &idf;
  }
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR cmf{kStypeCoopMatFeatures};
  if (info_.cooperative_matrix) {
    cmf.cooperativeMatrix = VK_TRUE;
    cmf.pNext = f2.pNext;
    f2.pNext = &cmf;
  }

  VkPhysicalDeviceShaderClockFeaturesKHR clk{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
  if (info_.device_clock) {
    clk.shaderDeviceClock = VK_TRUE;
    clk.pNext = f2.pNext;
    f2.pNext = &clk;
  }

  CoopMat2Features cm2f{};
  if (info_.cooperative_matrix2) {
    cm2f = query_coopmat2_features(phys_);
    cm2f.pNext = f2.pNext;
    f2.pNext = &cm2f;
    f12.bufferDeviceAddress = VK_TRUE;
    f12.vulkanMemoryModel = VK_TRUE;
  }

  std::vector<const char*> exts;
  push_descriptors_ = info_.push_descriptor && opts.allow_push_descriptors;
  if (push_descriptors_) exts.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  if (info_.has_memory_budget) exts.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (info_.integer_dot) exts.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  if (info_.cooperative_matrix) exts.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (info_.device_clock) exts.push_back(VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
  if (info_.cooperative_matrix2) exts.push_back(kCoopMat2Extension);
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pef{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  {
    const auto all = device_extensions(phys_);
    if (has_extension(all, "VK_KHR_portability_subset")) exts.push_back("VK_KHR_portability_subset");
    if (pipeline_stats_requested() && has_extension(all, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
      exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
      pef.pipelineExecutableInfo = VK_TRUE;
      pef.pNext = f2.pNext;
      f2.pNext = &pef;
      pipeline_stats_ = true;
    }
  }

  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &f2;
  dci.queueCreateInfoCount = static_cast<uint32_t>(qcis.size());
  dci.pQueueCreateInfos = qcis.data();
  dci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  dci.ppEnabledExtensionNames = exts.data();
  check(vkCreateDevice(phys_, &dci, nullptr, &device_), "vkCreateDevice");

  auto make_queue = [&](uint32_t family, uint32_t index) {
    std::unique_ptr<Queue> queue(new Queue());
    queue->device_ = device_;
    queue->family_ = family;
    queue->poll_ns_ = info_.type == DeviceType::Cpu ? 0 : 500'000;
    vkGetDeviceQueue(device_, family, index, &queue->queue_);
    VkSemaphoreTypeCreateInfo st{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    st.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    st.initialValue = 0;
    VkSemaphoreCreateInfo sci{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    sci.pNext = &st;
    check(vkCreateSemaphore(device_, &sci, nullptr, &queue->timeline_), "vkCreateSemaphore");
    return queue;
  };
  compute_ = make_queue(cf, 0);
  if (tf >= 0) transfer_ = make_queue(static_cast<uint32_t>(tf), t_index);

  if (push_descriptors_) {
    cmd_push_descriptor_ = reinterpret_cast<PFN_vkCmdPushDescriptorSetKHR>(
        vkGetDeviceProcAddr(device_, "vkCmdPushDescriptorSetKHR"));
    if (!cmd_push_descriptor_) push_descriptors_ = false;
  }
  vkGetPhysicalDeviceMemoryProperties(phys_, &mem_props_);
}

Context::~Context() {
  if (device_) {
    vkDeviceWaitIdle(device_);
    for (auto& [key, p] : pipelines_) {
      vkDestroyPipeline(device_, p->pipeline, nullptr);
      vkDestroyPipelineLayout(device_, p->layout, nullptr);
      vkDestroyDescriptorSetLayout(device_, p->set_layout, nullptr);
    }
    if (compute_) vkDestroySemaphore(device_, compute_->timeline_, nullptr);
    if (transfer_) vkDestroySemaphore(device_, transfer_->timeline_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
}


void Context::idle_for_teardown() noexcept {
  if (device_) vkDeviceWaitIdle(device_);
}

void Context::wait_idle() {
  compute_->wait_idle();
  if (transfer_) transfer_->wait_idle();
}


MemoryBudget Context::memory_budget() const {
  MemoryBudget mb;
  if (info_.has_memory_budget) {
    query_budget(phys_, mb.budget, mb.usage);
    mb.from_extension = true;
  } else {
    mb.budget = info_.device_local_bytes;
    mb.usage = allocated_bytes(MemoryKind::Device);
  }
  return mb;
}

}  // namespace vkmoe::vk
