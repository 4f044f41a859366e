#pragma once
// Small RAII layer over the Vulkan C API for compute: device discovery,
// buffers, cached compute pipelines, command recording, timeline-semaphore
// submission, async uploads and GPU timestamps. Failures throw vkmoe::Error.
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace vkmoe::vk {

enum class DeviceType { Other, Integrated, Discrete, Virtual, Cpu };
const char* device_type_name(DeviceType t);

// One supported VK_KHR_cooperative_matrix configuration: D (MxN, result_type)
// = A (MxK, a_type) * B (KxN, b_type) + C (MxN, c_type). Types are
// VkComponentTypeKHR values (0 = f16, 1 = f32, 3 = s8, 5 = s32, ...); scope
// is VkScopeKHR (3 = subgroup).
struct CoopMatShape {
  uint32_t m = 0, n = 0, k = 0;
  uint32_t a_type = 0, b_type = 0, c_type = 0, result_type = 0;
  bool saturating = false;
  uint32_t scope = 0;
};
constexpr uint32_t kCoopMatF16 = 0, kCoopMatF32 = 1, kCoopMatScopeWorkgroup = 2, kCoopMatScopeSubgroup = 3;

// One VK_NV_cooperative_matrix2 flexible-dimension configuration: any M, N, K
// that are multiples of the granularities, for workgroups of `invocations`.
struct CoopMat2Shape {
  uint32_t m_granularity = 0, n_granularity = 0, k_granularity = 0;
  uint32_t a_type = 0, b_type = 0, c_type = 0, result_type = 0;
  bool saturating = false;
  uint32_t scope = 0, invocations = 0;
};

struct DeviceInfo {
  int index = -1;  // position in list_devices(), as accepted by Context::create
  std::string name;
  uint32_t vendor_id = 0;
  std::string vendor;  // "NVIDIA", "AMD", "Intel", "Apple", "ARM", "Qualcomm", "Mesa", ...
  DeviceType type = DeviceType::Other;
  uint32_t api_version = 0;  // VK_MAKE_API_VERSION encoding
  std::string driver_name, driver_info;
  uint64_t device_local_bytes = 0;  // sum of the DEVICE_LOCAL heaps
  // VK_EXT_memory_budget over the device-local heaps (when absent: budget =
  // device_local_bytes, usage = 0, has_memory_budget = false).
  bool has_memory_budget = false;
  uint64_t budget_bytes = 0, usage_bytes = 0;
  uint32_t compute_family = 0, compute_queue_count = 0;
  int transfer_family = -1;         // a transfer-only family (no graphics/compute), or -1
  bool dedicated_transfer = false;  // transfer_family >= 0
  uint32_t subgroup_size = 0;
  // Compute units (NVIDIA SMs by VK_NV_shader_sm_builtins, AMD CUs by
  // VK_AMD_shader_core_properties); 0 where the driver does not say.
  uint32_t compute_units = 0;
  bool subgroup_arithmetic = false, subgroup_shuffle = false, subgroup_clustered = false;
  bool storage_8bit = false, storage_16bit = false;
  bool shader_int8 = false, shader_int16 = false, shader_float16 = false;
  // VK_KHR_shader_integer_dot_product (enabled when present); accelerated:
  // packed signed 4x8-bit dot products run as native instructions.
  bool integer_dot = false, integer_dot_accelerated = false;
  bool timeline_semaphore = false, push_descriptor = false;
  bool buffer_device_address = false, vulkan_memory_model = false;
  // VK_KHR_cooperative_matrix (enabled when present) in compute shaders, and
  // its supported configurations.
  bool cooperative_matrix = false;
  std::vector<CoopMatShape> coopmat_shapes;
  bool has_coopmat(uint32_t m, uint32_t n, uint32_t k, uint32_t ab_type, uint32_t cd_type,
                   uint32_t scope = kCoopMatScopeSubgroup) const;
  // VK_NV_cooperative_matrix2 with workgroup scope, flexible dimensions,
  // tensor addressing, block loads and per-element operations (enabled, with
  // buffer device addresses and the Vulkan memory model, when present).
  bool cooperative_matrix2 = false;
  std::vector<CoopMat2Shape> coopmat2_shapes;
  uint32_t coopmat2_max_workgroup = 0;     // invocations of a workgroup-scope matrix workgroup
  uint32_t coopmat2_reserved_shared = 0;   // shared memory bytes the implementation keeps for itself
  // Whether an f16 x f16 -> f32 workgroup-scope product of m x n x k runs in
  // workgroups of `invocations`.
  bool has_coopmat2(uint32_t m, uint32_t n, uint32_t k, uint32_t invocations) const;
  uint32_t max_workgroup_size[3] = {0, 0, 0};
  uint32_t max_workgroup_count[3] = {0, 0, 0};
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_shared_memory_bytes = 0;
  uint64_t max_storage_buffer_range = 0;   // largest range one binding may cover
  uint32_t max_storage_buffers = 0;        // storage buffer bindings one shader may use
  uint64_t min_storage_offset_alignment = 0;  // binding offsets must be multiples
  uint64_t max_allocation_bytes = 0;
  bool timestamps = false;         // compute queue supports timestamps
  // VK_KHR_shader_clock's device-scope clock (GL_EXT_shader_realtime_clock),
  // enabled when present: the fused decode kernel's phase clocks.
  bool device_clock = false;
  float timestamp_period_ns = 0;   // nanoseconds per timestamp tick

  std::string api_version_string() const;
  std::string summary() const;  // multi-line human-readable description
};

// Every physical device of every installed driver. Throws Error with a hint
// when no Vulkan loader, driver or device is present.
std::vector<DeviceInfo> list_devices();

enum class MemoryKind {
  Device,    // device-local, not mapped
  Upload,    // host-visible + coherent, mapped (staging, host -> device)
  Readback,  // host-visible + coherent, cached when available, mapped
};

class Context;
class Queue;

// Device-local memory ran out (VK_ERROR_OUT_OF_DEVICE_MEMORY, or an injected
// fault): callers that can do with less VRAM catch this type.
struct OutOfDeviceMemory : Error {
  OutOfDeviceMemory(const std::string& msg, std::string buffer, uint64_t bytes, uint64_t in_use, bool injected)
      : Error(msg), buffer(std::move(buffer)), bytes(bytes), in_use(in_use), injected(injected) {}
  std::string buffer;   // what the failed allocation was for
  uint64_t bytes;       // its size
  uint64_t in_use;      // device memory the Context had allocated then
  bool injected;        // by set_device_alloc_fault
};

// Fault injection for tests: device-local allocations (MemoryKind::Device)
// fail as if the driver returned VK_ERROR_OUT_OF_DEVICE_MEMORY.
//   "after:N"    the first N device allocations from now on succeed, later ones fail
//   "over:SIZE"  an allocation fails when it would bring its Context's device
//                memory in use above SIZE (bytes, or with a K/M/G suffix)
//   "from:NAME"  the device allocation of the buffer named NAME and every later one fail
//   "" / "off"   no injected failures
// The environment variable VKMOE_FAIL_DEVICE_ALLOC sets it when the first
// Context is created. Throws Error on a malformed spec.
void set_device_alloc_fault(const std::string& spec);
// Device allocations attempted since set_device_alloc_fault last ran.
uint64_t device_alloc_count();

// The device was lost (VK_ERROR_DEVICE_LOST: GPU hang, driver reset, or an
// injected fault). Every later queue wait throws it too, at once.
struct DeviceLost : Error {
  using Error::Error;
};
// Fault injection for tests: "after:N" makes the (N+1)-th queue wait from now
// on report VK_ERROR_DEVICE_LOST; "" / "off" ends it. The environment variable
// VKMOE_FAULT_DEVICE_LOST sets it when the first Context is created.
void set_device_lost_fault(const std::string& spec);

// Environment switches: whether the variable `name` is "0" / set to anything
// else (callers keep the answer in a static).
bool env_off(const char* name);
bool env_on(const char* name);

// A VkBuffer with its own memory. Move-only; freed on destruction.
// Usage: storage + transfer src/dst, whatever the kind.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  // Mapped memory of Upload/Readback buffers; nullptr for Device buffers.
  uint8_t* data() const { return mapped_; }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(mapped_); }

 private:
  friend class Context;
  void release();
  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t size_ = 0;
  MemoryKind kind_ = MemoryKind::Device;
  uint8_t* mapped_ = nullptr;
  std::string name_;
};

// One descriptor binding: a range of a buffer. range must not exceed
// DeviceInfo::max_storage_buffer_range and offset must be a multiple of
// min_storage_offset_alignment (checked when recorded).
struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;
  uint64_t range = 0;
  BufferRange() = default;
  BufferRange(const Buffer& b) : buffer(b.handle()), offset(0), range(b.size()) {}  // NOLINT
  // range == 0 means "to the end of the buffer".
  BufferRange(const Buffer& b, uint64_t off, uint64_t len = 0)
      : buffer(b.handle()), offset(off), range(len ? len : b.size() - off) {}
};

// b with its range rounded up to whole 32-bit words, for shaders that read
// data of 1- or 2-byte alignment as the aligned words around it (the last may
// run up to 3 bytes past the data: Context buffers are padded to 16 bytes, so
// it stays inside the buffer; without it a bounds-checking driver such as
// lavapipe reads a partial last word as 0). As it is where b's offset is not
// word-aligned or the range would pass max_range.
inline BufferRange whole_words(BufferRange b, uint64_t max_range) {
  if (b.offset % 4 == 0 && b.range + 3 <= max_range) b.range = (b.range + 3) & ~uint64_t(3);
  return b;
}

// A value on a queue's timeline semaphore. Default-constructed = already reached.
struct SyncPoint {
  Queue* queue = nullptr;
  uint64_t value = 0;
  bool reached() const;  // non-blocking poll
  void wait() const;     // host wait; throws Error on device loss
};

// A VkQueue with a timeline semaphore that each submission signals with the
// next value. Thread-safe (submissions are serialized by a mutex).
class Queue {
 public:
  uint32_t family() const { return family_; }
  VkQueue handle() const { return queue_; }
  VkSemaphore timeline() const { return timeline_; }
  // Submits command buffers after GPU-side waits on the given points (any
  // queue), and returns the point signalled when they complete.
  SyncPoint submit(std::span<const VkCommandBuffer> cbs, std::span<const SyncPoint> waits = {});
  uint64_t last_submitted() const { return last_submitted_.load(); }
  uint64_t completed() const;  // current counter value
  void wait(uint64_t value) const;
  void wait_idle() const { wait(last_submitted()); }

 private:
  friend class Context;
  Queue() = default;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  // How long wait() polls the timeline before blocking: a blocked thread
  // wakes tens of microseconds late, once per layer in the offload decode.
  // 0 on CPU devices, whose work needs the cores.
  int64_t poll_ns_ = 0;
  std::mutex mutex_;
  std::atomic<uint64_t> last_submitted_{0};
};

// A compute pipeline: one descriptor set of n storage buffers (bindings
// 0..n-1), push constants of push_bytes, spec constants with ids 0..k-1.
struct Pipeline {
  std::string shader;
  std::vector<uint32_t> spec;
  uint32_t n_bindings = 0, push_bytes = 0;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
};

struct ContextOptions {
  bool allow_push_descriptors = true;  // false forces the descriptor-pool path
  bool allow_transfer_queue = true;    // false puts transfers on the compute queue
  bool validation = false;  // enable VK_LAYER_KHRONOS_validation if installed
                            // (also on when env VKMOE_VK_VALIDATION=1)
};

struct MemoryBudget {
  uint64_t budget = 0, usage = 0;  // device-local heaps
  bool from_extension = false;     // VK_EXT_memory_budget present
  uint64_t free() const { return budget > usage ? budget - usage : 0; }
};

class Context {
 public:
  // device_index -1 picks the best device (discrete > integrated > virtual > cpu).
  static std::unique_ptr<Context> create(int device_index = -1, const ContextOptions& opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return phys_; }
  VkDevice device() const { return device_; }
  Queue& compute_queue() { return *compute_; }
  // The queue for uploads: a separate queue when the device offers one
  // (dedicated transfer family, or a second compute-family queue), else the
  // compute queue itself.
  Queue& transfer_queue() { return transfer_ ? *transfer_ : *compute_; }
  bool has_separate_transfer_queue() const { return transfer_ != nullptr; }
  bool push_descriptors() const { return push_descriptors_; }

  // Throws OutOfDeviceMemory ("out of device memory allocating N MiB for
  // <what> ...") when device-local memory runs out, Error on other failures.
  Buffer create_buffer(uint64_t bytes, MemoryKind kind, const std::string& what);
  uint64_t allocated_bytes() const { return allocated_total_.load(); }
  uint64_t allocated_bytes(MemoryKind kind) const;
  MemoryBudget memory_budget() const;

  // Cached by (shader, spec). Throws Error for an unknown shader name or a
  // conflicting n_bindings/push_bytes for the same key.
  const Pipeline& pipeline(const std::string& shader, uint32_t n_bindings, uint32_t push_bytes,
                           const std::vector<uint32_t>& spec = {});
  // From collect_pipelines() to compile_collected(threads), pipeline() makes
  // new pipelines' layouts only (their handles stay null: for a dry recording,
  // Recorder::begin_dry, that binds none); compile_collected has the driver
  // compile them on up to `threads` threads. A pipeline whose compile did not
  // happen or failed is compiled when pipeline() returns it next.
  void collect_pipelines();
  void compile_collected(unsigned threads);

  // Synchronous helpers (tests/tools): copy through a temporary staging buffer
  // on the compute queue, ordered after earlier compute-queue submissions.
  void write_buffer(const Buffer& dst, uint64_t offset, const void* src, uint64_t bytes);
  void read_buffer(const Buffer& src, uint64_t offset, void* dst, uint64_t bytes);

  void wait_idle();  // host wait until all queues are idle
  // For teardown after an error (e.g. a lost device): vkDeviceWaitIdle,
  // whatever it returns, so nothing in flight outlives its buffers.
  void idle_for_teardown() noexcept;

  // Internal: used by Recorder.
  PFN_vkCmdPushDescriptorSetKHR push_descriptor_fn() const { return cmd_push_descriptor_; }

 private:
  friend class Buffer;
  Context() = default;
  void init(int device_index, const ContextOptions& opts);
  void free_buffer(Buffer& b);

  DeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;  // the process's (never destroyed)
  VkPhysicalDevice phys_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  std::unique_ptr<Queue> compute_, transfer_;
  bool push_descriptors_ = false;
  bool pipeline_stats_ = false;  // VKMOE_PIPELINE_STATS (pipeline_stats.h)
  PFN_vkCmdPushDescriptorSetKHR cmd_push_descriptor_ = nullptr;
  VkPhysicalDeviceMemoryProperties mem_props_{};
  std::atomic<uint64_t> allocated_total_{0};
  std::atomic<uint64_t> allocated_kind_[3] = {0, 0, 0};
  void compile_pipeline(Pipeline& p) const;
  std::mutex pipeline_mutex_;
  bool collecting_ = false;
  std::vector<Pipeline*> collected_;
  std::map<std::pair<std::string, std::vector<uint32_t>>, std::unique_ptr<Pipeline>> pipelines_;
};

// GPU timestamps. Write with Recorder::timestamp after Recorder::reset_timestamps.
class TimestampPool {
 public:
  TimestampPool(Context& ctx, uint32_t count);
  ~TimestampPool();
  TimestampPool(const TimestampPool&) = delete;
  TimestampPool& operator=(const TimestampPool&) = delete;
  VkQueryPool handle() const { return pool_; }
  uint32_t count() const { return count_; }
  // Timestamps [first, first+count) in nanoseconds (ticks * period; only
  // differences are meaningful). Waits for them to be available.
  std::vector<double> read_ns(uint32_t first, uint32_t count) const;

 private:
  Context& ctx_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  uint32_t count_ = 0;
};

// Records commands into one reusable command buffer for one queue.
// begin() waits for this recorder's previous submission to complete, then
// resets it (no reallocation per token). Not thread-safe; use one per thread.
class Recorder {
 public:
  explicit Recorder(Context& ctx, Queue* queue = nullptr);  // default: compute queue
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void begin();
  // A recording that writes nothing: its commands are checked as begin()'s
  // are, but not recorded (with Context::collect_pipelines, it names the
  // pipelines a schedule uses). discard() ends it; it cannot be submitted.
  void begin_dry();
  // Ends a recording that will not be submitted; the next begin() reuses it.
  void discard();
  bool recording() const { return recording_; }

  // Binds `p` (if not bound), its storage bindings (binding i = bindings[i])
  // and push constants, then dispatches gx*gy*gz workgroups.
  void dispatch(const Pipeline& p, std::span<const BufferRange> bindings, const void* push,
                uint32_t push_bytes, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
  void dispatch(const Pipeline& p, std::initializer_list<BufferRange> bindings, const void* push,
                uint32_t push_bytes, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
    dispatch(p, std::span<const BufferRange>(bindings.begin(), bindings.size()), push, push_bytes,
             gx, gy, gz);
  }
  template <class Push>
  void dispatch(const Pipeline& p, std::initializer_list<BufferRange> bindings, const Push& push,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
    dispatch(p, bindings, &push, sizeof(Push), gx, gy, gz);
  }

  // Makes all earlier shader/transfer writes visible to later shader and
  // transfer reads/writes in this queue (global memory barrier).
  void barrier();
  void copy(const Buffer& src, uint64_t src_offset, const Buffer& dst, uint64_t dst_offset,
            uint64_t bytes);
  // Fills bytes (multiple of 4) at offset (multiple of 4) with a 32-bit pattern.
  void fill(const Buffer& dst, uint64_t offset, uint64_t bytes, uint32_t value);
  void reset_timestamps(TimestampPool& pool, uint32_t first, uint32_t count);
  // Writes a timestamp once all earlier commands have completed.
  void timestamp(TimestampPool& pool, uint32_t index);

  // Ends recording (if still recording; a device->host barrier is appended)
  // and submits after GPU-side waits on `waits`. Calling submit() again
  // without begin() re-submits the same commands (after host-waiting for the
  // previous submission). Returns the point reached on completion.
  SyncPoint submit(std::span<const SyncPoint> waits = {});
  SyncPoint submit(std::initializer_list<SyncPoint> waits) {
    return submit(std::span<const SyncPoint>(waits.begin(), waits.size()));
  }
  SyncPoint last_submission() const { return last_; }
  void wait() const { last_.wait(); }
  VkCommandBuffer handle() const { return cb_; }
  Queue& queue() const { return *queue_; }
  Context& context() const { return ctx_; }
  uint32_t dispatch_count() const { return dispatches_; }

 private:
  void require_recording(const char* what) const;
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);
  Context& ctx_;
  Queue* queue_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  bool recording_ = false, has_commands_ = false, dry_ = false;
  SyncPoint last_;
  const Pipeline* bound_ = nullptr;
  uint32_t dispatches_ = 0;
  // Descriptor-pool fallback (no VK_KHR_push_descriptor): pools reset on begin().
  std::vector<VkDescriptorPool> desc_pools_;
  size_t desc_pool_cur_ = 0;
};

// Async host -> device copies on the transfer queue (or the compute queue
// when there is no separate one), through a ring of staging slots.
// Not thread-safe.
class Uploader {
 public:
  // Fills staging: copy(dst, src, bytes). A model load passes a parallel copy.
  using CopyFn = std::function<void(void* dst, const void* src, uint64_t bytes)>;
  explicit Uploader(Context& ctx, uint64_t staging_bytes = 64ull << 20, uint32_t slots = 4, CopyFn copy = {});
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // Copies src into staging before returning (src may be reused at once) and
  // queues the copy to dst[dst_offset..]. Large copies are split across slots;
  // blocks only while every slot is still in flight.
  void enqueue(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes);
  // Submits what is queued. The returned point is reached once every copy
  // enqueued so far has landed: pass it to Recorder::submit({point}) for a
  // GPU-side wait, or poll/wait on the host.
  SyncPoint flush();
  SyncPoint upload(const Buffer& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
    enqueue(dst, dst_offset, src, bytes);
    return flush();
  }
  Queue& queue() const { return *queue_; }
  uint64_t bytes_uploaded() const { return bytes_uploaded_; }

 private:
  struct Slot {
    Buffer staging;
    std::unique_ptr<Recorder> rec;
    uint64_t used = 0;
  };
  void next_slot();
  Queue* queue_;
  CopyFn copy_;
  std::vector<Slot> slots_;
  size_t cur_ = 0;
  SyncPoint last_;
  uint64_t bytes_uploaded_ = 0;
};

}  // namespace vkmoe::vk
