#include "engine/vulkan/vk_moe.h"

#include <algorithm>
#include <bit>
#include <string>

#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {
namespace {

// Push-constant blocks (must match shaders/moe_*.comp).
struct TopkPush {
  uint32_t n_expert, k, logit_stride, normalize, gating, has_bias, n_group, topk_group;
  float scale;
  uint32_t splits, split_plane;
};
struct GroupPush {
  MoeTableLayout layout;
  uint32_t n_expert;
};
struct CombinePush {
  MoeTableLayout layout;
  uint32_t n, y_stride, x_stride;
};
struct CombineNormPush {
  CombinePush c;
  float eps;
  uint32_t check, has_h;
};
static_assert(sizeof(MoeTableLayout) == 36, "MoeTableLayout must mirror MoeLayout in shaders/moe_table.glsl");

constexpr uint32_t kMaxExperts = 1024, kMaxTopk = 64, kMaxGroups = 64, kCombineWorkgroup = 256;
// moe_group: one workgroup, as large as the device allows within these bounds.
constexpr uint32_t kGroupWorkgroup = 256, kGroupWorkgroupMax = 1024;

void check_layout(const char* kernel, const MoeTableLayout& l, const BufferRange& table) {
  const MoeTableLayout want = MoeTableLayout::make(l.n_tokens, l.k, 0);
  if (l.k == 0 || l.tile_expert_off != want.tile_expert_off || l.max_tiles < want.max_tiles ||
      l.slot_token_off < l.tile_expert_off + l.max_tiles || l.slot_pair_off < l.slot_token_off + l.max_slots() ||
      l.pair_slot_off < l.slot_pair_off + l.max_slots() || l.words < l.pair_slot_off + l.pairs())
    throw Error(std::string("internal error: ") + kernel + " got an inconsistent MoeTableLayout");
  check_binding(kernel, "table", table, l.bytes());
}

}  // namespace

void check_topk_params(uint32_t n_expert, uint32_t k, const RouterParams& rp) {
  if (n_expert == 0 || n_expert > kMaxExperts || k == 0 || k > kMaxTopk || k > n_expert)
    throw Error("moe_topk: unsupported n_expert " + std::to_string(n_expert) + " / k " + std::to_string(k) +
                " (need 1 <= k <= min(n_expert, 64), n_expert <= 1024)");
  if (rp.n_group < 1 || uint32_t(rp.n_group) > kMaxGroups || n_expert % rp.n_group != 0 || rp.topk_group < 1 ||
      rp.topk_group > rp.n_group)
    throw Error("moe_topk: unsupported expert groups " + std::to_string(rp.n_group) + " / " +
                std::to_string(rp.topk_group) + " (need n_group <= 64 dividing n_expert, 1 <= topk_group <= n_group)");
}

void record_moe_topk(Recorder& rec, const MoeTopkArgs& a) {
  if (a.n_tokens == 0) return;
  check_topk_params(a.n_expert, a.k, a.router);
  if (a.logit_stride < a.n_expert) throw Error("internal error: moe_topk logit_stride < n_expert");
  const RouterParams& rp = a.router;
  const bool has_bias = a.bias.buffer != VK_NULL_HANDLE;
  if (has_bias) check_binding("moe_topk", "bias", a.bias, uint64_t(a.n_expert) * 4);
  Context& ctx = rec.context();
  const DeviceInfo& dev = ctx.info();
  if (a.n_tokens > dev.max_workgroup_count[0]) throw Error("internal error: moe_topk with too many tokens");
  if (a.splits == 0) throw Error("internal error: moe_topk with no logit planes");
  check_binding("moe_topk", "logits", a.logits,
                (uint64_t(a.splits - 1) * a.split_plane + uint64_t(a.n_tokens - 1) * a.logit_stride + a.n_expert) * 4);
  check_binding("moe_topk", "ids", a.ids, uint64_t(a.n_tokens) * a.k * 4);
  check_binding("moe_topk", "weights", a.weights, uint64_t(a.n_tokens) * a.k * 4);

  // One lane per expert up to 256 lanes (each lane owns at most 32 experts),
  // at least 64 lanes and at least a subgroup.
  const uint32_t sg = dev.subgroup_size;
  const bool subgroup = dev.subgroup_arithmetic && sg > 0 && (sg & (sg - 1)) == 0 && sg <= 256;
  uint32_t wg = std::clamp<uint32_t>(std::bit_ceil(a.n_expert), 64, 256);
  if (subgroup) wg = std::max(wg, sg);
  if (wg > dev.max_workgroup_invocations) throw Error("internal error: moe_topk workgroup too large for the device");
  const TopkPush push{a.n_expert, a.k, a.logit_stride, rp.normalize ? 1u : 0u, uint32_t(rp.gating), has_bias ? 1u : 0u,
                      uint32_t(rp.n_group), uint32_t(rp.topk_group), rp.scale, a.splits, a.split_plane};
  const Pipeline& p = ctx.pipeline(subgroup ? "moe_topk_batch_sg" : "moe_topk_batch", 4, sizeof(TopkPush), {wg});
  // Without bias its binding is unused: bind the logits in its place.
  rec.dispatch(p, {a.logits, a.ids, a.weights, has_bias ? a.bias : a.logits}, push, a.n_tokens);
}

void record_moe_group(Recorder& rec, const MoeGroupArgs& a) {
  const MoeTableLayout& l = a.layout;
  if (a.n_expert == 0 || a.n_expert > kMaxExperts)
    throw Error("moe_group: unsupported n_expert " + std::to_string(a.n_expert) + " (at most 1024)");
  check_layout("moe_group", l, a.table);
  const uint64_t pairs = uint64_t(l.n_tokens) * l.k;
  if (l.max_tiles < MoeTableLayout::make(l.n_tokens, l.k, a.n_expert).max_tiles)
    throw Error("internal error: moe_group layout has too few tiles for " + std::to_string(a.n_expert) + " experts");
  check_binding("moe_group", "ids", a.ids, pairs * 4);
  Context& ctx = rec.context();
  const DeviceInfo& d = ctx.info();
  const uint32_t wg =
      std::min<uint32_t>(kGroupWorkgroupMax, std::min(d.max_workgroup_invocations, d.max_workgroup_size[0]));
  if (wg < kGroupWorkgroup) throw Error("moe_group needs workgroups of 256 invocations");
  const GroupPush push{l, a.n_expert};
  rec.dispatch(ctx.pipeline("moe_group", 2, sizeof(GroupPush), {std::bit_floor(wg)}), {a.ids, a.table}, push, 1);
}

void record_moe_combine(Recorder& rec, const MoeCombineArgs& a) {
  const MoeTableLayout& l = a.layout;
  check_layout("moe_combine", l, a.table);
  if (l.n_tokens == 0 || a.n == 0) return;
  if (a.y_stride < a.n || a.x_stride < a.n) throw Error("internal error: moe_combine stride < n");
  Context& ctx = rec.context();
  if (l.n_tokens > ctx.info().max_workgroup_count[1]) throw Error("internal error: moe_combine with too many tokens");
  check_binding("moe_combine", "y", a.y, (uint64_t(l.pairs() - 1) * a.y_stride + a.n) * 4);
  check_binding("moe_combine", "weights", a.weights, uint64_t(l.n_tokens) * l.k * 4);
  check_binding("moe_combine", "x", a.x, (uint64_t(l.n_tokens - 1) * a.x_stride + a.n) * 4);
  const CombinePush push{l, a.n, a.y_stride, a.x_stride};
  if (a.norm_w.buffer != VK_NULL_HANDLE) {
    if ((a.n | a.y_stride | a.x_stride) % 4 != 0 || l.k > kMaxTopk)
      throw Error("internal error: moe_combine with a norm needs rows of 4-value words and k <= 64");
    if (l.n_tokens > ctx.info().max_workgroup_count[0]) throw Error("internal error: moe_combine with too many tokens");
    check_binding("moe_combine", "norm weights", a.norm_w, uint64_t(a.n) * 4);
    check_binding("moe_combine", "xn", a.xn, (uint64_t(l.n_tokens - 1) * a.x_stride + a.n) * 4);
    const bool has_h = a.xh.buffer != VK_NULL_HANDLE;
    if (has_h) check_binding("moe_combine", "xh", a.xh, (uint64_t(l.n_tokens - 1) * a.x_stride + a.n) * 2);
    check_binding("moe_combine", "flags", a.flags, 4);
    const CombineNormPush pn{push, a.eps, a.check, has_h ? 1u : 0u};
    rec.dispatch(ctx.pipeline("moe_combine_rows_norm", 8, sizeof(CombineNormPush)),
                 {a.y, a.weights, a.table, a.x, a.norm_w, a.xn, a.flags, has_h ? a.xh : a.xn}, pn, l.n_tokens);
    return;
  }
  rec.dispatch(ctx.pipeline("moe_combine", 4, sizeof(CombinePush)), {a.y, a.weights, a.table, a.x}, push,
               (a.n + kCombineWorkgroup - 1) / kCombineWorkgroup, l.n_tokens);
}

void build_moe_table(const int32_t* ids, const MoeTableLayout& layout, const int32_t* group_of_expert,
                     uint32_t n_expert, uint32_t* words) {
  const MoeTableLayout& l = layout;
  const uint32_t pairs = l.n_tokens * l.k;
  // Pairs of each group, in pair (= token) order.
  std::vector<int32_t> group(pairs);
  int32_t n_groups = 0;
  for (uint32_t q = 0; q < pairs; ++q) {
    if (ids[q] < 0 || uint32_t(ids[q]) >= n_expert)
      throw Error("internal error: build_moe_table expert id " + std::to_string(ids[q]) + " out of range");
    group[q] = group_of_expert[ids[q]];
    n_groups = std::max(n_groups, group[q] + 1);
  }
  std::vector<uint32_t> count(n_groups, 0), start(n_groups + 1, 0);
  for (int32_t g : group)
    if (g >= 0) ++count[g];
  for (int32_t g = 0; g < n_groups; ++g)
    start[g + 1] = start[g] + (count[g] + kMoeTileRows - 1) / kMoeTileRows * kMoeTileRows;
  const uint32_t used = start[n_groups] / kMoeTileRows;
  if (used > l.max_tiles)
    throw Error("internal error: build_moe_table needs " + std::to_string(used) + " tiles, layout has " +
                std::to_string(l.max_tiles));

  std::fill(words, words + l.words, 0u);
  words[l.count_off] = used;
  std::fill(words + l.tile_expert_off, words + l.tile_expert_off + l.max_tiles, kMoeNoSlot);  // int -1
  std::fill(words + l.slot_token_off, words + l.slot_token_off + l.max_slots(), kMoeNoSlot);  // int -1
  std::fill(words + l.slot_pair_off, words + l.slot_pair_off + l.max_slots(), kMoeNoSlot);
  for (int32_t g = 0; g < n_groups; ++g)
    for (uint32_t s = start[g]; s < start[g + 1]; s += kMoeTileRows) words[l.tile_expert_off + s / kMoeTileRows] = g;
  std::vector<uint32_t> next(start.begin(), start.end() - 1);
  for (uint32_t q = 0; q < pairs; ++q) {
    if (group[q] < 0) {
      words[l.pair_slot_off + q] = kMoeNoSlot;
      continue;
    }
    const uint32_t s = next[group[q]]++;
    words[l.pair_slot_off + q] = s;
    words[l.slot_token_off + s] = q / l.k;
    words[l.slot_pair_off + s] = q;
  }
}

}  // namespace vkmoe::vk
