#pragma once
// VRAM planner: decides where the trunk, the KV cache and the routed experts
// live for a given VRAM budget. Pure arithmetic: no Vulkan, no file I/O.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cpu/quant.h"
#include "base/error.h"

namespace vkmoe {

enum class PlanMode {
  Auto,         // input only: let the planner choose
  Resident,     // every routed expert in VRAM
  ExpertCache,  // a per-layer SLRU slot cache in VRAM; misses run on the CPU
  CpuMoe,       // routed experts always on the CPU (like llama.cpp --cpu-moe)
};
const char* plan_mode_name(PlanMode m);  // "auto", "resident", "expert-cache", "cpu-moe"
// Accepts the names above plus "cache" and "cpu"; throws Error otherwise.
PlanMode parse_plan_mode(std::string_view s);

// A non-expert tensor. cpu_ok marks tensors that only need a row gather
// (token embeddings): they always stay in host memory to save VRAM.
struct TrunkTensor {
  std::string name;
  uint64_t bytes = 0;
  bool cpu_ok = false;
};

// A stacked routed-expert tensor ({in, out, n_expert}) of one layer.
struct ExpertTensor {
  std::string name;
  int layer = 0;
  uint64_t bytes = 0;  // all n_expert experts
};

struct ExpertSpec {
  int n_layer = 0;
  int n_expert = 0;       // 0 for a dense model
  int n_expert_used = 0;  // top-k
  std::vector<ExpertTensor> tensors;  // gate/up/down _exps of every MoE layer
  // Bytes of one expert of `layer` (its gate+up+down slices); 0 for a layer
  // without routed experts.
  uint64_t expert_bytes(int layer) const;
};

struct KvSpec {
  int n_layer = 0;
  int n_ctx = 0;
  int kv_dim = 0;  // n_head_kv * head_dim
  GgmlType type_k = GgmlType::F16;  // F32, F16 or Q8_0
  GgmlType type_v = GgmlType::F16;
  int v_dim = -1;  // V values per position (-1: kv_dim; 0: none, latent attention keeps values in K)
  uint64_t bytes_per_token() const;  // all layers, K and V; throws Error on other types
  uint64_t bytes() const { return bytes_per_token() * uint64_t(n_ctx); }
};

// Activation/scratch reserve: batch activations (n_batch tokens of hidden
// states, FFN intermediates, attention scores over n_ctx, logits) in f32
// plus a fixed safety margin for driver and allocator overhead.
struct ScratchSpec {
  int n_embd = 0;
  int n_ff = 0;     // widest FFN intermediate computed at once (dense n_ff or n_ff_exp * n_expert_used)
  int n_vocab = 0;
  int n_head = 0;
  int n_ctx = 0;
  int n_batch = 512;
};
constexpr uint64_t kScratchSafetyMargin = 256ull << 20;
uint64_t default_scratch_bytes(const ScratchSpec& s);

struct PlanInput {
  uint64_t vram_budget = 0;
  std::vector<TrunkTensor> trunk;
  ExpertSpec experts;
  KvSpec kv;
  uint64_t scratch_bytes = 0;   // e.g. default_scratch_bytes(...)
  double capacity_ratio = 2.0;  // ExpertCache needs slots/layer >= ratio * n_expert_used
  PlanMode forced = PlanMode::Auto;
  int pinned_per_layer = 0;     // experts per layer kept in VRAM permanently
  // Prompt processing in offload modes: VRAM slots (per buffer half, double-
  // buffered across layers) for experts uploaded once for a ubatch. The plan
  // grants up to this many, fewer when the budget is tight.
  int prefill_staging_experts = 0;
};

struct Placement {
  enum class Where { Gpu, Cpu, GpuCache };
  std::string name;
  uint64_t bytes = 0;
  Where where = Where::Gpu;
};
const char* where_name(Placement::Where w);  // "gpu", "cpu", "gpu-cache"

struct Plan {
  PlanMode mode = PlanMode::Resident;
  uint64_t budget_bytes = 0;
  uint64_t trunk_bytes = 0;      // trunk tensors in VRAM
  uint64_t cpu_trunk_bytes = 0;  // trunk tensors kept in host memory
  uint64_t kv_bytes = 0;
  uint64_t scratch_bytes = 0;
  uint64_t all_experts_bytes = 0;   // every routed expert of every layer
  // VRAM for routed experts: all of them (Resident) or the slot pool.
  uint64_t expert_cache_bytes = 0;
  uint64_t slot_bytes = 0;          // one slot = the largest expert of any layer
  int expert_slots_per_layer = 0;   // each MoE layer gets the same count (n_expert when Resident)
  int expert_slots_total = 0;
  std::vector<int> layer_slots;     // per layer; 0 for layers without routed experts
  int pinned_per_layer = 0;
  // Host-visible staging for the async uploader (host memory, not counted in
  // the VRAM budget): two batches of n_expert_used experts, double-buffered.
  uint64_t staging_bytes = 0;
  int n_expert_used = 0;
  // VRAM staging for prompt processing in offload modes: 2 x staging_slots experts.
  int staging_slots = 0;
  uint64_t staging_vram_bytes = 0;
  int n_ctx = 0;
  GgmlType type_k = GgmlType::F16, type_v = GgmlType::F16;
  bool v_cache = true;  // false: latent attention, values read from the K rows
  std::vector<Placement> tensors;   // trunk first, then expert tensors
  std::string reason;               // why this mode was chosen

  uint64_t vram_bytes() const {
    return trunk_bytes + kv_bytes + scratch_bytes + expert_cache_bytes + staging_vram_bytes;
  }
};

// Throws Error when even trunk + KV + scratch exceed the budget, when a
// forced mode is impossible, or on inconsistent input.
Plan make_plan(const PlanInput& in);

// The table `vkmoe plan` prints: every tensor group (names with the
// "blk.N." prefix folded), KV, scratch, experts, sizes and % of the budget.
std::string format_plan(const Plan& p);

// "1.50 GiB" / "512.0 MiB" / "12.0 KiB" / "17 B".
std::string format_bytes(uint64_t bytes);

// Parses "12GiB", "12G", "512MiB", "1.5GB", "1000000", "64 KiB".
// Binary units: K/M/G/T, KiB/MiB/GiB/TiB. Decimal units: KB/MB/GB/TB.
// "B" or no unit means bytes (which must then be a whole number). Units are
// case-insensitive. Throws Error on anything else, negative values or overflow.
uint64_t parse_size(std::string_view s);

}  // namespace vkmoe
