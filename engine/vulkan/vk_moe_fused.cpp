#include "engine/vulkan/vk_moe_fused.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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
  uint32_t att_dim, q_dim, kv_dim;
  uint32_t att_splits, att_ml_off, head_dim;
  uint32_t clock_base;
  uint32_t att_done, att_wgs, qkv_ready, qkv_value, poll_loads;
  uint32_t att_pos1;
  uint32_t wtypes;  // the products' type codes, 4 bits each (gate/up, down, wo, wq, wk, wv; 0: none)
};
static_assert(sizeof(FusedPush) <= 128, "push constants past the guaranteed 128 bytes");

constexpr const char* kKernel = "moe_decode_fused";
constexpr uint32_t kBindings = 27;  // the clock variant: one more
constexpr uint32_t kMaxWorkgroup = 512, kMaxExperts = 1024, kMaxTopk = 64, kTopkShared = 512;
// Polls of a grid barrier before it gives up (seconds on any device, far more
// than a token's whole block takes).
constexpr uint32_t kSpinLimit = 1u << 20;

uint32_t workgroup_for(const DeviceInfo& d) {
  static const char* forced = std::getenv("VKMOE_MOE_FUSED_WG");
  if (forced) return uint32_t(std::atoi(forced));
  return std::min<uint32_t>(512, std::bit_floor(d.max_workgroup_invocations));
}

// Lanes sharing a row in the gate/up, down, wo and q/k/v products: the
// subgroup's (at most 32), or VKMOE_MOE_FUSED_LANES=gu,dn,o,qkv for measuring
// (each rounded down to a power of 2 no larger).
std::array<uint32_t, 4> lanes_for(const DeviceInfo& d) {
  const uint32_t most = std::min<uint32_t>(32, std::bit_floor(d.subgroup_size));
  std::array<uint32_t, 4> l{most, most, most, most};
  static const char* forced = std::getenv("VKMOE_MOE_FUSED_LANES");
  if (forced) {
    std::istringstream in(forced);
    std::string item;
    for (size_t i = 0; i < l.size() && std::getline(in, item, ','); ++i)
      l[i] = std::clamp<uint32_t>(std::bit_floor(uint32_t(std::max(1, std::atoi(item.c_str())))), 1, most);
  }
  return l;
}

// xq's layout (specialization constant 13): a's where set, else swizzled
// unless VKMOE_FUSED_XQ_SWIZZLE=0 (tg128 +0.6-1.8% at depth 0 on an H200, run 42).
uint32_t xq_swizzle_for(std::optional<bool> asked) {
  static const bool on = !env_off("VKMOE_FUSED_XQ_SWIZZLE");
  return asked.value_or(on) ? 1u : 0u;
}

// x as int8 for the largest of the products' inputs, in int32 words.
uint32_t xq_words(uint32_t n_embd, uint32_t n_ff, uint32_t k, uint32_t att_dim) {
  return std::max({n_embd, k * n_ff, att_dim}) / 4;
}

// The shader's codes of the int8-activation types (shaders/wtype.glsl's ids;
// specialization constants 3..8); 0: a type it does not read.
uint32_t type_code(GgmlType t) {
  if (!q8x_supported_type(t)) return 0;
  switch (t) {
    case GgmlType::Q8_0: return 4;
    case GgmlType::Q4_K: return 5;
    case GgmlType::Q5_K: return 6;
    case GgmlType::Q6_K: return 7;
    default: return 0;
  }
}

// Specialization constants 3..8 (the kernel's sets of type codes, bit 0: the
// step may be absent) and the push constant's codes of this dispatch
// (MoeFusedTypeSets; codes 0 where a step is absent).
std::pair<std::array<uint32_t, 6>, uint32_t> kernel_types(const std::array<uint32_t, 6>& codes,
                                                          const std::optional<MoeFusedTypeSets>& sets) {
  std::array<uint32_t, 6> masks{};
  uint32_t packed = 0;
  for (size_t i = 0; i < codes.size(); ++i) {
    masks[i] = 1u << codes[i];
    packed |= codes[i] << (4 * i);
  }
  if (!sets) return {masks, packed};
  const MoeFusedTypeSets& t = *sets;
  const uint32_t given[6] = {t.gate_up, t.down, t.wo, t.wq, t.wk, t.wv};
  for (size_t i = 0; i < codes.size(); ++i) {
    uint32_t m = 0;
    for (uint32_t b = 0; b < 32; ++b)
      if (given[i] >> b & 1u) {
        const uint32_t c = type_code(GgmlType(b));
        if (c == 0) throw Error("internal error: moe_decode_fused type set holds a type it does not take");
        m |= 1u << c;
      }
    if ((i == 2 && t.without_wo) || (i >= 3 && t.without_qkv)) m |= 1u;
    if (!(m >> codes[i] & 1u)) throw Error("internal error: moe_decode_fused type sets lack this dispatch's types");
    masks[i] = m;
  }
  return {masks, packed};
}

// A [rows][ncols] product the kernel reads in int8 units: a type it takes,
// whole blocks, 32-bit unit indices.
bool takes_matrix(GgmlType t, uint64_t rows, uint32_t ncols) {
  if (type_code(t) == 0) return false;
  const GpuWeightType& w = *gpu_weight_type(t);
  return ncols > 0 && ncols % w.block_elems == 0 && ncols % 32 == 0 &&
         rows * row_bytes(t, ncols) / w.align <= UINT32_MAX;
}

uint64_t shared_bytes(uint32_t wg, uint32_t n_embd, uint32_t words) {
  const uint64_t topk = 2 * 4 * 1024 + 2 * 4 * 64 + 64 + 2 * 2 * 4 * kTopkShared;
  // xq: up to 7 more 16-byte entries a part when swizzled; the subgroups' sums
  // as floats, maxima and pairs (sg_sum, sg_max, sg_sum2).
  return topk + 4ull * n_embd + 5ull * words + 4 * 7 * 16 + 4ull * wg + 2 * 4 * 64 + 8 * 64 + 8;
}

// Step A's shared memory (moe_fused_attention.glsl): q, k, the new key and
// value, the norm weights, the rotation's (cos, sin), two inverse RMS (its
// partial outputs go to x's).
uint64_t attention_shared_bytes(uint32_t head_dim) { return 4ull * 6 * head_dim + 40; }

// Step A's specialization constants 14..26 (left at their defaults: no step A);
// 27, its subgroup size, follows.
std::vector<uint32_t> attention_spec(const MoeFusedAttention& at) {
  const RopeConsts rc = rope_consts(at.rope);
  const float scale_log2 = at.scale * 1.4426950408889634f;
  return {at.head_dim,
          at.n_head,
          at.n_head / at.n_head_kv,
          uint32_t(at.rope.n_rot),
          at.rope.neox ? 1u : 0u,
          at.norm ? 1u : 0u,
          std::bit_cast<uint32_t>(scale_log2),
          std::bit_cast<uint32_t>(rc.theta_scale),
          std::bit_cast<uint32_t>(at.rope.freq_scale),
          std::bit_cast<uint32_t>(at.rope.ext_factor),
          std::bit_cast<uint32_t>(rc.mscale),
          std::bit_cast<uint32_t>(rc.corr0),
          std::bit_cast<uint32_t>(rc.corr1)};
}

}  // namespace

const char* fused_clock_name(FusedClock c) {
  static const char* const names[] = {"start",             "attention waited",   "att: q, k rotated",
                                      "att: keys done",    "att ready: arrived",
                                      "att ready: released", "out proj: arrived",  "out proj: released",
                                      "router: arrived", "router: released",   "top-k done",
                                      "gate/up: arrived", "gate/up: released", "h quantized",
                                      "down: arrived",   "down: released",     "next norm done",
                                      "end"};
  static_assert(sizeof names / sizeof *names == size_t(FusedClock::Count));
  return names[uint32_t(c)];
}

uint32_t moe_fused_grid(const DeviceInfo& d) {
  if (const char* s = std::getenv("VKMOE_MOE_FUSED_GRID")) return uint32_t(std::max(0, std::atoi(s)));
  // AMD's CUs pair into WGPs that may run one large workgroup at a time: one per pair.
  return d.vendor_id == 0x1002 ? d.compute_units / 2 : d.compute_units;
}

bool moe_fused_decode_supported(const DeviceInfo& d, GgmlType gate_up, GgmlType down, uint32_t n_embd,
                                uint32_t n_ff, uint32_t n_expert, uint32_t k, const RouterParams& rp,
                                uint64_t gate_up_stride, uint64_t down_stride) {
  if (!d.integer_dot || !d.subgroup_arithmetic || !d.subgroup_shuffle || d.subgroup_size < 8 ||
      d.max_storage_buffers < kBindings)
    return false;
  // One shader reads every type: each type's features.
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
    if (gpu_weight_type_missing_feature(d, t)) return false;
  if (!takes_matrix(gate_up, 1, n_embd) || !takes_matrix(down, 1, n_ff)) return false;
  // The kernel takes the strides in 32-bit bytes and indexes the stacked
  // experts in 32-bit units of the type's alignment.
  if (gate_up_stride > UINT32_MAX || down_stride > UINT32_MAX ||
      uint64_t(n_expert) * gate_up_stride / gpu_weight_type(gate_up)->align > UINT32_MAX ||
      uint64_t(n_expert) * down_stride / gpu_weight_type(down)->align > UINT32_MAX)
    return false;
  if (n_expert == 0 || n_expert > kMaxExperts || k == 0 || k > kMaxTopk || k > n_expert || rp.n_group > 1)
    return false;
  const uint32_t wg = workgroup_for(d);
  if (wg < 32 || wg > kMaxWorkgroup || !std::has_single_bit(wg) || n_expert > 32 * wg) return false;
  return shared_bytes(wg, n_embd, xq_words(n_embd, n_ff, k, 0)) <= d.max_shared_memory_bytes;
}

bool moe_fused_takes_out_proj(const DeviceInfo& d, GgmlType type, uint32_t n_embd, uint32_t n_ff, uint32_t k,
                              uint32_t att_dim) {
  return takes_matrix(type, n_embd, att_dim) &&
         shared_bytes(workgroup_for(d), n_embd, xq_words(n_embd, n_ff, k, att_dim)) <= d.max_shared_memory_bytes;
}

bool moe_fused_combines_att(const DeviceInfo& d, uint32_t att_dim, uint32_t head_dim, uint32_t splits) {
  const uint32_t wg = workgroup_for(d), chunk = 4 * (wg / 64);
  return wg >= 64 && d.subgroup_size <= 64 && 64 % d.subgroup_size == 0 && splits <= 64 && head_dim > 0 &&
         head_dim % chunk == 0 && att_dim % head_dim == 0;
}

bool moe_fused_takes_attention(const DeviceInfo& d, uint32_t n_embd, uint32_t n_ff, uint32_t k, uint32_t att_dim,
                               uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv, const RopeParams& rope) {
  const uint32_t wg = workgroup_for(d);
  return (head_dim == 64 || head_dim == 128) && head_dim <= n_embd && wg >= 2 * head_dim && n_head_kv > 0 &&
         n_head % n_head_kv == 0 && att_dim == n_head * head_dim && rope.n_rot >= 0 && rope.n_rot % 2 == 0 &&
         uint32_t(rope.n_rot) <= head_dim &&
         shared_bytes(wg, n_embd, xq_words(n_embd, n_ff, k, att_dim)) + attention_shared_bytes(head_dim) <=
             d.max_shared_memory_bytes;
}

bool moe_fused_takes_qkv(GgmlType q, GgmlType k, GgmlType v, uint32_t n_embd, uint32_t q_dim, uint32_t kv_dim) {
  return q_dim > 0 && kv_dim > 0 && takes_matrix(q, q_dim, n_embd) && takes_matrix(k, kv_dim, n_embd) &&
         takes_matrix(v, kv_dim, n_embd);
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
  const uint64_t gu_row = row_bytes(a.gate_up_type, E), dn_row = row_bytes(a.down_type, F);
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
  if (a.att_wgs) check_binding(kKernel, "attention's count", a.counters, uint64_t(a.att_done) * 4);
  if (a.next_qkv && a.qkv_ready) check_binding(kKernel, "q/k/v ready", a.counters, uint64_t(a.qkv_ready) * 4);
  if ((a.att_wgs != 0) != (a.att_done != 0))
    throw Error("internal error: moe_decode_fused waits on an attention count without its counter");
  check_binding(kKernel, "flags", a.flags, 4);
  const bool next_norm = a.next_norm.buffer != VK_NULL_HANDLE;
  if (next_norm) {
    check_binding(kKernel, "next norm", a.next_norm, E * 4);
    if (!a.next_qkv) check_binding(kKernel, "xn", a.xn, E * 4);
  }
  const MoeFusedOutProj o = a.out_proj.value_or(MoeFusedOutProj{});
  if (a.out_proj) {
    if (!moe_fused_takes_out_proj(d, o.type, a.n_embd, a.n_ff, a.k, o.att_dim))
      throw Error("internal error: moe_decode_fused does not take this output projection");
    check_binding(kKernel, "wo", o.w, E * row_bytes(o.type, o.att_dim));
    check_binding(kKernel, "att", o.att, uint64_t(o.att_dim) * 4);
    if (o.splits > 1) {
      if (!moe_fused_combines_att(d, o.att_dim, o.head_dim, o.splits))
        throw Error("internal error: moe_decode_fused does not combine these attention splits");
      const uint64_t rows = uint64_t(o.att_dim / o.head_dim) * o.splits;
      if (o.ml_off < rows * o.head_dim)
        throw Error("internal error: moe_decode_fused split pairs overlap the partials");
      check_binding(kKernel, "attention partials", o.parts, (uint64_t(o.ml_off) + 2 * rows) * 4);
    }
  }
  const MoeFusedAttention at = a.attention.value_or(MoeFusedAttention{});
  if (a.attention) {
    if (!a.out_proj || !moe_fused_takes_attention(d, a.n_embd, a.n_ff, a.k, o.att_dim, at.head_dim, at.n_head,
                                                  at.n_head_kv, at.rope))
      throw Error("internal error: moe_decode_fused does not take this attention");
    if (at.pos1 != 0 && o.splits > 1) throw Error("internal error: moe_decode_fused attention and its splits");
    const uint64_t kv_dim = uint64_t(at.n_head_kv) * at.head_dim;
    check_binding(kKernel, "attention q", at.q, uint64_t(o.att_dim) * 4);
    check_binding(kKernel, "attention k", at.k, kv_dim * 4);
    check_binding(kKernel, "attention v", at.v, kv_dim * 4);
    check_binding(kKernel, "k cache", at.k_cache, uint64_t(at.pos1) * kv_dim * 2);
    check_binding(kKernel, "v cache", at.v_cache, uint64_t(at.pos1) * kv_dim * 2);
    if (at.norm) {
      check_binding(kKernel, "q norm", at.q_norm, uint64_t(at.head_dim) * 4);
      check_binding(kKernel, "k norm", at.k_norm, uint64_t(at.head_dim) * 4);
    }
  }
  const MoeFusedNextQkv n = a.next_qkv.value_or(MoeFusedNextQkv{});
  if (a.next_qkv) {
    if (!next_norm || !moe_fused_takes_qkv(n.q_type, n.k_type, n.v_type, a.n_embd, n.q_dim, n.kv_dim))
      throw Error("internal error: moe_decode_fused does not take these q/k/v products");
    check_binding(kKernel, "wq", n.wq, n.q_dim * row_bytes(n.q_type, E));
    check_binding(kKernel, "wk", n.wk, n.kv_dim * row_bytes(n.k_type, E));
    check_binding(kKernel, "wv", n.wv, n.kv_dim * row_bytes(n.v_type, E));
    check_binding(kKernel, "q", n.q, uint64_t(n.q_dim) * 4);
    check_binding(kKernel, "k", n.k, uint64_t(n.kv_dim) * 4);
    check_binding(kKernel, "v", n.v, uint64_t(n.kv_dim) * 4);
    // Step A reads this layer's q, k and v where step 4 writes the next's.
    auto same = [](const BufferRange& x, const BufferRange& y) { return x.buffer == y.buffer && x.offset == y.offset; };
    if (a.attention && !(same(at.q, n.q) && same(at.k, n.k) && same(at.v, n.v)))
      throw Error("internal error: moe_decode_fused attention inputs apart from the next q/k/v");
  }
  const bool clocks = a.clocks.buffer != VK_NULL_HANDLE;
  if (clocks) {
    if (!d.device_clock || d.max_storage_buffers < kBindings + 1)
      throw Error("internal error: moe_decode_fused clocks without a device clock");
    check_binding(kKernel, "clocks", a.clocks, (uint64_t(a.clock_base) + uint64_t(grid) * kFusedClockSlots) * 8);
  }
  const uint32_t wg = workgroup_for(d);
  std::array<uint32_t, 4> lanes = lanes_for(d);
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (a.lanes[i] == 0) continue;
    if (!std::has_single_bit(a.lanes[i]) || a.lanes[i] > d.subgroup_size || a.lanes[i] > wg)
      throw Error("internal error: moe_decode_fused lanes per row");
    lanes[i] = a.lanes[i];
  }
  const auto [type_masks, wtypes] =
      kernel_types({type_code(a.gate_up_type), type_code(a.down_type), a.out_proj ? type_code(o.type) : 0u,
                    a.next_qkv ? type_code(n.q_type) : 0u, a.next_qkv ? type_code(n.k_type) : 0u,
                    a.next_qkv ? type_code(n.v_type) : 0u},
                   a.type_sets);
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
                       next_norm ? 1u : 0u,
                       o.att_dim,
                       n.q_dim,
                       n.kv_dim,
                       o.splits > 1 ? o.splits : 0u,
                       o.ml_off,
                       o.head_dim,
                       a.clock_base,
                       a.att_done,
                       a.att_wgs,
                       a.next_qkv ? a.qkv_ready : 0u,
                       a.qkv_value,
                       a.poll_loads ? 1u : 0u,
                       a.attention ? at.pos1 : 0u,
                       wtypes};
  std::vector<uint32_t> spec = {wg,
                                xq_words(a.n_embd, a.n_ff, a.k, o.att_dim),
                                a.n_embd / 4,
                                type_masks[0],
                                type_masks[1],
                                type_masks[2],
                                type_masks[3],
                                type_masks[4],
                                type_masks[5],
                                lanes[0],
                                lanes[1],
                                lanes[2],
                                lanes[3],
                                xq_swizzle_for(a.xq_swizzle)};
  if (a.attention) {
    const std::vector<uint32_t> as = attention_spec(at);
    spec.insert(spec.end(), as.begin(), as.end());
    static const bool by_subgroups = !env_off("VKMOE_FUSED_ATT_SUBGROUPS");
    spec.push_back(at.by_subgroups.value_or(by_subgroups) ? d.subgroup_size : 0u);
  }
  const Pipeline& p = ctx.pipeline(clocks ? "moe_decode_fused_clock" : kKernel, kBindings + (clocks ? 1 : 0),
                                   sizeof(FusedPush), spec);
  // Bindings a step does not use hold x in their place. Q8_0 and Q6_K
  // blocks are read as the aligned words around them (whole_words).
  auto or_x = [&](const BufferRange& b) { return b.buffer != VK_NULL_HANDLE ? b : a.x; };
  auto w = [&](const BufferRange& b) { return whole_words(or_x(b), d.max_storage_buffer_range); };
  std::vector<BufferRange> bind = {
      a.x,         a.ffn_norm, a.router_w, w(a.gate),  w(a.up),    w(a.down),  a.logits,  a.h,
      a.ids,       a.weights,  a.counters, or_x(a.next_norm), a.next_qkv ? a.x : or_x(a.xn), a.flags,
      or_x(o.att), w(o.w),     w(n.wq),    w(n.wk),    w(n.wv),
      or_x(a.attention ? at.q : n.q), or_x(a.attention ? at.k : n.k), or_x(a.attention ? at.v : n.v),
      o.splits > 1 ? o.parts : a.x, or_x(at.k_cache), or_x(at.v_cache), or_x(at.q_norm), or_x(at.k_norm)};
  if (clocks) bind.push_back(a.clocks);
  rec.dispatch(p, bind, &push, sizeof push, grid);
}

}  // namespace vkmoe::vk
