#include "engine/vulkan/vk_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/vulkan/attention_coopmat.h"
#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {
namespace {

constexpr uint32_t kFlashWorkgroup = 128;  // WG of attn_flash.comp
// Split-K decode: a split covers at least kMinSplitKeys positions; split until
// a dispatch has about kTargetWorkgroups. H100, Qwen3-30B-A3B at depth 4096
// (docs/PERF.md run 27 call 5; keys per split round up to whole tiles): 96 / 384
// (33 splits of 4 tiles) 248.3-249.5 t/s, 128 / 256 (26-27 of 5) 246.4-248.1,
// 64 / 512 (43-44 of 3) 236.4-236.9, 128 / 128 (15 of 9) 243.8-244.2.
constexpr uint32_t kMinSplitKeys = 96;
constexpr uint32_t kTargetWorkgroups = 384;
// For measuring: VKMOE_ATTN_SPLIT=min_keys,target_workgroups replaces them.
struct SplitParams {
  uint32_t min_keys = kMinSplitKeys, target_workgroups = kTargetWorkgroups;
};
const SplitParams& split_params() {
  static const SplitParams p = [] {
    SplitParams s;
    unsigned k = 0, t = 0;
    if (const char* v = std::getenv("VKMOE_ATTN_SPLIT"); v && std::sscanf(v, "%u,%u", &k, &t) == 2 && k && t) {
      s.min_keys = k;
      s.target_workgroups = t;
    }
    return s;
  }();
  return p;
}

struct RopeStorePush {
  uint32_t q_stride, kv_stride, pos0, head_dim, n_head, n_head_kv, neox, norm;
  float eps;
  uint32_t kv_row, kv_scale_off;  // Q8_0: uints per cache position, first scale uint of a row
  uint32_t n_rot, store_v;
  float freq_scale, ext_factor;
  RopeConsts rc;  // theta_scale, mscale, corr0, corr1
  uint32_t kv_splits, kv_plane;
};
struct FlashPush {
  uint32_t q_stride4, o_stride4, n_rows, group, pos0, n_head, kv_row_lu, kv_len, n_split, ml_off;
  float scale_log2;
  uint32_t kv_scale_off;  // Q8_0: first scale uint of a cache row
  uint32_t kv_start, window, has_sinks;  // first key of split 0; sliding window (0: none); sinks bound
  uint32_t kv_same;                      // k_cache and v_cache are the same rows
  uint32_t tail_counter;                 // 0, or 1 + the first counter of the split tail
  uint32_t neox, n_rot, norm;            // attn_flash_rope_*: RopeStorePush's
  float eps, freq_scale, ext_factor;
  RopeConsts rc;
  uint32_t clock_base;  // _clock: this dispatch's first stamp
  uint32_t wait_counter, wait_value, done_counter, poll_loads;  // chained: AttentionArgs'
};
static_assert(sizeof(FlashPush) <= 128, "push constants past the guaranteed 128 bytes");
struct SplitReducePush {
  uint32_t head_dim, n_head, n_split, ml_off, o_stride, has_sinks;
};

void check_range(const char* what, const BufferRange& b, uint64_t end_bytes) {
  check_binding("attention", what, b, end_bytes);
}

void check_heads(const char* what, uint32_t n_tokens, uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                 uint32_t dim_multiple) {
  if (n_tokens == 0 || n_head == 0 || n_head_kv == 0 || n_head % n_head_kv != 0)
    throw Error(std::string("internal error: ") + what + ": bad shape (tokens " + std::to_string(n_tokens) +
                ", heads " + std::to_string(n_head) + "/" + std::to_string(n_head_kv) + ")");
  if (head_dim == 0 || head_dim > kMaxHeadDim || head_dim % dim_multiple != 0)
    throw Error(std::string(what) + ": head dimension " + std::to_string(head_dim) +
                " is not supported (multiple of " + std::to_string(dim_multiple) + " up to " +
                std::to_string(kMaxHeadDim) + ")");
}

// Tile sizes and invocation layout of attn_flash.comp (its spec constants).
struct FlashShape {
  uint32_t br = 0, bc = 0;  // query rows per workgroup, keys per tile
  uint32_t sr = 0, sk = 0;  // scores per invocation: rows x keys
  uint32_t dt = 0, nc = 0;  // output: invocations along head_dim, vec4 columns each
  bool q_shared = true;     // query tile in shared memory (else read from q in the score loop)
  bool subgroup_rows = false;  // one subgroup per query row, one lane per key (SUBGROUP_ROWS)
};

// Floats the tiles hold as scratch (the rope prologue, the split tail): one
// tile of vec4 columns, or an F16 cache's key and value tiles of packed halves.
uint64_t tile_scratch_floats(const FlashShape& s, uint32_t head_dim) { return uint64_t(s.bc) * (head_dim / 4 + 1) * 4; }

uint64_t flash_shared_bytes(const FlashShape& s, uint32_t head_dim) {
  const uint64_t row_vec4 = head_dim / 4 + 1;
  return 16 * ((s.q_shared ? s.br : 1) * row_vec4 + s.br * (s.bc / 4 + 1)) + 4 * tile_scratch_floats(s, head_dim) +
         4 * (2 * kFlashWorkgroup + 4 * s.br);
}

// Fills in the invocation layout for s.br x s.bc; false when none fits.
bool map_invocations(FlashShape& s, uint32_t head_dim) {
  const uint32_t wg = kFlashWorkgroup, per = s.br * s.bc / wg;
  if (per == 0 || s.br * s.bc % wg != 0 || s.br > wg || s.bc % (wg / s.br) != 0) return false;
  s.sk = std::min<uint32_t>(4, per);
  s.sr = per / s.sk;
  if (s.sr > s.br) return false;
  const uint32_t d4 = head_dim / 4;
  uint32_t best_idle = UINT32_MAX;
  s.dt = 0;
  for (uint32_t dt : {32u, 16u, 64u, 8u}) {  // fewest idle columns, then this order
    const uint32_t rg = wg / dt, nc = (d4 + dt - 1) / dt;
    if (rg > s.br || s.br % rg != 0 || nc * dt - d4 >= best_idle) continue;
    best_idle = nc * dt - d4;
    s.dt = dt;
    s.nc = nc;
  }
  return s.dt != 0;
}

// Rows per workgroup: enough for the query rows of one kv head (at least 4),
// at most 32 (64 for head_dim <= 64); the largest tile that fits in shared
// memory, with the query tile there if any does. Without it (large head_dim:
// 576 needs more than 48 KiB with it) down to 8-key tiles (32 KiB devices).
// One token with subgroup (F16 caches; subgroups of 8-32 lanes with
// arithmetic) takes one subgroup per row and one lane per key: 128 / subgroup
// rows, subgroup-key tiles (4 rows and 32 keys on NVIDIA, as below). H100,
// docs/PERF.md run 27 call 3: tg128 @ d4096 244.8-247.6 t/s against
// 242.4-243.6 for the kernel before it. Otherwise one token first tries 4 rows
// and 32-key tiles: a kv head's query heads then spread over several
// workgroups, each with short tiles. On an
// H100 (Qwen3-30B-A3B shapes: 8 query heads per kv head, head_dim 128;
// docs/PERF.md run 15) resident tg128 ran 210.1 t/s against 197.4 with 8 rows
// and 64-key tiles, 173.4 against 170.5 at depth 4096.
FlashShape flash_shape(uint32_t shared_bytes, uint32_t head_dim, uint32_t rows, bool one_token, uint32_t subgroup) {
  if (one_token && (subgroup == 8 || subgroup == 16 || subgroup == 32)) {
    FlashShape s;
    s.br = kFlashWorkgroup / subgroup;
    s.sr = s.sk = 1;
    s.bc = s.dt = subgroup;
    s.nc = (head_dim / 4 + subgroup - 1) / subgroup;
    s.subgroup_rows = true;
    if (flash_shared_bytes(s, head_dim) <= shared_bytes) return s;
  }
  if (one_token) {
    FlashShape s;
    s.br = 4;
    s.bc = 32;
    if (map_invocations(s, head_dim) && flash_shared_bytes(s, head_dim) <= shared_bytes) return s;
  }
  const uint32_t br_max = head_dim <= 64 ? 64 : 32;
  uint32_t br_start = 4;
  while (br_start < rows && br_start < br_max) br_start *= 2;
  for (bool q_shared : {true, false})
    for (uint32_t br = q_shared ? br_start : std::max(br_start, 16u); br >= 4; br /= 2)  // 8-key tiles need 16 rows
      for (uint32_t bc : {64u, 32u, 16u, 8u}) {
        if ((br > 16 && bc > 32) || (bc == 8 && q_shared)) continue;
        FlashShape s;
        s.br = br;
        s.bc = bc;
        s.q_shared = q_shared;
        if (map_invocations(s, head_dim) && flash_shared_bytes(s, head_dim) <= shared_bytes) return s;
      }
  throw Error("attention: no flash-attention tile fits in " + std::to_string(shared_bytes) +
              " bytes of shared memory for head dimension " + std::to_string(head_dim));
}

// The subgroup size for one-token subgroup rows (F16 caches), or 0.
uint32_t rows_subgroup(const Context& ctx, const AttentionArgs& a) {
  static const bool off = env_off("VKMOE_ATTN_SUBGROUP_ROWS");
  const DeviceInfo& dev = ctx.info();
  return !off && a.subgroup_rows && a.kv_type == KvType::F16 && dev.subgroup_arithmetic ? dev.subgroup_size : 0;
}

// Shared memory the tiles may use: the device's, or the caller's cap (tests).
uint32_t shared_cap(const Context& ctx, const AttentionArgs& a) {
  const uint32_t dev = ctx.info().max_shared_memory_bytes;
  return a.max_shared_bytes ? std::min(a.max_shared_bytes, dev) : dev;
}

uint32_t max_splits(uint32_t n_ctx) {
  return std::clamp<uint32_t>(n_ctx / split_params().min_keys, 1, kMaxAttentionSplits);
}

// Head dimensions each cache type's shaders handle (vector loads; Q8_0 blocks).
uint32_t dim_multiple(KvType t, uint32_t f32_multiple) {
  return t == KvType::Q8_0 ? 32 : t == KvType::F16 ? 2 * f32_multiple : f32_multiple;
}

// Q8_0 rows (see the header): int8 values of all heads, then per head
// ceil(D / 64) uints of f16 scale pairs, padded to a multiple of 4 uints.
uint32_t q8_scale_off(uint32_t head_dim, uint32_t n_head_kv) { return n_head_kv * head_dim / 4; }
uint32_t q8_row_uints(uint32_t head_dim, uint32_t n_head_kv) {
  return (q8_scale_off(head_dim, n_head_kv) + n_head_kv * ((head_dim + 63) / 64) + 3) / 4 * 4;
}

}  // namespace

const char* attn_clock_name(AttnClock c) {
  static const char* const names[] = {"start",  "inputs waited", "rope prologue", "key tiles",
                                      "stored", "split counted", "end"};
  static_assert(sizeof names / sizeof *names == size_t(AttnClock::Count));
  return c < AttnClock::Count ? names[uint32_t(c)] : "?";
}

const char* kv_type_name(KvType t) { return t == KvType::F16 ? "f16" : t == KvType::Q8_0 ? "q8_0" : "f32"; }

uint64_t kv_cache_bytes(KvType t, uint32_t n_positions, uint32_t head_dim, uint32_t n_head_kv) {
  if (t != KvType::Q8_0) return uint64_t(n_positions) * head_dim * n_head_kv * (t == KvType::F16 ? 2 : 4);
  if (head_dim % 32 != 0)
    throw Error("a q8_0 KV cache needs a head dimension that is a multiple of 32 (this model's is " +
                std::to_string(head_dim) + "); use --kv-type f16");
  return uint64_t(n_positions) * q8_row_uints(head_dim, n_head_kv) * 4;
}

void record_rope_store(Recorder& rec, const RopeStoreArgs& a) {
  check_heads("rope/store", a.n_tokens, a.head_dim, a.n_head, a.n_head_kv, dim_multiple(a.kv_type, 1));
  const uint64_t D = a.head_dim, kv_dim = D * a.n_head_kv;
  check_range("q", a.q, ((a.n_tokens - 1) * uint64_t(a.q_stride) + D * a.n_head) * 4);
  if (a.kv_splits == 0) throw Error("internal error: rope/store with no k/v planes");
  const uint64_t kv_end =
      (uint64_t(a.kv_splits - 1) * a.kv_plane + (a.n_tokens - 1) * uint64_t(a.kv_stride) + kv_dim) * 4;
  check_range("k", a.k, kv_end);
  const bool store_v = a.v.buffer != VK_NULL_HANDLE;
  if (store_v) check_range("v", a.v, kv_end);
  const uint64_t cache_end = kv_cache_bytes(a.kv_type, a.pos0 + a.n_tokens, a.head_dim, a.n_head_kv);
  check_range("k cache", a.k_cache, cache_end);
  if (store_v) check_range("v cache", a.v_cache, cache_end);
  if (a.norm) {
    check_range("q norm", a.q_norm, D * 4);
    check_range("k norm", a.k_norm, D * 4);
  }
  Context& ctx = rec.context();
  if (a.n_tokens > ctx.info().max_workgroup_count[1])
    throw Error("internal error: rope/store with too many tokens in one dispatch");
  const RopeParams& rp = a.rope;
  if (rp.n_rot < 0 || rp.n_rot % 2 != 0 || uint32_t(rp.n_rot) > std::min(a.head_dim, 512u))
    throw Error("internal error: rope/store n_rot " + std::to_string(rp.n_rot) +
                " is not even and <= head_dim (at most 512)");
  const RopeStorePush push{a.q_stride, a.kv_stride, a.pos0, a.head_dim, a.n_head, a.n_head_kv,
                           rp.neox ? 1u : 0u, a.norm ? 1u : 0u, a.eps,
                           q8_row_uints(a.head_dim, a.n_head_kv), q8_scale_off(a.head_dim, a.n_head_kv),
                           uint32_t(rp.n_rot), store_v ? 1u : 0u, rp.freq_scale, rp.ext_factor,
                           rope_consts(rp), a.kv_splits, a.kv_plane};
  const bool sg = rope_store_uses_subgroups(ctx, a);
  constexpr uint32_t kSgHeadsPerWorkgroup = 4;  // HPW of attn_rope_store_sg.comp
  const uint32_t heads = a.n_head + a.n_head_kv;
  const std::string name = std::string(sg ? "attn_rope_store_sg_" : "attn_rope_store_") + kv_type_name(a.kv_type);
  const Pipeline& p = ctx.pipeline(name, 7, sizeof push);
  // Without norm the weight bindings are unused: bind q in their place; without v, k and its cache.
  rec.dispatch(p,
               {a.q, a.k, store_v ? a.v : a.k, a.norm ? a.q_norm : a.q, a.norm ? a.k_norm : a.q, a.k_cache,
                store_v ? a.v_cache : a.k_cache},
               push, sg ? (heads + kSgHeadsPerWorkgroup - 1) / kSgHeadsPerWorkgroup : heads, a.n_tokens);
}

bool rope_store_uses_subgroups(const Context& ctx, const RopeStoreArgs& a) {
  return !env_off("VKMOE_ROPE_STORE_SG") && ctx.info().subgroup_arithmetic && a.kv_type != KvType::Q8_0 &&
         a.v.buffer != VK_NULL_HANDLE && a.head_dim % 4 == 0 && a.rope.n_rot % 4 == 0;
}

bool attention_folds_rope_store(const Context& ctx, const AttentionArgs& a, const RopeStoreArgs& rs) {
  static const bool off = env_off("VKMOE_ATTN_ROPE_FOLD");
  if (off || a.n_tokens != 1 || rs.n_tokens != 1 || a.kv_type != KvType::F16 || rs.kv_type != KvType::F16) return false;
  if (!ctx.info().subgroup_arithmetic) return false;  // the prologue's norms are subgroup sums
  if (rs.v.buffer == VK_NULL_HANDLE || a.k_cache.buffer == a.v_cache.buffer) return false;  // latent attention
  if (rs.pos0 != a.pos0 || rs.head_dim != a.head_dim || rs.n_head != a.n_head || rs.n_head_kv != a.n_head_kv)
    return false;
  const uint32_t D = a.head_dim;
  if (D % 8 != 0 || rs.rope.n_rot < 0 || rs.rope.n_rot % 2 != 0 || uint32_t(rs.rope.n_rot) > D) return false;
  const FlashShape s = flash_shape(shared_cap(ctx, a), D, a.n_head / a.n_head_kv, true, rows_subgroup(ctx, a));
  // The prologue's key row fits the key tile; its arrays the rest of shared memory.
  return s.q_shared && D <= tile_scratch_floats(s, D) &&
         flash_shared_bytes(s, D) + 4 * (2 * D + s.br + 1) <= shared_cap(ctx, a);
}

uint64_t attention_scratch_bytes(uint32_t n_head, uint32_t head_dim, uint32_t n_ctx) {
  return uint64_t(n_head) * max_splits(n_ctx) * (head_dim + 2) * 4;
}

// With an empty scratch range the keys are never split (one dispatch). A
// split is combined by the kernel's tail (counters) or by a barrier and the
// reduce dispatch; the caller records the barrier before reading o either way.
AttentionRecord record_attention(Recorder& rec, const AttentionArgs& a) {
  check_heads("attention", a.n_tokens, a.head_dim, a.n_head, a.n_head_kv, dim_multiple(a.kv_type, 4));
  if (a.q_stride % 4 != 0 || a.o_stride % 4 != 0)
    throw Error("internal error: attention q/o strides must be multiples of 4 floats");
  const uint32_t D = a.head_dim, group = a.n_head / a.n_head_kv, n_kv = a.pos0 + a.n_tokens;
  const uint64_t kv_dim = uint64_t(D) * a.n_head_kv;
  check_range("q", a.q, ((a.n_tokens - 1) * uint64_t(a.q_stride) + uint64_t(D) * a.n_head) * 4);
  check_range("o", a.o, ((a.n_tokens - 1) * uint64_t(a.o_stride) + uint64_t(D) * a.n_head) * (a.o_f16 ? 2 : 4));
  check_range("k cache", a.k_cache, kv_cache_bytes(a.kv_type, n_kv, D, a.n_head_kv));
  check_range("v cache", a.v_cache, kv_cache_bytes(a.kv_type, n_kv, D, a.n_head_kv));

  Context& ctx = rec.context();
  const DeviceInfo& dev = ctx.info();
  const uint32_t rows = a.n_tokens * group;
  const bool has_sinks = a.sinks.buffer != VK_NULL_HANDLE;
  if (has_sinks) check_range("sinks", a.sinks, uint64_t(a.n_head) * 4);
  if (a.rope) {
    const RopeStoreArgs& rs = *a.rope;
    if (!attention_folds_rope_store(ctx, a, rs))
      throw Error("internal error: attention given a rope/store it cannot fold");
    if (rs.q.buffer != a.q.buffer || rs.q.offset != a.q.offset || rs.k_cache.buffer != a.k_cache.buffer ||
        rs.v_cache.buffer != a.v_cache.buffer)
      throw Error("internal error: folded rope/store on other buffers than the attention's");
    check_range("new k", rs.k, kv_dim * 4);
    check_range("new v", rs.v, kv_dim * 4);
    if (rs.norm) {
      check_range("q norm", rs.q_norm, uint64_t(D) * 4);
      check_range("k norm", rs.k_norm, uint64_t(D) * 4);
    }
  }
  if (attention_uses_coopmat(ctx, a)) {
    if (a.wait_counter) rec.barrier();  // not chained
    record_attention_coopmat(rec, a);
    return {};
  }
  if (a.o_f16) throw Error("internal error: f16 attention output rows off the cooperative-matrix kernel");
  const FlashShape s = flash_shape(shared_cap(ctx, a), D, rows, a.n_tokens == 1, rows_subgroup(ctx, a));
  const uint32_t row_blocks = (rows + s.br - 1) / s.br;
  if (row_blocks > dev.max_workgroup_count[0] || a.n_head_kv > dev.max_workgroup_count[2])
    throw Error("internal error: attention dispatch exceeds the workgroup count limits");

  // Keys any query sees: [kv_start, n_kv) (the first token's window starts first).
  const uint32_t kv_start = a.window > 0 && a.pos0 + 1 > a.window ? a.pos0 + 1 - a.window : 0;
  const uint32_t span = n_kv - kv_start;
  uint32_t n_split = 1;
  if (a.scratch.buffer != VK_NULL_HANDLE) {
    const uint32_t base = row_blocks * a.n_head_kv;
    const uint32_t want = (split_params().target_workgroups + base - 1) / base;
    n_split = std::max<uint32_t>(1, std::min(want, max_splits(span) / a.n_tokens));
  }
  // Keys per split: whole tiles; recount the splits after rounding.
  uint32_t kv_len = (span + n_split - 1) / n_split;
  kv_len = (kv_len + s.bc - 1) / s.bc * s.bc;
  n_split = (span + kv_len - 1) / kv_len;
  const uint32_t part_rows = a.n_tokens * a.n_head * n_split;
  if (n_split > 1) check_range("scratch", a.scratch, uint64_t(part_rows) * (D + 2) * 4);

  FlashPush push{};
  push.q_stride4 = a.q_stride / 4;
  push.o_stride4 = a.o_stride / 4;
  push.n_rows = rows;
  push.group = group;
  push.pos0 = a.pos0;
  push.n_head = a.n_head;
  // Loads between cache positions: vec4 (f32), 8 halves (f16), 4 uints (q8_0).
  push.kv_row_lu = a.kv_type == KvType::Q8_0 ? q8_row_uints(D, a.n_head_kv) / 4
                                              : static_cast<uint32_t>(kv_dim / (a.kv_type == KvType::F16 ? 8 : 4));
  push.kv_scale_off = q8_scale_off(D, a.n_head_kv);
  push.kv_len = kv_len;
  push.n_split = n_split;
  push.ml_off = part_rows * D;
  push.scale_log2 = a.scale * 1.4426950408889634f;
  push.kv_start = kv_start;
  push.window = a.window;
  // With a split the sinks enter only the combination (once per row): the
  // kernel's tail or the reduce dispatch.
  push.has_sinks = has_sinks ? 1u : 0u;
  const uint32_t n_counters = row_blocks * a.n_head_kv;
  // The tail keeps each row's (max, sum) of every split in the tiles' shared memory.
  static const bool tail_off = env_off("VKMOE_ATTN_SPLIT_TAIL");
  const bool tail_fits = 2 * std::min(s.br, rows) * n_split <= tile_scratch_floats(s, D);
  if (a.leave_splits && (a.n_tokens != 1 || has_sinks))
    throw Error("internal error: attention splits left for the caller with several tokens or sinks");
  const bool left = n_split > 1 && a.leave_splits;
  const bool tail = n_split > 1 && !left && tail_fits && !tail_off && a.counters.buffer != VK_NULL_HANDLE &&
                    (uint64_t(a.counter_index) + n_counters) * 4 <= a.counters.range;
  push.tail_counter = tail ? a.counter_index + 1 : 0;
  // Chained: one dispatch waits for its inputs and counts itself done.
  const bool single = n_split == 1 || tail || left;
  if ((a.wait_counter || a.done_counter) && (!a.rope || a.counters.buffer == VK_NULL_HANDLE))
    throw Error("internal error: chained attention without the folded rope or counters");
  const bool waits = a.wait_counter != 0 && single,
             counts = a.done_counter != 0 && single && (n_split > 1 || !a.done_only_split);
  if (a.wait_counter && !waits) rec.barrier();
  if (waits) {
    push.wait_counter = a.wait_counter;
    push.wait_value = a.wait_value;
    push.poll_loads = a.poll_loads ? 1u : 0u;
  }
  if (counts) push.done_counter = a.done_counter;
  const bool counters = tail || waits || counts;
  push.kv_same = a.k_cache.buffer == a.v_cache.buffer && a.k_cache.offset == a.v_cache.offset ? 1u : 0u;
  const std::vector<uint32_t> spec = {D,    s.br, s.bc, s.sr, s.sk, s.dt, s.nc, s.q_shared ? 1u : 0u,
                                     s.subgroup_rows ? 1u : 0u};
  // Unused bindings get o (partials without a split, counters without the
  // tail) or q (sinks without sinks, norm weights without a norm).
  const BufferRange& sinks = push.has_sinks ? a.sinks : a.q;
  std::vector<BufferRange> bind = {a.q, a.k_cache, a.v_cache, a.o, n_split > 1 ? a.scratch : a.o, sinks,
                                   counters ? a.counters : a.o};
  std::string name = std::string("attn_flash_") + kv_type_name(a.kv_type);
  if (a.rope) {
    const RopeStoreArgs& rs = *a.rope;
    name = "attn_flash_rope_f16";
    push.neox = rs.rope.neox ? 1u : 0u;
    push.n_rot = uint32_t(rs.rope.n_rot);
    push.norm = rs.norm ? 1u : 0u;
    push.eps = rs.eps;
    push.freq_scale = rs.rope.freq_scale;
    push.ext_factor = rs.rope.ext_factor;
    push.rc = rope_consts(rs.rope);
    bind.insert(bind.end(), {rs.k, rs.v, rs.norm ? rs.q_norm : a.q, rs.norm ? rs.k_norm : a.q});
    if (a.clocks.buffer != VK_NULL_HANDLE) {
      const uint64_t wgs = uint64_t(row_blocks) * n_split * a.n_head_kv;
      if (!dev.device_clock || dev.max_storage_buffers < bind.size() + 1 || wgs > kAttnClockWorkgroups)
        throw Error("internal error: attention clocks without a device clock or for too many workgroups");
      check_range("clocks", a.clocks, (a.clock_base + wgs * kAttnClockSlots) * 8);
      name += "_clock";
      push.clock_base = a.clock_base;
      bind.push_back(a.clocks);
    }
  }
  const Pipeline& fp = ctx.pipeline(name, static_cast<uint32_t>(bind.size()), sizeof push, spec);
  rec.dispatch(fp, bind, &push, sizeof push, row_blocks, n_split, a.n_head_kv);
  if (single)
    return {n_split, tail, left, left ? push.ml_off : 0u, a.rope != nullptr, s.subgroup_rows, waits,
            counts ? row_blocks * n_split * a.n_head_kv : 0u};
  rec.barrier();
  const SplitReducePush rp{D, a.n_head, n_split, part_rows * D, a.o_stride, has_sinks ? 1u : 0u};
  const Pipeline& p = ctx.pipeline("attn_split_reduce", 3, sizeof rp);
  rec.dispatch(p, {a.scratch, a.o, has_sinks ? a.sinks : a.scratch}, rp, a.n_tokens * a.n_head);
  return {n_split, false, false, 0, a.rope != nullptr, s.subgroup_rows};
}

}  // namespace vkmoe::vk
