#pragma once
// The grouping of a ubatch's (token, k) routing pairs by expert, shared by the
// GPU grouping shader (shaders/moe_group.comp), the host-side builder used in
// offload modes, the expert-grouped GEMM and the combine kernel.
//
// Pairs are assigned "slots" so that every tile of kMoeTileRows consecutive
// slots belongs to one expert (each expert's slot count padded up to a
// multiple of kMoeTileRows). One buffer of 32-bit words holds:
//   [count_off]            number of tiles used
//   [tile_expert_off + i]  int32 expert of tile i (an index into the weight
//                          buffer: expert id, or a cache slot; -1 = skip)
//   [slot_token_off + s]   int32 token of slot s (-1 = padding)
//   [slot_pair_off + s]    int32 routing pair t*k + j of slot s (-1 = padding):
//                          the output row of products written by pair
//                          (GemmIdsArgs::y_by_pair), k rows per token
//   [pair_slot_off + t*k + j]  slot of pair (t, j); 0xffffffff = not on this
//                          GPU pass (e.g. computed on the CPU)
// Must match shaders/moe_table.glsl.
#include <algorithm>
#include <cstdint>

namespace vkmoe {

// 64: with 32 the expert-grouped GEMMs decode each weight for too few tokens
// (H100, Qwen3-30B-A3B shapes: pp512 +10%, pp2048 +15% in place despite the
// padding of ~32 routed tokens per expert at 512; PERF.md run 16).
constexpr uint32_t kMoeTileRows = 64;
constexpr uint32_t kMoeNoSlot = 0xffffffffu;

struct MoeTableLayout {
  uint32_t n_tokens = 0, k = 0, max_tiles = 0;
  uint32_t count_off = 0, tile_expert_off = 0, slot_token_off = 0, slot_pair_off = 0, pair_slot_off = 0, words = 0;

  // n_groups: how many distinct weight groups (experts or slots) a tile may name.
  static MoeTableLayout make(uint32_t n_tokens, uint32_t k, uint32_t n_groups) {
    MoeTableLayout l;
    l.n_tokens = n_tokens;
    l.k = k;
    const uint32_t pairs = n_tokens * k;
    l.max_tiles = (pairs + kMoeTileRows - 1) / kMoeTileRows + std::min(n_groups, pairs);
    l.count_off = 0;
    l.tile_expert_off = 4;  // keeps the arrays 16-byte aligned
    l.slot_token_off = l.tile_expert_off + (l.max_tiles + 3) / 4 * 4;
    l.slot_pair_off = l.slot_token_off + l.max_tiles * kMoeTileRows;
    l.pair_slot_off = l.slot_pair_off + l.max_tiles * kMoeTileRows;
    l.words = l.pair_slot_off + (pairs + 3) / 4 * 4;
    return l;
  }
  uint32_t max_slots() const { return max_tiles * kMoeTileRows; }
  uint32_t pairs() const { return n_tokens * k; }
  uint64_t bytes() const { return uint64_t(words) * 4; }
};

}  // namespace vkmoe
