#include "engine/vulkan/vk_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include "engine/vulkan/alloc_fault.h"
#include "engine/vulkan/device_lost.h"
#include "engine/vulkan/pipeline_stats.h"
#include "engine/vulkan/shaders.h"

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

const char* kNoDriver =
    "no Vulkan driver found: install your GPU vendor's Vulkan driver, or mesa-vulkan-drivers "
    "for the CPU driver lavapipe";

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / (1024.0 * 1024.0));
  return buf;
}

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

// The features the cm2 GEMM needs (queried; also what is enabled).
CoopMat2Features query_coopmat2_features(VkPhysicalDevice phys) {
  CoopMat2Features f{kStypeCoopMat2Features, nullptr, 0, 0, 0, 0, 0, 0, 0};
  VkPhysicalDeviceFeatures2 g2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  g2.pNext = &f;
  vkGetPhysicalDeviceFeatures2(phys, &g2);
  return f;
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice phys) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, exts.data());
  exts.resize(n);
  return exts;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
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
      VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idf{
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
      VkPhysicalDeviceFeatures2 g2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      g2.pNext = &idf;
      vkGetPhysicalDeviceFeatures2(phys, &g2);
      VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR idp{
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
      VkPhysicalDeviceProperties2 q2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
      q2.pNext = &idp;
      vkGetPhysicalDeviceProperties2(phys, &q2);
      d.integer_dot = idf.shaderIntegerDotProduct;
      d.integer_dot_accelerated = d.integer_dot && idp.integerDotProduct4x8BitPackedSignedAccelerated;
    }
    const auto coopmat_props = reinterpret_cast<PfnCoopMatProperties>(
        vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
    if (has_extension(exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME) && coopmat_props) {
      VkPhysicalDeviceCooperativeMatrixFeaturesKHR cmf{kStypeCoopMatFeatures};
      VkPhysicalDeviceFeatures2 g2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
      g2.pNext = &cmf;
      vkGetPhysicalDeviceFeatures2(phys, &g2);
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
      CoopMat2Properties cp{kStypeCoopMat2Properties, nullptr, 0, 0, 0};
      VkPhysicalDeviceProperties2 q2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
      q2.pNext = &cp;
      vkGetPhysicalDeviceProperties2(phys, &q2);
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
    << "; timeline semaphores " << (timeline_semaphore ? "yes" : "no") << "\n";
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

// ---------------------------------------------------------------- Buffer

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept { *this = std::move(o); }

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    ctx_ = o.ctx_;
    buffer_ = o.buffer_;
    memory_ = o.memory_;
    size_ = o.size_;
    kind_ = o.kind_;
    mapped_ = o.mapped_;
    name_ = std::move(o.name_);
    o.ctx_ = nullptr;
    o.buffer_ = VK_NULL_HANDLE;
    o.memory_ = VK_NULL_HANDLE;
    o.size_ = 0;
    o.mapped_ = nullptr;
  }
  return *this;
}

void Buffer::release() {
  if (ctx_ && buffer_ != VK_NULL_HANDLE) ctx_->free_buffer(*this);
  ctx_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
  size_ = 0;
}

// ---------------------------------------------------------------- Queue / SyncPoint

bool SyncPoint::reached() const { return !queue || queue->completed() >= value; }

void SyncPoint::wait() const {
  if (queue) queue->wait(value);
}

SyncPoint Queue::submit(std::span<const VkCommandBuffer> cbs, std::span<const SyncPoint> waits) {
  std::vector<VkSemaphore> wait_sems;
  std::vector<uint64_t> wait_values;
  std::vector<VkPipelineStageFlags> wait_stages;
  for (const SyncPoint& w : waits) {
    if (!w.queue || w.value == 0) continue;
    wait_sems.push_back(w.queue->timeline());
    wait_values.push_back(w.value);
    wait_stages.push_back(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t value = last_submitted_.load() + 1;
  VkTimelineSemaphoreSubmitInfo ts{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  ts.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
  ts.pWaitSemaphoreValues = wait_values.data();
  ts.signalSemaphoreValueCount = 1;
  ts.pSignalSemaphoreValues = &value;
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.pNext = &ts;
  si.waitSemaphoreCount = static_cast<uint32_t>(wait_sems.size());
  si.pWaitSemaphores = wait_sems.data();
  si.pWaitDstStageMask = wait_stages.data();
  si.commandBufferCount = static_cast<uint32_t>(cbs.size());
  si.pCommandBuffers = cbs.data();
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &timeline_;
  check(vkQueueSubmit(queue_, 1, &si, VK_NULL_HANDLE), "vkQueueSubmit");
  last_submitted_.store(value);
  return SyncPoint{this, value};
}

uint64_t Queue::completed() const {
  uint64_t v = 0;
  check(vkGetSemaphoreCounterValue(device_, timeline_, &v), "vkGetSemaphoreCounterValue");
  return v;
}

void Queue::wait(uint64_t value) const {
  if (value == 0) return;
  if (value > last_submitted_.load())
    throw Error("internal error: waiting for timeline value " + std::to_string(value) +
                " that was never submitted");
  if (device_was_lost()) check(VK_ERROR_DEVICE_LOST, "an earlier command");  // it would never signal
  VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  wi.semaphoreCount = 1;
  wi.pSemaphores = &timeline_;
  wi.pValues = &value;
  VkResult r = VK_NOT_READY;
  if (poll_ns_ > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(poll_ns_);
    uint64_t reached = 0;
    do {
      if (vkGetSemaphoreCounterValue(device_, timeline_, &reached) != VK_SUCCESS) break;  // the wait reports it
      if (reached >= value) r = VK_SUCCESS;
      else std::this_thread::yield();
    } while (r != VK_SUCCESS && std::chrono::steady_clock::now() < until);
  }
  if (r != VK_SUCCESS) r = vkWaitSemaphores(device_, &wi, UINT64_MAX);
  if (r == VK_SUCCESS && device_lost_fault_fires()) r = VK_ERROR_DEVICE_LOST;
  check(r, "vkWaitSemaphores");
}

// ---------------------------------------------------------------- Context

std::unique_ptr<Context> Context::create(int device_index, const ContextOptions& opts) {
  device_alloc_fault_from_env();
  device_lost_fault_from_env();
  std::unique_ptr<Context> ctx(new Context());
  ctx->init(device_index, opts);
  return ctx;
}

void Context::init(int device_index, const ContextOptions& opts) {
  instance_ = process_instance(opts.validation || env_flag("VKMOE_VK_VALIDATION"));
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

namespace {
// Best memory type among `bits` that has `required`, scoring preferred and
// avoided property flags.
int pick_memory_type(const VkPhysicalDeviceMemoryProperties& mp, uint32_t bits,
                     VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                     VkMemoryPropertyFlags avoided) {
  int best = -1, best_score = -1000;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    if (!(bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    int score = 0;
    score += 2 * __builtin_popcount(f & preferred);
    score -= __builtin_popcount(f & avoided);
    if (score > best_score) {
      best = static_cast<int>(i);
      best_score = score;
    }
  }
  return best;
}
}  // namespace

Buffer Context::create_buffer(uint64_t bytes, MemoryKind kind, const std::string& what) {
  if (bytes == 0) throw Error("internal error: zero-sized buffer requested for " + what);
  if (info_.max_allocation_bytes && bytes > info_.max_allocation_bytes)
    throw Error("buffer of " + mib(bytes) + " MiB for " + what + " exceeds the device's largest allocation (" +
                mib(info_.max_allocation_bytes) + " MiB)");
  const uint64_t vk_size = (bytes + 15) & ~uint64_t(15);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = vk_size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
              VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // cm2 shaders form buffer references (decode callbacks) into bound buffers.
  if (info_.cooperative_matrix2) bci.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  uint32_t families[2] = {compute_->family(), transfer_ ? transfer_->family() : compute_->family()};
  if (families[0] != families[1]) {
    bci.sharingMode = VK_SHARING_MODE_CONCURRENT;
    bci.queueFamilyIndexCount = 2;
    bci.pQueueFamilyIndices = families;
  } else {
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  }
  auto out_of_memory = [&](bool injected) {
    const MemoryBudget mb = memory_budget();
    const std::string msg = std::string(kind == MemoryKind::Device ? "out of device memory"
                                                                   : "out of host-visible memory") +
                            " allocating " + mib(bytes) + " MiB for " + what + " (budget " + mib(mb.free()) +
                            " MiB free" + (injected ? ", failure injected by VKMOE_FAIL_DEVICE_ALLOC" : "") +
                            "); lower --vram-budget or close other GPU programs";
    if (kind == MemoryKind::Device)
      throw OutOfDeviceMemory(msg, what, bytes, allocated_bytes(MemoryKind::Device), injected);
    throw Error(msg);
  };
  Buffer b;
  VkResult r = vkCreateBuffer(device_, &bci, nullptr, &b.buffer_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY) out_of_memory(false);
  if (r != VK_SUCCESS) check(r, ("vkCreateBuffer for " + what).c_str());
  b.ctx_ = this;
  b.size_ = bytes;
  b.kind_ = kind;
  b.name_ = what;

  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  int type = -1;
  const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                              CA = VK_MEMORY_PROPERTY_HOST_CACHED_BIT, DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  switch (kind) {
    case MemoryKind::Device: type = pick_memory_type(mem_props_, req.memoryTypeBits, DL, 0, HV); break;
    case MemoryKind::Upload: type = pick_memory_type(mem_props_, req.memoryTypeBits, HV | HC, 0, CA | DL); break;
    case MemoryKind::Readback: type = pick_memory_type(mem_props_, req.memoryTypeBits, HV | HC, CA, DL); break;
  }
  if (type < 0) {
    throw Error("no suitable Vulkan memory type for " + what);
  }
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  VkMemoryDedicatedAllocateInfo dedicated{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
  if (req.size >= (16u << 20)) {
    dedicated.buffer = b.buffer_;
    mai.pNext = &dedicated;
  }
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  if (info_.cooperative_matrix2) {
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    flags.pNext = const_cast<void*>(mai.pNext);
    mai.pNext = &flags;
  }
  // An injected fault (set_device_alloc_fault) takes the path of a real failure.
  const bool injected =
      kind == MemoryKind::Device && device_alloc_fault_fires(allocated_bytes(MemoryKind::Device), bytes);
  r = injected ? VK_ERROR_OUT_OF_DEVICE_MEMORY : vkAllocateMemory(device_, &mai, nullptr, &b.memory_);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_TOO_MANY_OBJECTS)
    out_of_memory(injected);
  check(r, ("vkAllocateMemory for " + what).c_str());
  check(vkBindBufferMemory(device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory");
  if (kind != MemoryKind::Device) {
    void* p = nullptr;
    check(vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
    b.mapped_ = static_cast<uint8_t*>(p);
  }
  allocated_total_ += bytes;
  allocated_kind_[static_cast<int>(kind)] += bytes;
  return b;
}

void Context::free_buffer(Buffer& b) {
  if (b.mapped_) vkUnmapMemory(device_, b.memory_);
  vkDestroyBuffer(device_, b.buffer_, nullptr);
  if (b.memory_) {
    vkFreeMemory(device_, b.memory_, nullptr);
    allocated_total_ -= b.size_;
    allocated_kind_[static_cast<int>(b.kind_)] -= b.size_;
  }
}

uint64_t Context::allocated_bytes(MemoryKind kind) const {
  return allocated_kind_[static_cast<int>(kind)].load();
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

void Context::write_buffer(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes) {
  if (offset + bytes > dst.size()) throw Error("internal error: write past the end of " + dst.name());
  if (bytes == 0) return;
  if (dst.data()) {
    wait_idle();
    std::memcpy(dst.data() + offset, src, bytes);
    return;
  }
  Buffer staging = create_buffer(bytes, MemoryKind::Upload, "staging for " + dst.name());
  std::memcpy(staging.data(), src, bytes);
  Recorder rec(*this);
  rec.begin();
  rec.barrier();
  rec.copy(staging, 0, dst, offset, bytes);
  rec.barrier();
  rec.submit().wait();
}

void Context::read_buffer(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  if (offset + bytes > src.size()) throw Error("internal error: read past the end of " + src.name());
  if (bytes == 0) return;
  if (src.data()) {
    wait_idle();
    std::memcpy(dst, src.data() + offset, bytes);
    return;
  }
  Buffer staging = create_buffer(bytes, MemoryKind::Readback, "readback of " + src.name());
  Recorder rec(*this);
  rec.begin();
  rec.barrier();
  rec.copy(src, offset, staging, 0, bytes);
  rec.submit().wait();
  std::memcpy(dst, staging.data(), bytes);
}

void Context::idle_for_teardown() noexcept {
  if (device_) vkDeviceWaitIdle(device_);
}

void Context::wait_idle() {
  compute_->wait_idle();
  if (transfer_) transfer_->wait_idle();
}

// ---------------------------------------------------------------- TimestampPool

TimestampPool::TimestampPool(Context& ctx, uint32_t count) : ctx_(ctx), count_(count) {
  if (!ctx.info().timestamps) throw Error("this Vulkan device does not support timestamps on its compute queue");
  VkQueryPoolCreateInfo ci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = count;
  check(vkCreateQueryPool(ctx.device(), &ci, nullptr, &pool_), "vkCreateQueryPool");
}

TimestampPool::~TimestampPool() { vkDestroyQueryPool(ctx_.device(), pool_, nullptr); }

std::vector<double> TimestampPool::read_ns(uint32_t first, uint32_t count) const {
  std::vector<uint64_t> ticks(count);
  check(vkGetQueryPoolResults(ctx_.device(), pool_, first, count, count * sizeof(uint64_t), ticks.data(),
                              sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
        "vkGetQueryPoolResults");
  std::vector<double> ns(count);
  for (uint32_t i = 0; i < count; ++i) ns[i] = static_cast<double>(ticks[i]) * ctx_.info().timestamp_period_ns;
  return ns;
}

// ---------------------------------------------------------------- Recorder

Recorder::Recorder(Context& ctx, Queue* queue) : ctx_(ctx), queue_(queue ? queue : &ctx.compute_queue()) {
  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = queue_->family();
  check(vkCreateCommandPool(ctx.device(), &pci, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkResult r = vkAllocateCommandBuffers(ctx.device(), &ai, &cb_);
  if (r != VK_SUCCESS) {
    vkDestroyCommandPool(ctx.device(), pool_, nullptr);
    check(r, "vkAllocateCommandBuffers");
  }
}

Recorder::~Recorder() {
  try {
    last_.wait();
  } catch (...) {
    ctx_.idle_for_teardown();
  }
  if (recording_) vkEndCommandBuffer(cb_);
  for (VkDescriptorPool p : desc_pools_) vkDestroyDescriptorPool(ctx_.device(), p, nullptr);
  vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
}

void Recorder::begin() {
  if (recording_) throw Error("internal error: Recorder::begin while already recording");
  last_.wait();
  check(vkResetCommandBuffer(cb_, 0), "vkResetCommandBuffer");
  for (VkDescriptorPool p : desc_pools_) vkResetDescriptorPool(ctx_.device(), p, 0);
  desc_pool_cur_ = 0;
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
  recording_ = true;
  has_commands_ = false;
  bound_ = nullptr;
  dispatches_ = 0;
}

void Recorder::discard() {
  if (!recording_) return;
  check(vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
  recording_ = false;
  has_commands_ = false;
}

void Recorder::require_recording(const char* what) const {
  if (!recording_) throw Error(std::string("internal error: Recorder::") + what + " outside begin()/submit()");
}

VkDescriptorSet Recorder::allocate_set(VkDescriptorSetLayout layout) {
  constexpr uint32_t kSets = 256, kDescriptors = kSets * 8;
  for (;;) {
    if (desc_pool_cur_ == desc_pools_.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kDescriptors};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.maxSets = kSets;
      ci.poolSizeCount = 1;
      ci.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      check(vkCreateDescriptorPool(ctx_.device(), &ci, nullptr, &pool), "vkCreateDescriptorPool");
      desc_pools_.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = desc_pools_[desc_pool_cur_];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkResult r = vkAllocateDescriptorSets(ctx_.device(), &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) check(r, "vkAllocateDescriptorSets");
    ++desc_pool_cur_;
  }
}

void Recorder::dispatch(const Pipeline& p, std::span<const BufferRange> bindings, const void* push,
                        uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  require_recording("dispatch");
  const DeviceInfo& di = ctx_.info();
  if (bindings.size() != p.n_bindings)
    throw Error("internal error: " + p.shader + " expects " + std::to_string(p.n_bindings) + " bindings, got " +
                std::to_string(bindings.size()));
  if (push_bytes != p.push_bytes)
    throw Error("internal error: " + p.shader + " expects " + std::to_string(p.push_bytes) +
                " bytes of push constants, got " + std::to_string(push_bytes));
  if (gx > di.max_workgroup_count[0] || gy > di.max_workgroup_count[1] || gz > di.max_workgroup_count[2])
    throw Error("internal error: " + p.shader + " dispatch of " + std::to_string(gx) + "x" + std::to_string(gy) +
                "x" + std::to_string(gz) + " workgroups exceeds the device limit");
  VkDescriptorBufferInfo infos[16];
  VkWriteDescriptorSet writes[16];
  if (bindings.size() > 16) throw Error("internal error: more than 16 bindings");
  for (size_t i = 0; i < bindings.size(); ++i) {
    const BufferRange& b = bindings[i];
    if (b.buffer == VK_NULL_HANDLE) throw Error("internal error: " + p.shader + " binding " + std::to_string(i) + " is empty");
    if (b.range > di.max_storage_buffer_range)
      throw Error("internal error: " + p.shader + " binding " + std::to_string(i) + " covers " + mib(b.range) +
                  " MiB, more than the device's storage range of " + mib(di.max_storage_buffer_range) + " MiB");
    if (di.min_storage_offset_alignment && b.offset % di.min_storage_offset_alignment)
      throw Error("internal error: " + p.shader + " binding " + std::to_string(i) + " offset " +
                  std::to_string(b.offset) + " is not a multiple of " + std::to_string(di.min_storage_offset_alignment));
    infos[i] = {b.buffer, b.offset, b.range};
    writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  if (bound_ != &p) {
    vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    bound_ = &p;
  }
  const uint32_t n = static_cast<uint32_t>(bindings.size());
  if (n > 0) {
    if (ctx_.push_descriptors()) {
      ctx_.push_descriptor_fn()(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, n, writes);
    } else {
      VkDescriptorSet set = allocate_set(p.set_layout);
      for (uint32_t i = 0; i < n; ++i) writes[i].dstSet = set;
      vkUpdateDescriptorSets(ctx_.device(), n, writes, 0, nullptr);
      vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    }
  }
  if (push_bytes) vkCmdPushConstants(cb_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vkCmdDispatch(cb_, gx, gy, gz);
  has_commands_ = true;
  ++dispatches_;
}

namespace {
VkPipelineStageFlags work_stages(const Context& ctx, const Queue& q) {
  // A transfer-only queue supports neither the compute stage nor shader access.
  const bool compute = q.family() == ctx.info().compute_family;
  return VK_PIPELINE_STAGE_TRANSFER_BIT | (compute ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : 0);
}
}  // namespace

void Recorder::barrier() {
  require_recording("barrier");
  const VkPipelineStageFlags stages = work_stages(ctx_, *queue_);
  const bool compute = stages & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | (compute ? VK_ACCESS_SHADER_WRITE_BIT : 0);
  mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     (compute ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT : 0);
  vkCmdPipelineBarrier(cb_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Recorder::copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset, uint64_t bytes) {
  require_recording("copy");
  if (bytes == 0) return;
  if (src_offset + bytes > src.size() || dst_offset + bytes > dst.size())
    throw Error("internal error: copy of " + std::to_string(bytes) + " bytes out of bounds (" + src.name() + " -> " +
                dst.name() + ")");
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
  has_commands_ = true;
}

void Recorder::fill(const Buffer& dst, uint64_t offset, uint64_t bytes, uint32_t value) {
  require_recording("fill");
  if (bytes == 0) return;
  if (offset % 4 || bytes % 4 || offset + bytes > ((dst.size() + 15) & ~uint64_t(15)))
    throw Error("internal error: fill of " + dst.name() + " misaligned or out of bounds");
  vkCmdFillBuffer(cb_, dst.handle(), offset, bytes, value);
  has_commands_ = true;
}

void Recorder::reset_timestamps(TimestampPool& pool, uint32_t first, uint32_t count) {
  require_recording("reset_timestamps");
  vkCmdResetQueryPool(cb_, pool.handle(), first, count);
}

void Recorder::timestamp(TimestampPool& pool, uint32_t index) {
  require_recording("timestamp");
  vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool.handle(), index);
  has_commands_ = true;
}

SyncPoint Recorder::submit(std::span<const SyncPoint> waits) {
  if (recording_) {
    // Make device writes visible to host reads after the host waits.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    const VkPipelineStageFlags stages = work_stages(ctx_, *queue_);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT |
                       ((stages & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT) ? VK_ACCESS_SHADER_WRITE_BIT : 0);
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb_, stages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    check(vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
    recording_ = false;
    has_commands_ = true;
  } else if (!has_commands_) {
    throw Error("internal error: Recorder::submit without recorded commands");
  } else {
    last_.wait();  // re-submission of the same commands
  }
  VkCommandBuffer cb = cb_;
  last_ = queue_->submit(std::span<const VkCommandBuffer>(&cb, 1), waits);
  return last_;
}

// ---------------------------------------------------------------- Uploader

Uploader::Uploader(Context& ctx, uint64_t staging_bytes, uint32_t slots)
    : queue_(&ctx.transfer_queue()) {
  if (slots == 0) slots = 1;
  const uint64_t per_slot = std::max<uint64_t>((staging_bytes / slots) & ~uint64_t(255), 256);
  slots_.resize(slots);
  for (uint32_t i = 0; i < slots; ++i) {
    slots_[i].staging = ctx.create_buffer(per_slot, MemoryKind::Upload, "upload staging");
    slots_[i].rec = std::make_unique<Recorder>(ctx, queue_);
  }
}

Uploader::~Uploader() {
  try {
    flush();
  } catch (...) {
  }
  slots_.clear();  // recorders wait for their submissions
}

void Uploader::enqueue(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  if (dst_offset + bytes > dst.size())
    throw Error("internal error: upload of " + std::to_string(bytes) + " bytes past the end of " + dst.name());
  const uint8_t* p = static_cast<const uint8_t*>(src);
  while (bytes > 0) {
    Slot& s = slots_[cur_];
    if (!s.rec->recording()) {
      s.rec->begin();  // waits until this slot's previous copies have landed
      s.used = 0;
    }
    const uint64_t cap = s.staging.size();
    const uint64_t chunk = std::min(bytes, cap - s.used);
    if (chunk == 0) {
      next_slot();
      continue;
    }
    std::memcpy(s.staging.data() + s.used, p, chunk);
    s.rec->copy(s.staging, s.used, dst, dst_offset, chunk);
    s.used = std::min(cap, (s.used + chunk + 15) & ~uint64_t(15));
    p += chunk;
    dst_offset += chunk;
    bytes -= chunk;
    bytes_uploaded_ += chunk;
  }
}

void Uploader::next_slot() {
  Slot& s = slots_[cur_];
  if (s.rec->recording()) last_ = s.rec->submit();
  cur_ = (cur_ + 1) % slots_.size();
}

SyncPoint Uploader::flush() {
  if (slots_.empty()) return last_;
  Slot& s = slots_[cur_];
  if (s.rec->recording() && s.used > 0) next_slot();
  return last_;
}

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") == 0;
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "1") == 0;
}

}  // namespace vkmoe::vk
