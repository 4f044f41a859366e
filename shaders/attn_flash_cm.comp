#version 450
// Flash attention of a prompt ubatch with GL_KHR_cooperative_matrix (f16
// inputs, f32 accumulation) over an F16 KV cache: causal, grouped-query,
// optional sliding window and sinks (the semantics of attn_flash.comp, which
// serves every other case). A workgroup owns BR = 16 * NSG query rows of one
// kv head g (row r: token r / group, q head g * group + r % group), 16 per
// subgroup, and streams BC-key tiles of K (and V) through shared memory.
// Two passes instead of a running rescale (the accumulators' elements cannot
// be addressed by row): pass 1 finds each row's maximum score, pass 2
// accumulates O += P V with P = exp2(s - max) <= 1 rounded to f16, and its
// row sums. q is pre-scaled by scale * log2(e) and rounded to f16.
// ONE_PASS: one pass over the keys instead, each row's reference maximum m
// raised only when a tile's scores pass it by more than RAISE (log2 units), so
// that P = exp2(s - m) <= 2^RAISE stays well inside f16; a raise rescales l
// and the accumulators (stored, scaled by row, loaded back through the
// subgroup's score area).
// O_F16: O rows are written as f16 (o_stride4 in f16vec4s), the input of an
// output projection on f16 rows.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;              // NSG * SG
layout(constant_id = 1) const uint D = 128;  // head_dim: multiple of 16, at most 128
layout(constant_id = 2) const uint NSG = 2;  // subgroups, 16 query rows each
layout(constant_id = 3) const uint SG = 32;  // subgroup size: 32 or 64
const uint BR = 16 * NSG, BC = 32, WG = NSG * SG;  // BC: kKeys of attention_coopmat.cpp
const uint ND = D / 16;              // 16-wide fragments along head_dim (<= 8)
const uint KS4 = (D + 8) / 4;        // f16vec4 per staged q/k/v row (padded)
const uint SS = BC + 4;              // floats per score row
const uint PS4 = (BC + 8) / 4;       // f16vec4 per probability row
const uint LPR = SG / 16;            // lanes per row (softmax)
const uint KPL = BC / LPR;           // keys per lane
const float NEG = -1e30;

layout(std430, binding = 0) readonly buffer Q { vec4 q4[]; };
layout(std430, binding = 1) readonly buffer K { uvec4 kc[]; };  // 8 halves
layout(std430, binding = 2) readonly buffer V { uvec4 vc[]; };
#ifdef O_F16
layout(std430, binding = 3) writeonly buffer O { f16vec4 o4[]; };
#define O_VEC f16vec4
#else
layout(std430, binding = 3) writeonly buffer O { vec4 o4[]; };
#define O_VEC vec4
#endif
layout(std430, binding = 4) readonly buffer Sinks { float sinks[]; };
layout(push_constant) uniform P {
  uint q_stride4, o_stride4;            // vec4s between tokens
  uint n_rows, group, pos0, kv_row8;    // kv_row8: uvec4s between cache positions
  float scale_log2;
  uint window, has_sinks;
} p;

// q rows (f16, at the start, 2 BC rows at a time), then the key tile and the value tile.
shared f16vec4 kv_sh[2 * BC * KS4];
shared float s_sh[NSG * 16 * SS];     // per subgroup: scores, then output fragments
shared f16vec4 p_sh[NSG * 16 * PS4];  // per subgroup: probabilities
shared float row_m[BR], row_l[BR];

#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
// Fragments as separate variables (NVIDIA keeps arrays of them in local memory).
#define EACH_D(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

#include "attn_common.glsl"
uint first_key(uint pos) { return first_key(pos, p.window); }

// Key tile (and with values the value tile after it) from position tile0; zeros past kv_hi.
void load_tile(uint tile0, uint kv_hi, uint g, bool values) {
  const uint LU = D / 8;
  for (uint i = gl_LocalInvocationID.x; i < BC * LU; i += WG) {
    const uint j = i / LU, u = i % LU, at = (tile0 + j) * p.kv_row8 + g * LU + u;
    const bool in_range = tile0 + j < kv_hi;
    const uvec4 w = in_range ? kc[at] : uvec4(0);
    kv_sh[j * KS4 + 2 * u] = f16vec4(unpackFloat2x16(w.x), unpackFloat2x16(w.y));
    kv_sh[j * KS4 + 2 * u + 1] = f16vec4(unpackFloat2x16(w.z), unpackFloat2x16(w.w));
    if (values) {
      const uvec4 x = in_range ? vc[at] : uvec4(0);
      kv_sh[(BC + j) * KS4 + 2 * u] = f16vec4(unpackFloat2x16(x.x), unpackFloat2x16(x.y));
      kv_sh[(BC + j) * KS4 + 2 * u + 1] = f16vec4(unpackFloat2x16(x.z), unpackFloat2x16(x.w));
    }
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x, g = gl_WorkGroupID.z;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  // Blocks of later tokens see more keys: start them first.
  const uint r0 = (gl_NumWorkGroups.x - 1 - gl_WorkGroupID.x) * BR;
  const uint G = p.group;
  const uint t_last = (min(r0 + BR, p.n_rows) - 1) / G;
  const uint kv_hi = p.pos0 + t_last + 1, kv_lo = first_key(p.pos0 + r0 / G);

  // This lane's softmax row (of its subgroup's 16) and keys.
  const uint lr = lane / LPR, k0 = (lane % LPR) * KPL;
  const uint my_row = min(r0 + sg * 16 + lr, p.n_rows - 1);
  const uint limit = p.pos0 + my_row / G, first = first_key(limit);

  // q rows as f16 through shared memory (2 BC rows at a time), then each
  // subgroup's 16 rows as A fragments.
  FRAG_A qf0, qf1, qf2, qf3, qf4, qf5, qf6, qf7;
#define LOAD_Q(i)                                                                                     \
  if (ND > i) coopMatLoad(qf##i, kv_sh, (sg * 16 - q0) * KS4 + i * 4, KS4, gl_CooperativeMatrixLayoutRowMajor);
  for (uint q0 = 0; q0 < BR; q0 += 2 * BC) {
    barrier();
    for (uint i = tid; i < min(BR - q0, 2 * BC) * (D / 4); i += WG) {
      const uint r = i / (D / 4), c = i % (D / 4), row = r0 + q0 + r;
      vec4 x = vec4(0);
      if (row < p.n_rows) x = q4[(row / G) * p.q_stride4 + (g * G + row % G) * (D / 4) + c] * p.scale_log2;
      kv_sh[r * KS4 + c] = f16vec4(x);
    }
    barrier();
    if (sg * 16 >= q0 && sg * 16 < q0 + 2 * BC) {
      EACH_D(LOAD_Q)
    }
  }

  const uint s_base = sg * 16 * SS;
  // Scores of the staged key tile: the subgroup's 16 rows x BC keys into s_sh.
#define SCORE_STEP(i)                                                                                   \
  if (ND > i) {                                                                                        \
    FRAG_B kb;                                                                                         \
    coopMatLoad(kb, kv_sh, i * 4, KS4, gl_CooperativeMatrixLayoutColumnMajor);                         \
    s0 = coopMatMulAdd(qf##i, kb, s0);                                                                 \
    coopMatLoad(kb, kv_sh, 16 * KS4 + i * 4, KS4, gl_CooperativeMatrixLayoutColumnMajor);              \
    s1 = coopMatMulAdd(qf##i, kb, s1);                                                                 \
  }
#define SCORES()                                                                              \
  {                                                                                           \
    ACC s0 = ACC(0.0), s1 = ACC(0.0);                                                         \
    EACH_D(SCORE_STEP)                                                                        \
    coopMatStore(s0, s_sh, s_base, SS, gl_CooperativeMatrixLayoutRowMajor);                   \
    coopMatStore(s1, s_sh, s_base + 16, SS, gl_CooperativeMatrixLayoutRowMajor);              \
    subgroupMemoryBarrierShared();                                                            \
    subgroupBarrier();                                                                        \
  }

  // The maximum of mx and this lane's scores of the tile's keys its row sees.
#define ROW_MAX(mx)                                                                             \
  for (uint j = 0; j < KPL; ++j) {                                                              \
    const uint key = tile0 + k0 + j;                                                            \
    if (key <= limit && key >= first && key < kv_hi) mx = max(mx, s_sh[s_base + lr * SS + k0 + j]); \
  }
  // P = exp2(s - m) of the scored tile, rounded to f16, into p_sh; its sum into l.
#define PROBS()                                                                                 \
  for (uint j = 0; j < KPL; j += 4) {                                                           \
    f16vec4 pv;                                                                                 \
    [[unroll]] for (uint e = 0; e < 4; ++e) {                                                   \
      const uint key = tile0 + k0 + j + e;                                                      \
      const bool ok = key <= limit && key >= first && key < kv_hi;                              \
      pv[e] = float16_t(ok ? exp2(s_sh[s_base + lr * SS + k0 + j + e] - m) : 0.0);              \
      l += float(pv[e]);                                                                        \
    }                                                                                           \
    p_sh[p_base + lr * PS4 + (k0 + j) / 4] = pv;                                                \
  }                                                                                             \
  subgroupMemoryBarrierShared();                                                                \
  subgroupBarrier();
  // O += P V over the tile's value rows, 16 keys (kk) at a time.
#define PV_STEP(i)                                                                                       \
  if (ND > i) {                                                                                         \
    FRAG_B vb;                                                                                          \
    coopMatLoad(vb, kv_sh, (BC + kk * 16) * KS4 + i * 4, KS4, gl_CooperativeMatrixLayoutRowMajor);       \
    oa##i = coopMatMulAdd(pf, vb, oa##i);                                                                 \
  }
#define PV_TILE()                                                                               \
  [[unroll]] for (uint kk = 0; kk < BC / 16; ++kk) {                                            \
    FRAG_A pf;                                                                                  \
    coopMatLoad(pf, p_sh, p_base + kk * 4, PS4, gl_CooperativeMatrixLayoutRowMajor);            \
    EACH_D(PV_STEP)                                                                             \
  }

#ifdef ONE_PASS
  const float RAISE = 8.0;
  ACC oa0 = ACC(0.0), oa1 = ACC(0.0), oa2 = ACC(0.0), oa3 = ACC(0.0), oa4 = ACC(0.0), oa5 = ACC(0.0),
      oa6 = ACC(0.0), oa7 = ACC(0.0);
  float m = NEG, l = 0.0;
  bool started = false;  // accumulators hold sums (else zeros, which need no rescale)
  const uint p_base = sg * 16 * PS4;
  // One accumulator fragment through the score area, each row times row_m[] (here the factors).
#define RESCALE_O(i)                                                                                     \
  if (ND > i) {                                                                                         \
    coopMatStore(oa##i, s_sh, s_base, SS, gl_CooperativeMatrixLayoutRowMajor);                           \
    subgroupMemoryBarrierShared();                                                                      \
    subgroupBarrier();                                                                                  \
    for (uint e = lane; e < 16 * 16; e += SG) s_sh[s_base + (e / 16) * SS + e % 16] *= row_m[sg * 16 + e / 16]; \
    subgroupMemoryBarrierShared();                                                                      \
    subgroupBarrier();                                                                                  \
    coopMatLoad(oa##i, s_sh, s_base, SS, gl_CooperativeMatrixLayoutRowMajor);                            \
    subgroupBarrier();                                                                                  \
  }
  for (uint tile0 = kv_lo; tile0 < kv_hi; tile0 += BC) {
    barrier();
    load_tile(tile0, kv_hi, g, true);
    barrier();
    SCORES()
    float mt = NEG;
    ROW_MAX(mt)
    for (uint w = 1; w < LPR; w *= 2) mt = max(mt, subgroupShuffleXor(mt, w));
    const bool raise = subgroupAny(mt > m + RAISE);
    if (raise) {
      const float mn = max(m, mt), f = exp2(m - mn);  // 0 while the row had no key
      m = mn;
      l *= f;
      if (lane % LPR == 0) row_m[sg * 16 + lr] = f;
    }
    PROBS()
    if (raise && started) {
      EACH_D(RESCALE_O)
    }
    started = true;
    PV_TILE()
    subgroupBarrier();
  }
#else
  // Pass 1: each row's maximum over the keys it sees.
  float m = NEG;
  for (uint tile0 = kv_lo; tile0 < kv_hi; tile0 += BC) {
    barrier();  // the q tile / previous tile's readers are done
    load_tile(tile0, kv_hi, g, false);
    barrier();
    SCORES()
    ROW_MAX(m)
    subgroupBarrier();
  }
  for (uint w = 1; w < LPR; w *= 2) m = max(m, subgroupShuffleXor(m, w));

  // Pass 2: O = sum of P V and l = sum of P, P rounded to f16.
  ACC oa0 = ACC(0.0), oa1 = ACC(0.0), oa2 = ACC(0.0), oa3 = ACC(0.0), oa4 = ACC(0.0), oa5 = ACC(0.0),
      oa6 = ACC(0.0), oa7 = ACC(0.0);
  float l = 0.0;
  const uint p_base = sg * 16 * PS4;
  for (uint tile0 = kv_lo; tile0 < kv_hi; tile0 += BC) {
    barrier();
    load_tile(tile0, kv_hi, g, true);
    barrier();
    SCORES()
    PROBS()
    PV_TILE()
    subgroupBarrier();
  }
#endif
  for (uint w = 1; w < LPR; w *= 2) l += subgroupShuffleXor(l, w);
  if (lane % LPR == 0) {
    row_m[sg * 16 + lr] = m;
    row_l[sg * 16 + lr] = l;
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();

  // Output: each fragment through the subgroup's score area, divided by l
  // (with sinks, the sink joins the max and the sum).
#define STORE_O(i)                                                                                      \
  if (ND > i) {                                                                                         \
    coopMatStore(oa##i, s_sh, s_base, SS, gl_CooperativeMatrixLayoutRowMajor);                           \
    subgroupMemoryBarrierShared();                                                                      \
    subgroupBarrier();                                                                                  \
    for (uint e = lane; e < 16 * 4; e += SG) {                                                          \
      const uint r = e / 4, c4 = e % 4, row = r0 + sg * 16 + r;                                         \
      if (row < p.n_rows) {                                                                             \
        const uint t = row / G, h = g * G + row % G;                                                    \
        const float inv = p.has_sinks != 0 ? inv_sum_with_sink(row_l[sg * 16 + r], row_m[sg * 16 + r], sinks[h]) \
                                           : 1.0 / row_l[sg * 16 + r];                                  \
        const uint so = s_base + r * SS + c4 * 4;                                                       \
        o4[t * p.o_stride4 + h * (D / 4) + i * 4 + c4] =                                                \
            O_VEC(vec4(s_sh[so], s_sh[so + 1], s_sh[so + 2], s_sh[so + 3]) * inv);                      \
      }                                                                                                 \
    }                                                                                                   \
    subgroupBarrier();                                                                                  \
  }
  EACH_D(STORE_O)
}
