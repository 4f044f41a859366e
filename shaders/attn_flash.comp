#version 450
// Flash attention over a KV cache (causal, grouped-query). A workgroup owns BR
// query rows of one kv head g (row r = token r / G, q head g*G + r % G) and
// streams BC-key tiles of K and V through shared memory with an online
// softmax (base 2: q is pre-scaled by scale * log2(e)); f32 accumulation.
// Sliding window (window > 0): the query at position p sees keys j with
// p - window < j <= p; a workgroup starts at its first row's first key.
// Split-K (n_split > 1): workgroup y covers keys kv_start + [y*kv_len, (y+1)*kv_len)
// and writes unnormalized partial outputs with their max and sum to `part`
// for attn_split_reduce.comp (which then adds the sinks), or with tail_counter
// the last split to finish combines them (combine_splits). Sinks (has_sinks):
// one logit per q head counted in the max and the denominator.
// Q_SHARED false (large head_dim, where q tiles would not fit in shared
// memory): query rows are read from q directly in the score loop.
// kv_same: the caches are one buffer (latent attention): the key tile is
// also the value tile (KV_F16: the same words stored in both).
// ROPE_IN (one token, F16 caches, Q_SHARED): q and the new position's k and v
// come as the projections left them; each workgroup norms and rotates its q
// rows, the split holding the new position also its key, as
// attn_rope_store.comp does (that dispatch and its barrier are saved), uses
// the new key and value from shared memory and stores them into the caches.
// KV_F16: caches hold f16 pairs packed in uints; the key and value tiles keep
// them packed (one array, the value tile second), both stored at the top of a tile.
// SUBGROUP_ROWS (one token, KV_F16; host's shape: BR subgroups of BC lanes):
// subgroup r owns query row r, lane j key j of the scores and vec4 columns
// j + c*BC of the output, so the softmax stays in registers and a tile needs
// two workgroup barriers. Where the pipeline's subgroups differ at run time,
// the shared-memory softmax runs instead.
// KV_Q8: int8 quadruples packed in uints and an f16 scale per 32 values
// (row layout in engine/vulkan/vk_attention.h), dequantized into the tiles.
// CLOCKS (with ROPE_IN, the _clock variant): invocation 0 of every workgroup
// stamps the device clock at its steps' edges (vk_attention.h's AttnClock).
// Chained (ROPE_IN, wait_counter != 0): q, k and v come from the dispatch
// before without a barrier between; that dispatch's last workgroup raises
// counter[wait_counter - 1] to wait_value once they are written. A wait that
// gives up after 2^20 polls, or finds the counter past wait_value, leaves NaN
// outputs (the token fails loudly). done_counter != 0: every workgroup ends
// by adding 1 to counter[done_counter - 1], for a next dispatch that waits
// instead of a barrier.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : require
#if KV_F16
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#if CLOCKS
#extension GL_EXT_shader_realtime_clock : require
#endif
#define WG 128
layout(local_size_x = WG) in;
layout(constant_id = 0) const uint D = 128;  // head_dim, multiple of 4 (8 for f16, 32 for q8)
layout(constant_id = 1) const uint BR = 32;  // query rows per workgroup
layout(constant_id = 2) const uint BC = 32;  // keys per tile
layout(constant_id = 3) const uint SR = 2;   // scores: rows per invocation
layout(constant_id = 4) const uint SK = 4;   // scores: keys per invocation
layout(constant_id = 5) const uint DT = 32;  // output: invocations along head_dim
layout(constant_id = 6) const uint NC = 1;   // output: vec4 columns per invocation
layout(constant_id = 7) const bool Q_SHARED = true;  // query tile in shared memory
layout(constant_id = 8) const bool SUBGROUP_ROWS = false;  // needs SR = SK = 1, DT = BC, BR * BC = WG
const uint D4 = D / 4, KT = BC / SK, RT = BR / SR, RG = WG / DT, OR = BR / RG, TPR = WG / BR;
const uint RS = D4 + 1;       // padded vec4 row stride of the q and kv tiles
const uint PS4 = BC / 4 + 1;  // padded vec4 row stride of the score tile
#if KV_F16
const uint LU = D / 8;  // uvec4 loads (8 halves) per cached head row
#define KV_T uvec4
#elif KV_Q8
const uint LU = D / 16;      // uvec4 loads (16 int8) per cached head row
const uint SU = (D + 63) / 64;  // uints of f16 scale pairs per cached head row
#define KV_T uvec4
#else
const uint LU = D4;
#define KV_T vec4
#endif
const uint NV = (BC * LU + WG - 1) / WG;  // value-tile loads per invocation
const float NEG = -1e30;                  // masked score / empty running max

#if ROPE_IN
#define IN_COHERENT coherent  // chained: written by a dispatch that may still run
// The decode kernel's loops over a tile's dims and keys are unrolled (the
// driver does not unroll by itself), so that its shared-memory reads go out
// ahead of their sums; elsewhere not (lavapipe compiles them for minutes).
#define TILE_UNROLL [[unroll]]
#else
#define IN_COHERENT
#define TILE_UNROLL
#endif
layout(std430, binding = 0) IN_COHERENT readonly buffer Q { vec4 q4[]; };
layout(std430, binding = 1) readonly buffer K { KV_T kc[]; };
layout(std430, binding = 2) readonly buffer V { KV_T vc[]; };
layout(std430, binding = 3) writeonly buffer O { vec4 o4[]; };
layout(std430, binding = 4) coherent buffer S { float part[]; };
layout(std430, binding = 4) coherent buffer S4 { vec4 part4[]; };  // the same partials by vec4 (the split tail)
layout(std430, binding = 5) readonly buffer Sinks { float sinks[]; };
layout(std430, binding = 6) buffer Counter { uint counter[]; };  // split tail (tail_counter != 0)
layout(std430, binding = 6) coherent volatile buffer CounterV { uint counter_v[]; };  // chained: polled by loads
layout(push_constant) uniform P {
  uint q_stride4, o_stride4;  // vec4s between tokens
  uint n_rows, group, pos0, n_head, kv_row_lu;  // kv_row_lu: loads between cache positions
  uint kv_len, n_split, ml_off;  // split-K: keys per split, offset of (max, sum) pairs in part
  float scale_log2;
  uint kv_scale_off;  // KV_Q8: first scale uint of a cache row
  uint kv_start, window, has_sinks;  // first key of split 0; sliding window (0: none); sinks bound
  uint kv_same;  // V is K (latent attention): the key tile serves as the value tile
  uint tail_counter;  // split-K: 0, or 1 + the first counter of the split tail
  uint neox, n_rot, norm;  // ROPE_IN: attn_rope_store.comp's rotation and norm
  float eps, freq_scale, ext_factor, theta_scale, mscale, corr0, corr1;
  uint clock_base;  // CLOCKS: this dispatch's first stamp
  uint wait_counter, wait_value, done_counter;  // chained (ROPE_IN): see above; 0: not
  uint poll_loads;  // chained: the inputs' counter polled by loads (else by atomics)
} p;

shared vec4 q_sh[Q_SHARED ? BR * RS : 1];
#if KV_F16
// The key tile, then the value tile (from VT), as the cache holds them: 4
// halves per vec4 column (half the shared-memory traffic of unpacked rows).
const uint VT = BC * RS;
shared uvec2 kv_sh[2 * VT];
vec4 tile_at(uint i) { return vec4(unpackHalf2x16(kv_sh[i].x), unpackHalf2x16(kv_sh[i].y)); }
vec4 value_at(uint i) { return tile_at(VT + i); }
// Both tiles as float scratch (the rope prologue, the split tail).
float scratch_at(uint i) { return uintBitsToFloat(kv_sh[i / 2][i % 2]); }
vec4 scratch4_at(uint i4) { return uintBitsToFloat(uvec4(kv_sh[2 * i4], kv_sh[2 * i4 + 1])); }
void set_scratch(uint i, float x) { kv_sh[i / 2][i % 2] = floatBitsToUint(x); }
void set_scratch4(uint i4, vec4 x) {
  kv_sh[2 * i4] = floatBitsToUint(x.xy);
  kv_sh[2 * i4 + 1] = floatBitsToUint(x.zw);
}
#else
shared vec4 kv_sh[BC * RS];  // key tile, then value tile
vec4 tile_at(uint i) { return kv_sh[i]; }
vec4 value_at(uint i) { return kv_sh[i]; }
float scratch_at(uint i) { return kv_sh[i / 4][i % 4]; }
vec4 scratch4_at(uint i4) { return kv_sh[i4]; }
void set_scratch(uint i, float x) { kv_sh[i / 4][i % 4] = x; }
void set_scratch4(uint i4, vec4 x) { kv_sh[i4] = x; }
#endif
shared vec4 p_sh[BR * PS4];  // scores, then probabilities
shared float red_max[WG], red_sum[WG];
shared float row_m[BR], row_l[BR], row_alpha[BR], row_m_new[BR];
shared bool tail_last;

#if ROPE_IN
#if !KV_F16
#error "ROPE_IN needs an F16 cache"
#endif
layout(std430, binding = 1) writeonly buffer KCW { uint kc_w[]; };  // the new position's row
layout(std430, binding = 2) writeonly buffer VCW { uint vc_w[]; };
// This token's k heads, not yet normed or rotated, and its v heads (chained:
// written by a dispatch that may still run).
layout(std430, binding = 7) coherent readonly buffer KN { vec4 k_new4[]; };
layout(std430, binding = 8) coherent readonly buffer VN { vec2 v_new2[]; };
layout(std430, binding = 9) readonly buffer QW { float qw[]; };     // q and k norm weights (norm != 0)
layout(std430, binding = 10) readonly buffer KW { float kw[]; };
shared uint kn_sh[D / 2], vn_sh[D / 2];  // the new key and value as the cache holds them
shared float rn_sh[BR + 1];              // inverse RMS of the q rows and the key row
shared vec2 cs_sh[D / 2];                // mscale * (cos, sin) of each rotated pair
#include "rope.glsl"
#endif

const uint CLK_START = 0, CLK_WAITED = 1, CLK_PROLOGUE = 2, CLK_TILES = 3, CLK_STORED = 4, CLK_COUNTED = 5,
           CLK_END = 6, CLK_SLOTS = 8;
#if CLOCKS
#if !ROPE_IN
#error "CLOCKS needs ROPE_IN (its bindings)"
#endif
layout(std430, binding = 11) writeonly buffer Stamps { uvec2 stamps[]; };
#endif
// Invocation 0 stamps the device clock into slot `slot` (CLOCKS only).
void stamp(uint slot) {
#if CLOCKS
  if (gl_LocalInvocationID.x == 0) {
    const uint wg = (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    stamps[p.clock_base + wg * CLK_SLOTS + slot] = clockRealtime2x32EXT();
  }
#endif
}

#include "attn_common.glsl"
uint first_key(uint pos) { return first_key(pos, p.window); }

#if KV_Q8
// The scale of load u of kv head g at cache position pos (block u / 2).
uint scale_at(uint pos, uint g, uint u) { return pos * p.kv_row_lu * 4 + p.kv_scale_off + g * SU + u / 4; }
float half_of(uint w, uint u) { return unpackHalf2x16(w)[(u / 2) % 2]; }
#define K_SCALE(pos, u) half_of(kc[scale_at(pos, g, u) / 4][scale_at(pos, g, u) % 4], u)
#define V_SCALE(pos, u) half_of(vc[scale_at(pos, g, u) / 4][scale_at(pos, g, u) % 4], u)
#else
#define K_SCALE(pos, u) 1.0
#define V_SCALE(pos, u) 1.0
#endif

#if KV_F16
// One cache load (8 halves) into the two vec4 columns from tile index at.
void put_halves(uint at, uvec4 w) {
  kv_sh[at] = w.xy;
  kv_sh[at + 1] = w.zw;
}
void store_value(uint j, uint u, uvec4 w) { put_halves(VT + j * RS + 2 * u, w); }
#endif
// Unpacks one cache load (scale sc: KV_Q8 only) into vec4s of the tile row.
void store_tile(uint j, uint u, KV_T w, float sc) {
#if KV_F16
  put_halves(j * RS + 2 * u, w);
#elif KV_Q8
  [[unroll]] for (uint e = 0; e < 4; ++e) {
    const int x = int(w[e]);
    kv_sh[j * RS + 4 * u + e] =
        vec4(bitfieldExtract(x, 0, 8), bitfieldExtract(x, 8, 8), bitfieldExtract(x, 16, 8), bitfieldExtract(x, 24, 8)) * sc;
  }
#else
  kv_sh[j * RS + u] = w;
#endif
}

// Key tile rows [tile0, tile0 + BC) of kv head g as this invocation stores
// them (zeros past kv_hi).
void load_keys(uint tile0, uint kv_hi, uint g, out KV_T kr[NV], out float ks[NV]) {
  [[unroll]] for (uint n = 0; n < NV; ++n) {
    const uint i = gl_LocalInvocationID.x + n * WG, j = i / LU, u = i % LU;
    const bool ok = i < BC * LU && tile0 + j < kv_hi;
    kr[n] = ok ? kc[(tile0 + j) * p.kv_row_lu + g * LU + u] : KV_T(0);
    ks[n] = ok ? K_SCALE(tile0 + j, u) : 0.0;
  }
}

// Value tile rows [tile0, tile0 + BC) of kv head g as this invocation stores
// them (zeros past kv_hi; nothing to load where the key tile is the value tile).
void load_values(uint tile0, uint kv_hi, uint g, out KV_T vr[NV], out float vs[NV]) {
  [[unroll]] for (uint n = 0; n < NV; ++n) {
    const uint i = gl_LocalInvocationID.x + n * WG, j = i / LU, u = i % LU;
    const bool ok = p.kv_same == 0 && i < BC * LU && tile0 + j < kv_hi;
    vr[n] = ok ? vc[(tile0 + j) * p.kv_row_lu + g * LU + u] : KV_T(0);
    vs[n] = ok ? V_SCALE(tile0 + j, u) : 0.0;
  }
}

#if ROPE_IN
// Element e of prologue row r before the norm: q rows 0..BR-1 (q_sh), the key BR (the key tile as scratch).
float raw_at(uint r, uint e) { return r < BR ? q_sh[r * RS + e / 4][e % 4] : scratch_at(e); }
float normed_at(uint r, uint e) {
  const float x = raw_at(r, e);
  return p.norm != 0 ? x * (rn_sh[r] * (r < BR ? qw[e] : kw[e])) : x;
}
// Rotation unit m < D/2 of a row: the elements (a, b) of rotated pair m, or
// two elements past n_rot (normed only); cs: mscale * (cos, sin) or (1, 0).
void rope_unit(uint m, out uint a, out uint b, out vec2 cs) {
  cs = rope_unit_pair(m, p.n_rot, p.neox != 0, a, b) ? cs_sh[m] : vec2(1, 0);
}
// Unit m of row r normed and rotated (attn_rope_store.comp's operations).
vec2 rotated_unit(uint r, uint m, out uint a, out uint b) {
  vec2 cs;
  rope_unit(m, a, b, cs);
  const float x0 = normed_at(r, a), x1 = normed_at(r, b);
  return vec2(x0 * cs.x - x1 * cs.y, x0 * cs.y + x1 * cs.x);
}
// Element e of the key normed and rotated.
float rotated_key(uint e) {
  const uint m = rope_unit_of(e, p.n_rot, p.neox != 0);
  uint a, b;
  const vec2 y = rotated_unit(BR, m, a, b);
  return e == a ? y.x : y.y;
}

// mscale * (cos, sin) of the rotated pairs at the token's position into
// cs_sh (visible after the prologue's first barrier).
void rope_table() {
  for (uint i = gl_LocalInvocationID.x; i < p.n_rot / 2; i += WG) cs_sh[i] = cos_sin(angle(float(p.pos0), i)) * p.mscale;
}

// One token: the workgroup's q rows normed, rotated and scaled in q_sh (each
// invocation rewrites the two elements of its units) and, where it holds the
// new position (has_new), that key and value into kn_sh / vn_sh, stored into
// the caches by one workgroup (store_new).
void rope_prologue(uint r0, uint g, bool has_new, bool store_new) {
  const uint tid = gl_LocalInvocationID.x, G = p.group, cache_row = p.pos0 * p.kv_row_lu * 4 + g * (D / 2);
  for (uint i = tid; i < BR * D4; i += WG) {
    const uint r = i / D4, c = i % D4, row = r0 + r;
    q_sh[r * RS + c] = row < p.n_rows ? q4[(g * G + row) * D4 + c] : vec4(0);
  }
  if (has_new) {
    for (uint c = tid; c < D4; c += WG) set_scratch4(c, k_new4[g * D4 + c]);
    for (uint i = tid; i < D / 2; i += WG) {
      const uint w = packHalf2x16(v_new2[g * (D / 2) + i]);
      vn_sh[i] = w;
      if (store_new) vc_w[cache_row + i] = w;
    }
  }
  barrier();
  // Each row's sum of squares by one subgroup (not one invocation's chain of D4 loads).
  for (uint r = gl_SubgroupID; r <= BR; r += gl_NumSubgroups) {
    float ss = 0.0;
    for (uint c = gl_SubgroupInvocationID; c < D4; c += gl_SubgroupSize) {
      const vec4 x = r < BR ? q_sh[r * RS + c] : scratch4_at(c);
      ss += dot(x, x);
    }
    ss = subgroupAdd(ss);
    if (subgroupElect()) rn_sh[r] = inversesqrt(ss / float(D) + p.eps);
  }
  barrier();
  const uint NR = has_new ? BR + 1 : BR;
  for (uint j = tid; j < NR * (D / 2); j += WG) {
    const uint r = j / (D / 2), m = j % (D / 2);
    uint a, b;
    if (r < BR) {
      const vec2 y = rotated_unit(r, m, a, b) * p.scale_log2;
      q_sh[r * RS + a / 4][a % 4] = y.x;
      q_sh[r * RS + b / 4][b % 4] = y.y;
    } else {
      const uint w = packHalf2x16(vec2(rotated_key(2 * m), rotated_key(2 * m + 1)));  // as the cache pairs them
      kn_sh[m] = w;
      if (store_new) kc_w[cache_row + m] = w;
    }
  }
  // The tiles' first barrier makes q_sh and kn_sh visible.
}
// A tile load u of cache row pos, the new position's from shared memory.
KV_T new_row_word(bool is_key, uint u) {
  return is_key ? uvec4(kn_sh[4 * u], kn_sh[4 * u + 1], kn_sh[4 * u + 2], kn_sh[4 * u + 3])
                : uvec4(vn_sh[4 * u], vn_sh[4 * u + 1], vn_sh[4 * u + 2], vn_sh[4 * u + 3]);
}
#endif

float outputs_scale();
// Split tail: the last of the splits of this (kv head g, row block) to finish
// (counted on counter[tail_counter - 1 + ...], left at 0 again) combines their
// partials into o as attn_split_reduce.comp would (sinks added once), saving
// that dispatch and the barrier before it. Every step is spread over the
// workgroup: the (max, sum) pairs of all rows and splits go to shared memory
// (the tiles as scratch: 2 * rows * n_split floats, checked by the host), each row's
// weights are reduced by its TPR invocations (one subgroup where they fit), and
// each output vec4 sums its splits eight loads at a time.
void combine_splits(uint r0, uint g) {
  const uint tid = gl_LocalInvocationID.x, G = p.group, n = p.n_split;
  memoryBarrierBuffer();
  barrier();
  if (tid == 0) {
    const uint c = p.tail_counter - 1 + g * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    tail_last = atomicAdd(counter[c], 1u) == n - 1;
    if (tail_last) counter[c] = 0u;
  }
  barrier();
  stamp(CLK_COUNTED);
  if (!tail_last) return;
  memoryBarrierBuffer();
  const uint rows = min(BR, p.n_rows - r0), RN = rows * n;
  // Partial row (r, s): (t * n_head + h) * n + s with t, h those of row r0 + r.
  for (uint i = tid; i < rows * n; i += WG) {
    const uint row = r0 + i / n, pr = ((row / G) * p.n_head + g * G + row % G) * n + i % n;
    set_scratch(i, part[p.ml_off + 2 * pr]);
    set_scratch(RN + i, part[p.ml_off + 2 * pr + 1]);
  }
  barrier();
  // Each row's weights are reduced by TPR invocations: where those are one
  // subgroup (subgroup r, row r), in registers; otherwise through shared memory.
#if KV_F16
  const bool sg_reduce = gl_SubgroupSize == TPR && gl_NumSubgroups == BR;
#else
  const bool sg_reduce = false;
#endif
  const uint sr = sg_reduce ? gl_SubgroupID : tid / TPR, sub = sg_reduce ? gl_SubgroupInvocationID : tid % TPR;
  const bool row_ok = sr < rows;
  const float sk = p.has_sinks != 0 && row_ok ? sinks[g * G + (r0 + sr) % G] * 1.4426950408889634 : NEG;
  float mx = NEG;
  if (row_ok)
    for (uint s = sub; s < n; s += TPR) mx = max(mx, scratch_at(sr * n + s));
  float m = sk;
  if (sg_reduce) {
#if KV_F16
    m = max(m, subgroupMax(mx));
#endif
  } else {
    red_max[tid] = mx;
    barrier();
    for (uint i = 0; i < TPR; ++i) m = max(m, red_max[sr * TPR + i]);
  }
  float l = 0.0;
  if (row_ok)
    for (uint s = sub; s < n; s += TPR) {
      const uint i = sr * n + s;
      const float w = exp2(scratch_at(i) - m);
      l += w * scratch_at(RN + i);
      set_scratch(i, w);  // the max becomes the split's weight
    }
  float sum = p.has_sinks != 0 ? exp2(sk - m) : 0.0;
  if (sg_reduce) {
#if KV_F16
    sum += subgroupAdd(l);
#endif
  } else {
    red_sum[tid] = l;
    barrier();
    if (sub == 0)
      for (uint i = 0; i < TPR; ++i) sum += red_sum[tid + i];
  }
  if (sub == 0 && row_ok) row_l[sr] = 1.0 / sum;
  barrier();
  for (uint i = tid; i < rows * D4; i += WG) {
    const uint r = i / D4, c = i % D4, row = r0 + r, t = row / G, h = g * G + row % G;
    const uint first = (t * p.n_head + h) * n;
    vec4 a = vec4(0);
    for (uint s0 = 0; s0 < n; s0 += 8) {
      vec4 v[8];
      [[unroll]] for (uint k = 0; k < 8; ++k) v[k] = s0 + k < n ? part4[(first + s0 + k) * D4 + c] : vec4(0);
      [[unroll]] for (uint k = 0; k < 8; ++k)
        if (s0 + k < n) a += scratch_at(r * n + s0 + k) * v[k];
    }
    o4[t * p.o_stride4 + h * D4 + c] = a * (row_l[r] * outputs_scale());
  }
}

#if ROPE_IN
// Chained: 1.0, or NaN where the wait for the inputs gave up or found a stale count.
shared float inputs_ok;
void wait_for_inputs() {
  if (gl_LocalInvocationID.x == 0) {
    // Polls in rounds of 1024 (llvmpipe ends any one loop after 65535
    // iterations). Exactly wait_value: the dispatch after this one raises it
    // further only once this one is done; past it, it was left from an earlier token.
    uint v = 0;
    for (uint outer = 0; outer < 1024 && v < p.wait_value; ++outer)
      for (uint inner = 0; inner < 1024 && v < p.wait_value; ++inner)
        v = p.poll_loads != 0 ? counter_v[p.wait_counter - 1] : atomicAdd(counter[p.wait_counter - 1], 0u);
    inputs_ok = v == p.wait_value ? 1.0 : uintBitsToFloat(0x7fc00000u);
  }
  barrier();
  memoryBarrierBuffer();
}
#endif
float outputs_scale() {
#if ROPE_IN
  return p.wait_counter != 0 ? inputs_ok : 1.0;
#else
  return 1.0;
#endif
}

void main() {
  stamp(CLK_START);
  const uint tid = gl_LocalInvocationID.x, g = gl_WorkGroupID.z, split = gl_WorkGroupID.y;
  // Blocks of later tokens see more keys: start them first.
  const uint r0 = (gl_NumWorkGroups.x - 1 - gl_WorkGroupID.x) * BR;
  const uint G = p.group;
  const uint t_last = (min(r0 + BR, p.n_rows) - 1) / G;
  const uint split_lo = p.kv_start + split * p.kv_len, kv_hi = min(split_lo + p.kv_len, p.pos0 + t_last + 1);
  // Keys before the first row's window are skipped (later rows' windows start later).
  const uint kv_lo = max(split_lo, first_key(p.pos0 + r0 / G));

  // Key and value tiles run one tile ahead: the next tile's rows load into
  // registers as soon as this one's are stored, and arrive while it is worked
  // on. The first tile's go out before anything else: the cached rows do not
  // depend on the inputs (the new position's row comes from shared memory),
  // so with ROPE_IN they arrive during the wait and the rope prologue.
  KV_T kreg[NV], vreg[NV];
  float ksc[NV], vsc[NV];
  load_keys(kv_lo, kv_hi, g, kreg, ksc);
  load_values(kv_lo, kv_hi, g, vreg, vsc);
#if ROPE_IN
  rope_table();
  if (p.wait_counter != 0) {
    wait_for_inputs();
    stamp(CLK_WAITED);
  }
  const bool has_new = p.pos0 >= kv_lo && p.pos0 < kv_hi;
  rope_prologue(r0, g, has_new, has_new && r0 == 0);
  stamp(CLK_PROLOGUE);
#else
  if (Q_SHARED)
    for (uint i = tid; i < BR * D4; i += WG) {
      const uint r = i / D4, c = i % D4, row = r0 + r;
      vec4 x = vec4(0);
      if (row < p.n_rows) x = q4[(row / G) * p.q_stride4 + (g * G + row % G) * D4 + c] * p.scale_log2;
      q_sh[r * RS + c] = x;
    }
#endif
  if (tid < BR) {
    row_m[tid] = NEG;
    row_l[tid] = 0.0;
  }
  // Scores layout: keys kt + jj*KT of rows rt + i*RT. Output layout: vec4
  // columns cd + c*DT of rows rg + i*RG. Softmax layout: TPR invocations per
  // row. With subgroup rows: row = subgroup, key and column = lane.
#if KV_F16
  const bool sg_rows = SUBGROUP_ROWS && gl_NumSubgroups == BR && gl_SubgroupSize == BC;
#else
  const bool sg_rows = false;
#endif
  const uint lane = gl_SubgroupInvocationID, sg = gl_SubgroupID;
  const uint kt = sg_rows ? lane : tid % KT, rt = sg_rows ? sg : tid / KT;
  const uint cd = sg_rows ? lane : tid % DT, rg = sg_rows ? sg : tid / DT;
  const uint sm_row = tid / TPR, sm_sub = tid % TPR;
  float m_run = NEG, l_run = 0.0;  // subgroup rows: the row's running max and sum
  uint s_limit[SR], s_first[SR];  // last and first visible key of each scores row
  [[unroll]] for (uint i = 0; i < SR; ++i) {
    s_limit[i] = p.pos0 + min(r0 + rt + i * RT, p.n_rows - 1) / G;
    s_first[i] = first_key(s_limit[i]);
  }
  uint q_row[SR];  // Q_SHARED false: first vec4 of each scores row in q (rows past the end repeat the last)
  [[unroll]] for (uint i = 0; i < SR; ++i) {
    const uint row = min(r0 + rt + i * RT, p.n_rows - 1);
    q_row[i] = (row / G) * p.q_stride4 + (g * G + row % G) * D4;
  }
  vec4 acc[OR * NC];
  [[unroll]] for (uint i = 0; i < OR * NC; ++i) acc[i] = vec4(0);

  for (uint tile0 = kv_lo; tile0 < kv_hi; tile0 += BC) {
    const bool more = tile0 + BC < kv_hi;
    barrier();  // the previous tile's readers are done
    [[unroll]] for (uint n = 0; n < NV; ++n) {
      const uint i = tid + n * WG;
      if (i < BC * LU) {
#if ROPE_IN
        if (has_new && tile0 + i / LU == p.pos0) {
          kreg[n] = new_row_word(true, i % LU);
          vreg[n] = new_row_word(false, i % LU);
        }
#endif
        store_tile(i / LU, i % LU, kreg[n], ksc[n]);
#if KV_F16
        store_value(i / LU, i % LU, p.kv_same != 0 ? kreg[n] : vreg[n]);
#endif
      }
    }
#if KV_F16
    if (more) load_values(tile0 + BC, kv_hi, g, vreg, vsc);
#endif
    if (more) load_keys(tile0 + BC, kv_hi, g, kreg, ksc);
    barrier();
    // Scores as four running sums each (a vec4's lanes), summed at the end:
    // chains a quarter as long.
    vec4 s4[SR * SK];
    [[unroll]] for (uint i = 0; i < SR * SK; ++i) s4[i] = vec4(0);
    TILE_UNROLL for (uint c = 0; c < D4; ++c) {
      vec4 qv[SR];
      [[unroll]] for (uint i = 0; i < SR; ++i)
        qv[i] = Q_SHARED ? q_sh[(rt + i * RT) * RS + c] : q4[q_row[i] + c] * p.scale_log2;
      [[unroll]] for (uint jj = 0; jj < SK; ++jj) {
        const vec4 kv = tile_at((kt + jj * KT) * RS + c);
        [[unroll]] for (uint i = 0; i < SR; ++i) s4[i * SK + jj] += qv[i] * kv;
      }
    }
    float s[SR * SK];
    [[unroll]] for (uint i = 0; i < SR * SK; ++i) s[i] = (s4[i].x + s4[i].y) + (s4[i].z + s4[i].w);
    if (sg_rows) {
#if KV_F16
      const bool ok = tile0 + kt <= s_limit[0] && tile0 + kt >= s_first[0] && tile0 + kt < kv_hi;
      const float m_new = max(m_run, subgroupMax(ok ? s[0] : NEG));
      const float e = ok ? exp2(s[0] - m_new) : 0.0;
      const float alpha = exp2(m_run - m_new);
      l_run = l_run * alpha + subgroupAdd(e);
      m_run = m_new;
      p_sh[rt * PS4 + kt / 4][kt % 4] = e;
      [[unroll]] for (uint c = 0; c < NC; ++c) acc[c] *= alpha;
      subgroupMemoryBarrierShared();  // the row's probabilities, for its own output loop
      subgroupBarrier();
#endif
    } else {
      [[unroll]] for (uint i = 0; i < SR; ++i)
        [[unroll]] for (uint jj = 0; jj < SK; ++jj) {
          const uint key = kt + jj * KT;
          const bool ok = tile0 + key <= s_limit[i] && tile0 + key >= s_first[i] && tile0 + key < kv_hi;
          p_sh[(rt + i * RT) * PS4 + key / 4][key % 4] = ok ? s[i * SK + jj] : NEG;
        }
      barrier();
#if !KV_F16
      if (p.kv_same == 0) {  // the value tile replaces the key tile
        [[unroll]] for (uint n = 0; n < NV; ++n) {
          const uint i = tid + n * WG;
          if (i < BC * LU) store_tile(i / LU, i % LU, vreg[n], vsc[n]);
        }
        if (more) load_values(tile0 + BC, kv_hi, g, vreg, vsc);
      }
#endif
      float mx = NEG;
      for (uint key = sm_sub; key < BC; key += TPR) mx = max(mx, p_sh[sm_row * PS4 + key / 4][key % 4]);
      red_max[tid] = mx;
      barrier();
      const float m_old = row_m[sm_row];
      float m_new = m_old;
      for (uint i = 0; i < TPR; ++i) m_new = max(m_new, red_max[sm_row * TPR + i]);
      float sum = 0.0;
      for (uint key = sm_sub; key < BC; key += TPR) {
        const float sc = p_sh[sm_row * PS4 + key / 4][key % 4];
        const float e = sc > 0.5 * NEG ? exp2(sc - m_new) : 0.0;
        p_sh[sm_row * PS4 + key / 4][key % 4] = e;
        sum += e;
      }
      red_sum[tid] = sum;
      if (sm_sub == 0) {
        row_alpha[sm_row] = exp2(m_old - m_new);
        row_m_new[sm_row] = m_new;
      }
      barrier();
      if (tid < BR) {
        float l = 0.0;
        for (uint i = 0; i < TPR; ++i) l += red_sum[tid * TPR + i];
        row_l[tid] = row_l[tid] * row_alpha[tid] + l;
        row_m[tid] = row_m_new[tid];
      }
      [[unroll]] for (uint i = 0; i < OR; ++i) {
        const float a = row_alpha[rg + i * RG];
        [[unroll]] for (uint c = 0; c < NC; ++c) acc[i * NC + c] *= a;
      }
    }
    TILE_UNROLL for (uint j4 = 0; j4 < BC / 4; ++j4) {
      vec4 pr[OR];
      [[unroll]] for (uint i = 0; i < OR; ++i) pr[i] = p_sh[(rg + i * RG) * PS4 + j4];
      [[unroll]] for (uint jj = 0; jj < 4; ++jj)
        [[unroll]] for (uint c = 0; c < NC; ++c) {
          const uint col = cd + c * DT;
          if (D4 % DT == 0 || col < D4) {
            const vec4 vv = value_at((j4 * 4 + jj) * RS + col);
            [[unroll]] for (uint i = 0; i < OR; ++i) acc[i * NC + c] += pr[i][jj] * vv;
          }
        }
    }
  }
  stamp(CLK_TILES);
  if (sg_rows && lane == 0) {
    row_m[rt] = m_run;
    row_l[rt] = l_run;
  }
  barrier();
  const float ok = outputs_scale();
  [[unroll]] for (uint i = 0; i < OR; ++i) {
    const uint r = rg + i * RG, row = r0 + r;
    if (row >= p.n_rows) continue;
    const uint t = row / G, h = g * G + row % G;
    if (p.n_split == 1) {
      float inv = 1.0 / row_l[r];
      if (p.has_sinks != 0) inv = inv_sum_with_sink(row_l[r], row_m[r], sinks[h]);
      [[unroll]] for (uint c = 0; c < NC; ++c) {
        const uint col = cd + c * DT;
        if (col < D4) o4[t * p.o_stride4 + h * D4 + col] = acc[i * NC + c] * inv * ok;
      }
    } else {
      const uint pr = (t * p.n_head + h) * p.n_split + split;
      [[unroll]] for (uint c = 0; c < NC; ++c) {
        const uint col = cd + c * DT;
        if (col < D4)
          for (uint e = 0; e < 4; ++e) part[pr * D + col * 4 + e] = acc[i * NC + c][e] * ok;
      }
      if (cd == 0) {
        part[p.ml_off + 2 * pr] = row_m[r] * ok;
        part[p.ml_off + 2 * pr + 1] = row_l[r] * ok;
      }
    }
  }
  stamp(CLK_STORED);
  if (p.n_split > 1 && p.tail_counter != 0) combine_splits(r0, g);
  if (p.done_counter != 0) {
    memoryBarrierBuffer();
    barrier();
    if (tid == 0) atomicAdd(counter[p.done_counter - 1], 1u);
  }
  stamp(CLK_END);
}
