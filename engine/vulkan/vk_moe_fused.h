#pragma once
// One decoded token's routed-MoE block in one dispatch
// (shaders/moe_decode_fused.comp): ffn norm, router, top-k, the k experts'
// gate and up products with their activation, the down products weighted
// into x, and optionally the next layer's norm; also, where asked, the
// attention output projection before it and the next layer's q/k/v products
// after it. Its workgroups wait for each
// other at grid barriers instead of at dispatch boundaries, so the dispatch
// must not have more workgroups than the device runs at once: one per compute
// unit, where the driver says how many there are (moe_fused_grid).
#include <array>
#include <cstdint>
#include <optional>

#include "cpu/moe_route.h"
#include "cpu/quant.h"
#include "cpu/rope.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

// x += w . att before the block (w: [n_embd][att_dim]).
struct MoeFusedOutProj {
  GgmlType type = GgmlType::F32;
  BufferRange w, att;  // att: att_dim floats
  uint32_t att_dim = 0;
  // splits > 1: att is first written from a one-token attention's split-K
  // partials in parts (AttentionArgs::leave_splits: heads of head_dim, the
  // (max, sum) pairs from float ml_off); see moe_fused_combines_att.
  BufferRange parts;
  uint32_t splits = 1, ml_off = 0, head_dim = 0;
};

// After the block: xn = rmsnorm(x) * next_norm (kept in the kernel, not
// written), q = wq . xn, k = wk . xn, v = wv . xn.
struct MoeFusedNextQkv {
  GgmlType q_type = GgmlType::F32, k_type = GgmlType::F32, v_type = GgmlType::F32;
  BufferRange wq, wk, wv;  // [q_dim][n_embd], [kv_dim][n_embd] twice
  BufferRange q, k, v;     // q_dim, kv_dim, kv_dim floats
  uint32_t q_dim = 0, kv_dim = 0;
};

// Step A, before the output projection (which it needs): the layer's
// one-token attention, from the q, k and v the dispatch before left (with
// next_qkv: in its buffers); it norms (norm: per head) and rotates q and the
// new key, stores the key and value at position pos1 - 1 of the F16 caches
// and writes the output projection's att. The pipeline holds the constants:
// pos1 = 0 leaves the step out with the same pipeline (a token whose
// attention runs in its own dispatch). See moe_fused_takes_attention.
struct MoeFusedAttention {
  BufferRange q, k, v;           // n_head and n_head_kv heads (k, v) of head_dim floats
  BufferRange k_cache, v_cache;  // n_head_kv * head_dim halves a position
  BufferRange q_norm, k_norm;    // head_dim floats each (norm)
  uint32_t head_dim = 0, n_head = 0, n_head_kv = 0;
  RopeParams rope;
  bool norm = false;
  float scale = 1.f;  // of the scores q . k
  uint32_t pos1 = 0;
  // q and k normed and rotated, and the key slots combined, by subgroups
  // (where the device's subgroups have the size it reports and NeoX pairs
  // fall in one lane; else by the workgroup); unset: yes unless
  // VKMOE_FUSED_ATT_SUBGROUPS=0.
  std::optional<bool> by_subgroups;
};

// The weight types one pipeline takes for each product (bit i: GgmlType(i)),
// so that layers whose types differ (Q4_K_M's Q6_K down and v products in
// some) share one pipeline: a dispatch whose pipeline differs from the one
// before fetches its code anew in every step (docs/PERF.md run 44). Each
// dispatch's own types must be in them; without_*: some dispatch lacks the
// output projection, or the q/k/v products.
struct MoeFusedTypeSets {
  uint32_t gate_up = 0, down = 0, wo = 0, wq = 0, wk = 0, wv = 0;
  bool without_wo = false, without_qkv = false;
  static uint32_t bit(GgmlType t) { return 1u << uint32_t(t); }
};

struct MoeFusedDecodeArgs {
  GgmlType gate_up_type = GgmlType::F32, down_type = GgmlType::F32;
  uint32_t n_embd = 0, n_ff = 0, n_expert = 0, k = 0;
  RouterParams router;  // no expert groups
  uint32_t glu_act = 0;  // 0 SiLU, 1 gpt-oss's (shaders/glu.glsl)
  float eps = 0.f;
  uint32_t check_in = 0, check_out = 0;  // non-finite sites of x on entry and exit (0: none)
  BufferRange x, ffn_norm, router_w;     // x: [n_embd], updated in place; router_w: f32 [n_expert][n_embd]
  BufferRange gate, up, down;            // stacked experts, gate_up_stride / down_stride bytes apart
  uint64_t gate_up_stride = 0, down_stride = 0;
  BufferRange logits, h;                 // scratch: n_expert and k * n_ff floats
  BufferRange ids, weights;              // the chosen experts and their weights (k each)
  // Two uints at counter, zero before the dispatch; left as it ends (the
  // barriers' arrivals, and where a last workgroup has work the finished ones).
  BufferRange counters;
  uint32_t counter = 0;
  BufferRange next_norm, xn;             // with next_norm: xn = rmsnorm(x) * next_norm after the update
  BufferRange flags;                     // non-finite flag (first uint, lowered by atomicMin)
  uint32_t grid = 0;                     // workgroups; 0: moe_fused_grid
  // Lanes sharing a row in the gate/up, down, wo and q/k/v products (powers
  // of 2 up to the subgroup size); 0: the kernel's choice.
  std::array<uint32_t, 4> lanes{};
  // The int8 x in shared memory with each 64-value group's four 16-byte parts
  // apart (no bank conflicts where lanes read consecutive groups); unset: yes
  // unless VKMOE_FUSED_XQ_SWIZZLE=0.
  std::optional<bool> xq_swizzle;
  std::optional<MoeFusedOutProj> out_proj;
  std::optional<MoeFusedAttention> attention;  // with out_proj
  std::optional<MoeFusedNextQkv> next_qkv;  // with next_norm (then xn is not written)
  std::optional<MoeFusedTypeSets> type_sets;  // unset: this dispatch's types only
  // Where set (a device clock): every workgroup's FusedClock stamps (uint64)
  // at clocks[clock_base + workgroup * kFusedClockSlots + slot].
  BufferRange clocks;
  uint32_t clock_base = 0;
  // Chained decode layers (counters[i] for 1 + i; 0: none): att_done with
  // att_wgs != 0: the attention recorded just before ran without a barrier
  // between; every workgroup first waits until counters[att_done - 1] (its
  // workgroups' count over the token) reaches att_wgs. qkv_ready (with
  // next_qkv): the last workgroup raises counters[qkv_ready - 1] to qkv_value
  // once the next q/k/v are written, for an attention that waits for it
  // (vk::AttentionArgs::wait_counter) with no barrier after this dispatch.
  uint32_t att_done = 0, att_wgs = 0, qkv_ready = 0, qkv_value = 0;
  bool poll_loads = true;  // the wait polls by loads, else by atomics
};

// The steps' edges the _clock kernel stamps (shaders/moe_decode_fused.comp's
// CLK_*): a grid barrier's arrival and departure, points inside steps, and
// (chained only) the end of the wait for the attention before.
enum class FusedClock : uint32_t {
  Start, Waited, AttRotated, AttKeys, AttArrive, AttLeave, OutProjArrive, OutProjLeave, RouterArrive, RouterLeave,
  TopK, GateUpArrive, GateUpLeave, HQuantized, DownArrive, DownLeave, NextNorm, End, Count
};
constexpr uint32_t kFusedClockSlots = 18;
const char* fused_clock_name(FusedClock c);

// Workgroups the fused dispatch uses on this device: VKMOE_MOE_FUSED_GRID when
// set, else one per compute unit where the driver reports them (NVIDIA SMs;
// on AMD one per two CUs), else 0 (not used). For measuring,
// VKMOE_MOE_FUSED_WG sets the workgroup size (512) and
// VKMOE_MOE_FUSED_LANES=gu,dn,o,qkv the lanes per row of each product
// (default: the subgroup's, at most 32).
uint32_t moe_fused_grid(const DeviceInfo& d);
// Whether the fused kernel takes this block: int8 dot products, subgroups
// of at least 8 with arithmetic and shuffles, 16-bit storage and int16, weight types
// Q8_0/Q4_K/Q5_K/Q6_K (gate and up alike), n_embd a multiple of the gate/up block and of 32, n_ff of the down
// block, n_expert <= 1024, k <= 64, no expert groups, stacked experts (at
// their strides in bytes) that 32-bit unit indices reach.
bool moe_fused_decode_supported(const DeviceInfo& d, GgmlType gate_up, GgmlType down, uint32_t n_embd,
                                uint32_t n_ff, uint32_t n_expert, uint32_t k, const RouterParams& rp,
                                uint64_t gate_up_stride, uint64_t down_stride);
// Whether it also takes an output projection of this type and width (before
// the block), and q/k/v products of these types and heights (after it).
bool moe_fused_takes_out_proj(const DeviceInfo& d, GgmlType type, uint32_t n_embd, uint32_t n_ff, uint32_t k,
                              uint32_t att_dim);
// Whether its output projection can combine att from `splits` split-K
// partials of heads of head_dim (workgroups of at least 64, subgroups of at
// most 64, chunks of head_dim; at most 64 splits).
bool moe_fused_combines_att(const DeviceInfo& d, uint32_t att_dim, uint32_t head_dim, uint32_t splits);
// Whether it also takes step A for these heads: head_dim 64 or 128, workgroups of at least 2 * head_dim, att_dim = n_head * head_dim,
// and the shared memory for it.
bool moe_fused_takes_attention(const DeviceInfo& d, uint32_t n_embd, uint32_t n_ff, uint32_t k, uint32_t att_dim,
                               uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv, const RopeParams& rope);
bool moe_fused_takes_qkv(GgmlType q, GgmlType k, GgmlType v, uint32_t n_embd, uint32_t q_dim, uint32_t kv_dim);
void record_moe_fused_decode(Recorder& rec, const MoeFusedDecodeArgs& a);

}  // namespace vkmoe::vk
