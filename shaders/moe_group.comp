#version 450
// Groups the (token, j) routing pairs by expert into a MoE table (layout in
// moe_table.glsl), in one workgroup: per-expert counts by shared atomics
// (the slot order within an expert is therefore arbitrary), an exclusive
// prefix sum of the counts padded to MOE_TILE_ROWS, then every pair's slot,
// every slot's token and pair (-1 for padding), every tile's expert (-1 past the
// used tiles, up to max_tiles) and the number of used tiles.
// Pairs with an id outside [0, n_expert) get MOE_NO_SLOT.
// The workgroup is as large as the device allows (a power of two, 256..1024):
// each loop over the pairs is a chain of dependent global loads per invocation.
#include "moe_table.glsl"
layout(local_size_x_id = 0) in;
#define WG gl_WorkGroupSize.x
layout(std430, binding = 0) restrict readonly buffer Ids { int ids[]; };
layout(std430, binding = 1) restrict buffer Table { uint moe_table[]; };
layout(push_constant) uniform P { MoeLayout lay; uint n_expert; } p;

shared uint cnt[1024];    // pairs per expert (n_expert <= 1024)
shared uint start[1024];  // first slot of each expert
shared uint scan[1024];

uint padded(uint c) { return (c + MOE_TILE_ROWS - 1u) / MOE_TILE_ROWS * MOE_TILE_ROWS; }

// The expert whose slot range holds slot s (s below the total slot count):
// the largest e with start[e] <= s, which has a non-empty range.
uint owner(uint s) {
  uint lo = 0, hi = p.n_expert - 1u;
  while (lo < hi) {
    const uint mid = (lo + hi + 1u) >> 1;
    if (start[mid] <= s) lo = mid; else hi = mid - 1u;
  }
  return lo;
}

void main() {
  const uint t = gl_LocalInvocationID.x, n = p.n_expert;
  const MoeLayout L = p.lay;
  const uint n_pairs = L.n_tokens * L.k, max_slots = moe_max_slots(L);
  for (uint e = t; e < n; e += WG) cnt[e] = 0u;
  barrier();

  // Rank of each pair within its expert, kept in its pair_slot word for now
  // (read back below by the same invocation).
  for (uint q = t; q < n_pairs; q += WG) {
    const int e = ids[q];
    moe_table[moe_pair_slot_idx(L, q)] = (e >= 0 && uint(e) < n) ? atomicAdd(cnt[e], 1u) : MOE_NO_SLOT;
  }
  barrier();

  // Exclusive prefix sum of the padded counts: thread t takes experts
  // [t*per, (t+1)*per), then an inclusive Hillis-Steele scan over threads.
  const uint per = (n + WG - 1u) / WG;
  uint local_sum = 0u;
  for (uint r = 0; r < per; ++r) {
    const uint e = t * per + r;
    if (e < n) local_sum += padded(cnt[e]);
  }
  scan[t] = local_sum;
  barrier();
  for (uint off = 1; off < WG; off <<= 1) {
    const uint add = t >= off ? scan[t - off] : 0u;
    barrier();
    scan[t] += add;
    barrier();
  }
  uint run = scan[t] - local_sum;
  for (uint r = 0; r < per; ++r) {
    const uint e = t * per + r;
    if (e < n) {
      start[e] = run;
      run += padded(cnt[e]);
    }
  }
  const uint total = scan[WG - 1u];
  barrier();
  const uint used = min(total / MOE_TILE_ROWS, L.max_tiles);  // the host sizes max_tiles so that no clamp happens

  for (uint q = t; q < n_pairs; q += WG) {
    const uint rank = moe_table[moe_pair_slot_idx(L, q)];
    if (rank == MOE_NO_SLOT) continue;
    const uint s = start[ids[q]] + rank;
    if (s < max_slots) {
      moe_table[moe_slot_token_idx(L, s)] = q / L.k;
      moe_table[moe_slot_pair_idx(L, s)] = q;
    }
    moe_table[moe_pair_slot_idx(L, q)] = s < max_slots ? s : MOE_NO_SLOT;
  }
  for (uint s = t; s < max_slots; s += WG) {
    bool pad = s >= total;
    if (!pad) {
      const uint e = owner(s);
      pad = s - start[e] >= cnt[e];
    }
    if (pad) {
      moe_table[moe_slot_token_idx(L, s)] = 0xffffffffu;  // int -1
      moe_table[moe_slot_pair_idx(L, s)] = 0xffffffffu;
    }
  }
  for (uint i = t; i < L.max_tiles; i += WG)
    moe_table[moe_tile_expert_idx(L, i)] = i < used ? owner(i * MOE_TILE_ROWS) : 0xffffffffu;
  if (t == 0u) moe_table[moe_count_idx(L)] = used;
}
