#include "engine/vulkan/vk_moe_fused.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>

#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe::vk {
namespace {

// Must match shaders/moe_decode_fused.comp.
struct FusedPush {
  uint32_t n_embd, n_ff, n_expert, k;
  float eps;
  uint32_t check_in, check_out;
  uint32_t gu_stride, dn_stride;
  uint32_t grid, counter, spin_limit;
  uint32_t topk_normalize, topk_gating;
  float topk_scale;
  uint32_t glu_act, next_norm;
};

constexpr const char* kKernel = "moe_decode_fused";
constexpr uint32_t kMaxWorkgroup = 512, kMaxExperts = 1024, kMaxTopk = 64, kTopkShared = 512;
// Polls of a grid barrier before it gives up (seconds on any device, far more
// than a token's whole block takes).
constexpr uint32_t kSpinLimit = 1u << 20;

uint32_t workgroup_for(const DeviceInfo& d) {
  static const char* forced = std::getenv("VKMOE_MOE_FUSED_WG");
  if (forced) return uint32_t(std::atoi(forced));
  return std::min<uint32_t>(512, std::bit_floor(d.max_workgroup_invocations));
}

// x as int8 for the larger of the two products' inputs, in int32 words.
uint32_t xq_words(uint32_t n_embd, uint32_t n_ff, uint32_t k) { return std::max(n_embd, k * n_ff) / 4; }

uint64_t shared_bytes(uint32_t wg, uint32_t n_embd, uint32_t words) {
  const uint64_t topk = 2 * 4 * 1024 + 2 * 4 * 64 + 64 + 2 * 2 * 4 * kTopkShared;
  return topk + 4ull * n_embd + 5ull * words + 4ull * wg + 2 * 4 * 64 + 8;
}

}  // namespace

uint32_t moe_fused_grid(const DeviceInfo& d) {
  if (const char* s = std::getenv("VKMOE_MOE_FUSED_GRID")) return uint32_t(std::max(0, std::atoi(s)));
  // AMD's CUs pair into WGPs that may run one large workgroup at a time: one per pair.
  return d.vendor_id == 0x1002 ? d.compute_units / 2 : d.compute_units;
}

bool moe_fused_decode_supported(const DeviceInfo& d, GgmlType gate_up, GgmlType down, uint32_t n_embd,
                                uint32_t n_ff, uint32_t n_expert, uint32_t k, const RouterParams& rp,
                                uint64_t gate_up_stride, uint64_t down_stride) {
  if (!d.integer_dot || !d.subgroup_arithmetic || !d.subgroup_shuffle || d.subgroup_size == 0) return false;
  if (!q8x_supported_type(gate_up) || !q8x_supported_type(down)) return false;
  for (GgmlType t : {gate_up, down})
    if (gpu_weight_type_missing_feature(d, t)) return false;
  // The kernel takes the strides in 32-bit bytes and indexes the stacked
  // experts in 32-bit units of the type's alignment.
  if (gate_up_stride > UINT32_MAX || down_stride > UINT32_MAX ||
      uint64_t(n_expert) * gate_up_stride / gpu_weight_type(gate_up)->align > UINT32_MAX ||
      uint64_t(n_expert) * down_stride / gpu_weight_type(down)->align > UINT32_MAX)
    return false;
  const uint32_t qk_gu = gpu_weight_type(gate_up)->block_elems, qk_dn = gpu_weight_type(down)->block_elems;
  if (n_embd == 0 || n_embd % qk_gu != 0 || n_embd % 32 != 0 || n_ff == 0 || n_ff % qk_dn != 0 || n_ff % 32 != 0)
    return false;
  if (n_expert == 0 || n_expert > kMaxExperts || k == 0 || k > kMaxTopk || k > n_expert || rp.n_group > 1)
    return false;
  const uint32_t wg = workgroup_for(d);
  if (wg < 32 || wg > kMaxWorkgroup || !std::has_single_bit(wg) || n_expert > 32 * wg) return false;
  return shared_bytes(wg, n_embd, xq_words(n_embd, n_ff, k)) <= d.max_shared_memory_bytes;
}

void record_moe_fused_decode(Recorder& rec, const MoeFusedDecodeArgs& a) {
  Context& ctx = rec.context();
  const DeviceInfo& d = ctx.info();
  if (!moe_fused_decode_supported(d, a.gate_up_type, a.down_type, a.n_embd, a.n_ff, a.n_expert, a.k, a.router,
                                  a.gate_up_stride, a.down_stride))
    throw Error("internal error: moe_decode_fused does not take this block");
  const uint32_t grid = a.grid ? a.grid : moe_fused_grid(d);
  if (grid == 0 || grid > d.max_workgroup_count[0]) throw Error("internal error: moe_decode_fused grid");
  const uint64_t E = a.n_embd, F = a.n_ff, N = a.n_expert, K = a.k;
  const GpuWeightType &gu = *gpu_weight_type(a.gate_up_type), &dn = *gpu_weight_type(a.down_type);
  const uint64_t gu_row = E / gu.block_elems * gu.block_bytes, dn_row = F / dn.block_elems * dn.block_bytes;
  check_binding(kKernel, "x", a.x, E * 4);
  check_binding(kKernel, "ffn norm", a.ffn_norm, E * 4);
  check_binding(kKernel, "router", a.router_w, N * E * 4);
  check_binding(kKernel, "gate", a.gate, (N - 1) * a.gate_up_stride + F * gu_row);
  check_binding(kKernel, "up", a.up, (N - 1) * a.gate_up_stride + F * gu_row);
  check_binding(kKernel, "down", a.down, (N - 1) * a.down_stride + E * dn_row);
  check_binding(kKernel, "logits", a.logits, N * 4);
  check_binding(kKernel, "h", a.h, K * F * 4);
  check_binding(kKernel, "ids", a.ids, K * 4);
  check_binding(kKernel, "weights", a.weights, K * 4);
  check_binding(kKernel, "counters", a.counters, (uint64_t(a.counter) + 2) * 4);
  check_binding(kKernel, "flags", a.flags, 4);
  const bool next_norm = a.next_norm.buffer != VK_NULL_HANDLE;
  if (next_norm) {
    check_binding(kKernel, "next norm", a.next_norm, E * 4);
    check_binding(kKernel, "xn", a.xn, E * 4);
  }
  const uint32_t wg = workgroup_for(d);
  const uint32_t tpr = std::min<uint32_t>(32, std::bit_floor(d.subgroup_size));
  const FusedPush push{a.n_embd,
                       a.n_ff,
                       a.n_expert,
                       a.k,
                       a.eps,
                       a.check_in,
                       a.check_out,
                       uint32_t(a.gate_up_stride),
                       uint32_t(a.down_stride),
                       grid,
                       a.counter,
                       kSpinLimit,
                       a.router.normalize ? 1u : 0u,
                       uint32_t(a.router.gating),
                       a.router.scale,
                       a.glu_act,
                       next_norm ? 1u : 0u};
  const std::string name = std::string("moe_decode_fused_") + gu.suffix + "_" + dn.suffix;
  const Pipeline& p =
      ctx.pipeline(name, 14, sizeof(FusedPush), {wg, tpr, xq_words(a.n_embd, a.n_ff, a.k), a.n_embd / 4});
  // Without a next norm its bindings are unused: bind x in their place.
  rec.dispatch(p,
               {a.x, a.ffn_norm, a.router_w, a.gate, a.up, a.down, a.logits, a.h, a.ids, a.weights, a.counters,
                next_norm ? a.next_norm : a.x, next_norm ? a.xn : a.x, a.flags},
               push, grid);
}

}  // namespace vkmoe::vk
