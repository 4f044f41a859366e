#pragma once
// Attention for a ubatch of tokens over the KV cache (shaders/attn_*.comp).
// Layout: q [t][n_head * head_dim], k/v [t][n_head_kv * head_dim] f32 scratch;
// the caches hold one row per position of n_head_kv * head_dim values of KvType.
// Q8_0 rows: the int8 values of all heads (4 per uint), then per head
// ceil(head_dim / 64) uints of f16 scales (one per block of 32 values, pairs
// packed low half first), padded to 16 bytes; value = q * scale.
#include <cstdint>

#include "cpu/rope.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

enum class KvType { F32, F16, Q8_0 };
constexpr uint32_t kMaxHeadDim = 1024;  // of the attention kernels
const char* kv_type_name(KvType t);
// Bytes of one cache (K or V) of n_positions rows; Q8_0 needs head_dim % 32 == 0.
uint64_t kv_cache_bytes(KvType t, uint32_t n_positions, uint32_t head_dim, uint32_t n_head_kv);

// For each token t (position pos0 + t): optionally RMS-normalizes every q and k
// head with q_norm / k_norm weights (f32, head_dim values, eps), applies rotary
// embedding (cpu/rope.h's rope: partial rotary, NeoX or adjacent pairs, YaRN;
// the same float angles, reduced exactly below 4e5 rad) to q in place and to
// k, and stores the rotated k and the unchanged v into the caches at position
// pos0 + t (converted to the cache type). An empty v stores no values (latent
// attention, whose values are its cached keys).
struct RopeStoreArgs {
  BufferRange q, k, v, q_norm, k_norm, k_cache, v_cache;
  uint32_t q_stride = 0, kv_stride = 0;  // floats between tokens in q / k,v
  uint32_t n_tokens = 0, pos0 = 0, head_dim = 0, n_head = 0, n_head_kv = 0;
  RopeParams rope;  // n_rot even, <= head_dim
  bool norm = false;
  float eps = 1e-6f;
  KvType kv_type = KvType::F16;
  // k and v as the sums, in plane order, of kv_splits planes kv_plane floats
  // apart (split-K partials, vk::GemmSplitSum; kv_stride the rows' length).
  uint32_t kv_splits = 1, kv_plane = 0;
};
void record_rope_store(Recorder& rec, const RopeStoreArgs& a);
// Whether record_rope_store takes one subgroup per head (attn_rope_store_sg.comp):
// subgroup arithmetic, an F16 or F32 cache with values, head_dim and n_rot
// multiples of 4, and VKMOE_ROPE_STORE_SG not 0 (read at each call).
bool rope_store_uses_subgroups(const Context& ctx, const RopeStoreArgs& a);

// o[t] = softmax(q[t] . K[lo..p]^T * scale) V with p = pos0 + t (causal;
// grouped-query heads share kv heads), lo = 0, or with a sliding window
// lo = max(0, p - window + 1). With sinks, head h's softmax also counts the
// logit sinks[h] (not scaled) in its max and denominator; the sink's mass is
// dropped (llama.cpp / gpt-oss; engine/forward/attention_ref.h on the CPU).
// Tiled over keys (flash attention: memory O(tile)); the decode case
// (n_tokens 1) splits long contexts over workgroups. Keys outside every
// query's window are never read (decode cost O(window)). k_cache and v_cache
// may be the same rows (latent attention: the values are the keys).
// Split-K partials per q head (times tokens); <= MAX_SPLIT of attn_split_reduce.comp.
constexpr uint32_t kMaxAttentionSplits = 64;
struct AttentionArgs {
  BufferRange q, k_cache, v_cache, o;
  uint32_t q_stride = 0, o_stride = 0;  // floats between tokens
  uint32_t n_tokens = 0, pos0 = 0, head_dim = 0, n_head = 0, n_head_kv = 0;
  float scale = 1.f;
  KvType kv_type = KvType::F16;
  BufferRange scratch;  // for split-K partials: attention_scratch_bytes(...)
  BufferRange sinks;    // f32 per q head (n_head values); empty: no sinks
  uint32_t window = 0;  // sliding window in positions; 0: all keys
  uint32_t max_shared_bytes = 0;  // tiles' shared-memory cap (tests); 0: the device's
  // One token over an F16 cache: one subgroup per query row where the device's
  // subgroups have 8, 16 or 32 lanes with arithmetic (VKMOE_ATTN_SUBGROUP_ROWS=0:
  // never); false (tests) keeps the shared-memory softmax.
  bool subgroup_rows = true;
  // Zeroed uints from counter_index on (left zero), one per (kv head, row
  // block): with them the last workgroup of a split to finish combines the
  // partials instead of a second dispatch after a barrier. The second
  // dispatch runs where fewer counters follow counter_index, where the
  // split's (max, sum) pairs would not fit the tiles' shared memory, and
  // with VKMOE_ATTN_SPLIT_TAIL=0.
  BufferRange counters;
  uint32_t counter_index = 0;
  // Set only where attention_folds_rope_store(ctx, *this, *rope): q, k and v
  // as the projections left them; the kernel also does record_rope_store's
  // work (no dispatch and barrier before it). Null: q and the caches are ready.
  const RopeStoreArgs* rope = nullptr;
  // o rows in f16 (o_stride in halfs): only where attention_uses_coopmat, for
  // an output projection on f16 rows.
  bool o_f16 = false;
  // One token without sinks: where the keys split, the partials stay in
  // scratch for the caller to combine (AttentionRecord::splits_left; the fused
  // MoE block's first step, vk_moe_fused.h) and o is not written: no split
  // tail, no reduce dispatch.
  bool leave_splits = false;
  // Where set with rope (the one-token path; a device clock needed): every
  // workgroup stamps its AttnClock edges (uint64) at clocks[clock_base +
  // workgroup * kAttnClockSlots + slot], workgroup = (kv head * splits +
  // split) * row blocks + row block, at most kAttnClockWorkgroups of them.
  BufferRange clocks;
  uint32_t clock_base = 0;
  // Chained decode layers (with rope; counters bound): wait_counter != 0:
  // q, k and v come from the dispatch recorded just before, without a barrier
  // between; the kernel waits until counters[wait_counter - 1] reaches
  // wait_value (raised by that dispatch once they are written). Where the
  // recording is more than one dispatch (a split reduce) a barrier is recorded
  // before it instead. done_counter != 0, where the recording is one
  // dispatch: each workgroup ends by adding 1 to counters[done_counter - 1]
  // (AttentionRecord::counted_workgroups), and no barrier need follow for a
  // dispatch that waits for that count; with done_only_split, only where the
  // keys split over workgroups.
  uint32_t wait_counter = 0, wait_value = 0, done_counter = 0;
  bool done_only_split = false;
  bool poll_loads = true;  // the wait polls by loads, else by atomics (VKMOE_CHAIN_POLL=atomics)
};
// The edges the _clock attention kernel stamps (shaders/attn_flash.comp's
// CLK_*): its start, the end of its wait for its inputs (chained only), the
// end of the rope prologue, of the key loop, of the output or partial stores,
// the split tail's count (split only) and its end.
enum class AttnClock : uint32_t { Start, Waited, Prologue, Tiles, Stored, Counted, End, Count };
constexpr uint32_t kAttnClockSlots = 8, kAttnClockWorkgroups = 2048;
const char* attn_clock_name(AttnClock c);
// Whether record_attention can do rs's norm, rotation and cache store itself:
// one token over an F16 cache with values (not latent), the flash kernel's
// query tile in shared memory, and VKMOE_ATTN_ROPE_FOLD not 0.
bool attention_folds_rope_store(const Context& ctx, const AttentionArgs& a, const RopeStoreArgs& rs);
uint64_t attention_scratch_bytes(uint32_t n_head, uint32_t head_dim, uint32_t n_ctx);
// Prompt ubatches that fill 64 workgroups of 64 or 128 query rows (e.g. 256
// tokens of 32 query heads) over an F16 cache with head_dim a multiple of 16
// up to 128 run a cooperative-matrix kernel where the device has f16 -> f32
// 16x16x16 fragments (VKMOE_ATTN_COOPMAT=0: never):
// q and the probabilities rounded to f16, f32 accumulation (relative error
// ~1e-3 against ~1e-6). Whether `a` takes it here (attention_coopmat.cpp):
bool attention_uses_coopmat(const Context& ctx, const AttentionArgs& a);
// How record_attention recorded `a`: keys split over this many workgroups,
// combined by the kernel's split tail or by the reduce dispatch.
struct AttentionRecord {
  uint32_t splits = 1;
  bool split_tail = false;
  // leave_splits took effect: per (token, q head) row r = t * n_head + h its
  // splits' unnormalized outputs at scratch floats (r * splits + s) * head_dim
  // and their (max base 2, sum) pairs at ml_off + 2 * (r * splits + s).
  bool splits_left = false;
  uint32_t ml_off = 0;
  bool rope_folded = false;
  bool subgroup_rows = false;  // the subgroup-row shape (the kernel falls back where subgroups differ at run time)
  bool waited = false;              // wait_counter took effect (no barrier before)
  uint32_t counted_workgroups = 0;  // done_counter took effect: its workgroups, each adding 1
};
AttentionRecord record_attention(Recorder& rec, const AttentionArgs& a);

}  // namespace vkmoe::vk
