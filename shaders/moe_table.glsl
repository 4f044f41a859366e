// MoE routing table layout, mirroring engine/vulkan/moe_table.h (keep in sync).
// MoeLayout has the fields of vkmoe::MoeTableLayout in the same order, so the
// C++ struct can be copied into a push-constant block as is. The *_idx
// functions give word indices into the table buffer.
const uint MOE_TILE_ROWS = 64u;
const uint MOE_NO_SLOT = 0xffffffffu;

struct MoeLayout {
  uint n_tokens, k, max_tiles;
  uint count_off, tile_expert_off, slot_token_off, slot_pair_off, pair_slot_off, words;
};

uint moe_count_idx(MoeLayout L) { return L.count_off; }
uint moe_tile_expert_idx(MoeLayout L, uint tile) { return L.tile_expert_off + tile; }
uint moe_slot_token_idx(MoeLayout L, uint slot) { return L.slot_token_off + slot; }
uint moe_slot_pair_idx(MoeLayout L, uint slot) { return L.slot_pair_off + slot; }
uint moe_pair_slot_idx(MoeLayout L, uint pair) { return L.pair_slot_off + pair; }  // pair = t*k + j
uint moe_max_slots(MoeLayout L) { return L.max_tiles * MOE_TILE_ROWS; }
