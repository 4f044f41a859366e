// Flash attention of prompts with VK_KHR_cooperative_matrix
// (shaders/attn_flash_cm.comp): built only when CMake found glslang 15
// (VKMOE_HAVE_COOPMAT_SHADERS); the device must list f16 x f16 -> f32
// 16x16x16 subgroup fragments.
#include "engine/vulkan/attention_coopmat.h"

#include <cstdlib>
#include <string>

#include "base/error.h"

namespace vkmoe::vk {
namespace {

// attn_flash_cm.comp's key tile (BC) and head_dim limit.
constexpr uint32_t kKeys = 32, kCmMaxHeadDim = 128;
// Workgroups a dispatch needs to take the kernel: each streams all its rows'
// keys, so a small grid (a short message after a long context) would leave
// most of the GPU idle; those stay on the scalar kernel (32-row blocks, keys
// split for few tokens). Not measured below 128 workgroups of 8 subgroups (a
// 512-token ubatch of Qwen3-30B-A3B's heads).
constexpr uint32_t kMinWorkgroups = 64;

// Must match the push block of attn_flash_cm.comp.
struct FlashCmPush {
  uint32_t q_stride4, o_stride4, n_rows, group, pos0, kv_row8;
  float scale_log2;
  uint32_t window, has_sinks;
};

// Shared memory for nsg subgroups: q rows / key and value tiles, per subgroup
// scores and probabilities, per row max and sum.
uint32_t shared_bytes(uint32_t head_dim, uint32_t nsg) {
  return 2 * kKeys * (head_dim + 8) * 2 + nsg * 16 * ((kKeys + 4) * 4 + (kKeys + 8) * 2 + 2 * 4);
}

uint32_t workgroups(const AttentionArgs& a, uint32_t nsg) {
  const uint32_t rows = a.n_tokens * (a.n_head / a.n_head_kv);
  return (rows + 16 * nsg - 1) / (16 * nsg) * a.n_head_kv;
}

// Subgroups of 16 query rows per workgroup: 8 or else 4, as the device's
// workgroup and shared memory take and the grid keeps kMinWorkgroups
// (VKMOE_ATTN_CM_SUBGROUPS=1|2|4|8 forces one for sweeps); 0: none. More rows
// share each key and value tile: on an H100 (Qwen3-30B-A3B heads, 512-token
// ubatches) 8 beat 4, and 2 was no faster than the scalar kernel (docs/PERF.md run 17).
uint32_t subgroups(const DeviceInfo& d, const AttentionArgs& a) {
  static const char* forced = std::getenv("VKMOE_ATTN_CM_SUBGROUPS");
  for (uint32_t n : {8u, 4u, 2u, 1u}) {
    if (forced ? uint32_t(std::atoi(forced)) != n : n < 4 || workgroups(a, n) < kMinWorkgroups) continue;
    if (n * d.subgroup_size <= d.max_workgroup_invocations && n * d.subgroup_size <= d.max_workgroup_size[0] &&
        shared_bytes(a.head_dim, n) <= d.max_shared_memory_bytes)
      return n;
  }
  return 0;
}

}  // namespace

bool attention_uses_coopmat(const Context& ctx, const AttentionArgs& a) {
#ifndef VKMOE_HAVE_COOPMAT_SHADERS
  (void)ctx;
  (void)a;
  return false;
#else
  static const bool off = env_off("VKMOE_ATTN_COOPMAT");
  const DeviceInfo& d = ctx.info();
  const bool kv_same = a.k_cache.buffer == a.v_cache.buffer && a.k_cache.offset == a.v_cache.offset;
  return !off && a.kv_type == KvType::F16 && a.head_dim % 16 == 0 && a.head_dim <= kCmMaxHeadDim && !kv_same &&
         a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 && a.max_shared_bytes == 0 && d.cooperative_matrix &&
         d.has_coopmat(16, 16, 16, kCoopMatF16, kCoopMatF32) && d.shader_float16 && d.storage_16bit &&
         d.subgroup_shuffle && (d.subgroup_size == 32 || d.subgroup_size == 64) && subgroups(d, a) != 0;
#endif
}

void record_attention_coopmat(Recorder& rec, const AttentionArgs& a) {
  Context& ctx = rec.context();
  const DeviceInfo& d = ctx.info();
  const uint32_t group = a.n_head / a.n_head_kv, rows = a.n_tokens * group, nsg = subgroups(d, a);
  const uint32_t row_blocks = (rows + 16 * nsg - 1) / (16 * nsg);
  if (row_blocks > d.max_workgroup_count[0] || a.n_head_kv > d.max_workgroup_count[2])
    throw Error("internal error: attention dispatch exceeds the workgroup count limits");
  const bool has_sinks = a.sinks.buffer != VK_NULL_HANDLE;
  const FlashCmPush push{a.q_stride / 4, a.o_stride / 4, rows, group, a.pos0, a.head_dim * a.n_head_kv / 8,
                         a.scale * 1.4426950408889634f, a.window, has_sinks ? 1u : 0u};
  // One pass over the keys (attn_flash_cm.comp's ONE_PASS); VKMOE_ATTN_CM_ONE_PASS=0: two (read at each call).
  const std::string name = std::string(env_off("VKMOE_ATTN_CM_ONE_PASS") ? "attn_flash_cm" : "attn_flash_cm_1p") +
                           (a.o_f16 ? "_h" : "");
  const Pipeline& p = ctx.pipeline(name, 5, sizeof push, {nsg * d.subgroup_size, a.head_dim, nsg, d.subgroup_size});
  // Without sinks their binding is unused: bind q in its place.
  rec.dispatch(p, {a.q, a.k_cache, a.v_cache, a.o, has_sinks ? a.sinks : a.q}, push, row_blocks, 1, a.n_head_kv);
}

}  // namespace vkmoe::vk
