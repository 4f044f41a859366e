// The output row of slot n of an expert-grouped product (INDEXED), -1 for a
// padding slot: the slot itself, or the slot's routing pair t*k + j where the
// product writes by pair (y_pair_off != 0: the MoE table's slot_pair words,
// GemmIdsArgs::y_by_pair). Needs `int table[]` and the push fields
// slot_token_off and y_pair_off.
int moe_y_row(uint n) {
  if (p.y_pair_off != 0) return table[p.y_pair_off + n];
  return table[p.slot_token_off + n] < 0 ? -1 : int(n);
}
