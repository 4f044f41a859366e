#version 450
// One decoded token's routed-MoE block in one dispatch whose `grid`
// workgroups wait for each other at grid barriers (the host launches no more
// workgroups than the device runs at once; see vk_moe_fused.h):
//   0. with wo: x += wo . att, the attention output projection, rows
//      spread over the grid.                                        | barrier
//   1. xn = rmsnorm(x) * ffn_norm, formed by every workgroup for itself; the
//      router's logits, rows spread over the grid's workgroups.     | barrier
//   2. the top-k of the logits in every workgroup (workgroup 0 writes ids
//      and weights); h[j] = act(gate_j . xn, up_j . xn) for the k experts,
//      rows spread over the grid.                                    | barrier
//   3. x[r] += sum_j w[j] down_j[r] . h[j], rows spread over the grid.
//   4. with wq: | barrier | xn = rmsnorm(x) * next_norm in every workgroup,
//      then the next layer's q = wq . xn, k = wk . xn, v = wv . xn, rows
//      spread over the grid.
// Before step 0, with att_splits > 1: att = the one-token attention's split-K
// partials combined (attn_flash.comp's layout, left by the attention for this
// step instead of its split tail), chunks of att spread over the grid; or
// with att_pos1 != 0 (step A): att = the one-token attention itself, from
// the q, k and v the dispatch before left (moe_fused_attention.glsl).
//                                                                   | barrier
// counter[counter] counts the grid barriers' arrivals and counter[counter +
// 1] finished workgroups; both start at zero (the host zeroes each dispatch's
// pair before it runs, as once a token for the decoded layers) and are left
// as they end, so no workgroup resets them on the way out. Only where a last
// workgroup has work does each count its end: with next_norm but without step
// 4 it writes xn = rmsnorm(x) * next_norm (the next layer's input); with
// qkv_ready it raises the chained attention's counter.
// A dispatch boundary between dependent steps costs several microseconds on
// a GPU; a grid barrier is one atomic round trip.
// Products on int8 activations as matvec_q8x.comp's (q8x_type.glsl): the
// input of each product is quantized per 32-element block in shared memory.
// Specialization: 0 = workgroup size (a power of 2, <= 512), 1 = XQ_WORDS (>=
// max(n_embd, k * n_ff, att_dim) / 4), 2 = XS4 (n_embd / 4), 3..8 = the
// sets of weight types of gate/up, down, wo, wq, wk, wv (bit c for type code
// c: 4 = Q8_0, 5 = Q4_K, 6 = Q5_K, 7 = Q6_K; bit 0 for wo, wq: a dispatch
// without step 0 or step 4; the push constant wtypes names this dispatch's,
// so that layers of different types share one pipeline), 9..12 = the lanes
// that share a row in the gate/up, down, wo and q/k/v products (powers of 2,
// <= subgroup size), 13 = XQ_SWIZZLE (1: xq's four entries of each 64-value
// group XQ_STRIDE entries apart, so that lanes reading consecutive groups read
// consecutive 16-byte words of shared memory; 0: a group's entries adjacent,
// 64 bytes a lane apart, a 4-way bank conflict), 14..27 = step A's attention
// (ATT_D = head_dim, 0: no step A; heads, q heads per kv head, rotated dims,
// neox, per-head q/k norms; base-2 score scale and the rope's floats, as
// attn_flash.comp's push constants; the subgroup size its q/k rotation and
// combine by subgroups expect, 0: not by subgroups). A lane group works on one
// row at a time, a lane on one unit of it at a time: more rows or units at
// once measured slower on an H200 (docs/PERF.md run 36; the driver reports
// 68-80 registers, so not spills), as did quantizing two or three vec4s an
// invocation at once (run 42), loading a step's first units ahead of its
// preamble (a warp's loads return in order; run 38) and touching the next
// q/k/v rows during the next norm (run 42).
// CLOCKS=1 (the _clock variant) stamps each workgroup's device clock at the
// steps' edges into `stamps` (slots: vk_moe_fused.h's FusedClock).
// Chained (att_wgs != 0): the attention before ran without a barrier between;
// every workgroup first waits until counter[att_done - 1] (its workgroups'
// count, summed over the token) reaches att_wgs. qkv_ready != 0: the last
// workgroup raises counter[qkv_ready - 1] to qkv_value once the next q/k/v
// are written, for an attention that waits instead of a barrier.
// A grid barrier that waits spin_limit polls gives up: it lowers first_bad to
// 1 and writes NaN into x, so the token fails loudly instead of silently; a
// wait that then finds first_bad at 1 gives up after 1024 polls (one loss,
// one timeout). So does an arrival that finds its barrier's count already
// reached (a counter the host did not zero).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_spirv_intrinsics : require
#if CLOCKS
#extension GL_EXT_shader_realtime_clock : require
#endif

// OpSDot (4450) on two int32 words of 4 packed signed bytes (format 0 = 4x8Bit).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4(int a, int b, spirv_literal int packed_format);

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint XQ_WORDS = 1536;
layout(constant_id = 2) const uint XS4 = 512;
layout(constant_id = 3) const uint GU_TS = 1u << 5;
layout(constant_id = 4) const uint DN_TS = 1u << 5;
layout(constant_id = 5) const uint O_TS = 1u;
layout(constant_id = 6) const uint Q_TS = 1u;
layout(constant_id = 7) const uint K_TS = 1u;
layout(constant_id = 8) const uint V_TS = 1u;
layout(constant_id = 9) const uint GU_LANES = 32;
layout(constant_id = 10) const uint DN_LANES = 32;
layout(constant_id = 11) const uint O_LANES = 32;
layout(constant_id = 12) const uint QKV_LANES = 32;
layout(constant_id = 13) const uint XQ_SWIZZLE = 0;
layout(constant_id = 14) const uint ATT_D = 0;
layout(constant_id = 15) const uint ATT_HEADS = 1;
layout(constant_id = 16) const uint ATT_GROUP = 1;
layout(constant_id = 17) const uint ATT_N_ROT = 0;
layout(constant_id = 18) const uint ATT_NEOX = 0;
layout(constant_id = 19) const uint ATT_NORM = 0;
layout(constant_id = 20) const float ATT_scale_log2 = 1.0;
layout(constant_id = 21) const float ATT_theta_scale = 1.0;
layout(constant_id = 22) const float ATT_freq_scale = 1.0;
layout(constant_id = 23) const float ATT_ext_factor = 0.0;
layout(constant_id = 24) const float ATT_mscale = 1.0;
layout(constant_id = 25) const float ATT_corr0 = 0.0;
layout(constant_id = 26) const float ATT_corr1 = 0.0;
layout(constant_id = 27) const uint ATT_SG = 0;  // step A by subgroups of this size (0: not)
// xq's 64-value groups, and the entries between a group's parts when
// swizzled (at least the groups; 4 mod 8, so that Q6_K's lane pairs, which
// read parts 2m and 2m + 1 of a group, fall 64 bytes apart).
const uint XQ_GROUPS = (XQ_WORDS + 15) / 16;
const uint XQ_STRIDE = XQ_GROUPS + (12 - XQ_GROUPS % 8) % 8;
const uint WG = gl_WorkGroupSize.x;

// A weight matrix's buffer as uvec4s (Q4_K, Q5_K) and as uints (Q8_0, Q6_K),
// named S_w4 and S_w1 as q8x_slot.glsl reads them.
#define WEIGHTS(b, S)                                                \
  layout(set = 0, binding = b) readonly buffer S##_B4 { uvec4 S##_w4[]; }; \
  layout(set = 0, binding = b) readonly buffer S##_B1 { uint S##_w1[]; };

layout(set = 0, binding = 0) coherent buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 0) coherent buffer X1 { float x1[]; };
layout(set = 0, binding = 1) readonly buffer NW { vec4 norm_w4[]; };
layout(set = 0, binding = 2) readonly buffer R { vec4 router4[]; };
WEIGHTS(3, g)
WEIGHTS(4, u)
WEIGHTS(5, d)
layout(set = 0, binding = 6) coherent buffer L { float logits[]; };
layout(set = 0, binding = 7) coherent buffer H4 { vec4 h4[]; };
layout(set = 0, binding = 7) coherent buffer H1 { float h1[]; };
layout(set = 0, binding = 8) writeonly buffer Ids { int ids_out[]; };
layout(set = 0, binding = 9) writeonly buffer Wts { float wts_out[]; };
layout(set = 0, binding = 10) coherent buffer C { uint counter[]; };
layout(set = 0, binding = 10) coherent volatile buffer CV { uint counter_v[]; };  // polled by loads
layout(set = 0, binding = 11) readonly buffer NNW { vec4 next_norm_w4[]; };
layout(set = 0, binding = 12) writeonly buffer XN { vec4 xn4[]; };
layout(set = 0, binding = 13) buffer F { uint first_bad; };
layout(set = 0, binding = 14) coherent buffer Att { vec4 att4[]; };
layout(set = 0, binding = 14) coherent buffer Att1 { float att1[]; };
WEIGHTS(15, o)
WEIGHTS(16, q)
WEIGHTS(17, k)
WEIGHTS(18, v)
layout(set = 0, binding = 19) writeonly buffer QO { float q_out[]; };
layout(set = 0, binding = 20) writeonly buffer KO { float k_out[]; };
layout(set = 0, binding = 21) writeonly buffer VO { float v_out[]; };
// Step A's inputs: this layer's q, k and v (in the next q/k/v's buffers,
// read before any workgroup passes step A's barrier).
layout(set = 0, binding = 19) readonly buffer QI { vec4 q_in4[]; };
layout(set = 0, binding = 20) readonly buffer KI { vec4 k_in4[]; };
layout(set = 0, binding = 21) readonly buffer VI { vec2 v_in2[]; };
layout(set = 0, binding = 19) readonly buffer QI1 { float q_in1[]; };
layout(set = 0, binding = 20) readonly buffer KI1 { float k_in1[]; };
layout(set = 0, binding = 22) coherent readonly buffer AttPart { float att_part[]; };
layout(set = 0, binding = 22) coherent readonly buffer AttPart4 { vec4 att_part4[]; };
// Step A's F16 caches ([position][kv head][head_dim] halves in pairs) and q/k norm weights.
layout(set = 0, binding = 23) buffer KC { uint kc_u[]; };
layout(set = 0, binding = 23) readonly buffer KC4 { uvec4 kc4[]; };
layout(set = 0, binding = 24) buffer VC { uint vc_u[]; };
layout(set = 0, binding = 24) readonly buffer VC4 { uvec4 vc4[]; };
layout(set = 0, binding = 25) readonly buffer QNW { float qn_w[]; };
layout(set = 0, binding = 26) readonly buffer KNW { float kn_w[]; };
#if CLOCKS
layout(set = 0, binding = 27) writeonly buffer Clk { uvec2 stamps[]; };
#endif

layout(push_constant) uniform Push {
  uint n_embd, n_ff, n_expert, k;
  float eps;
  uint check_in, check_out;  // non-finite sites of x on entry and on exit (0: no check)
  uint gu_stride, dn_stride;  // bytes from one expert's matrix to the next
  uint grid, counter, spin_limit;  // workgroups; counter[counter], [counter + 1]: zero before the dispatch
  uint topk_normalize, topk_gating;
  float topk_scale;
  uint glu_act, next_norm;
  uint att_dim, q_dim, kv_dim;  // wo's columns; rows of wq and of wk, wv
  uint att_splits, att_ml_off, head_dim;  // > 1: att from att_part (pairs from float att_ml_off), heads of head_dim
  uint clock_base;  // CLOCKS: this dispatch's first stamp
  uint att_done, att_wgs, qkv_ready, qkv_value;  // chained: see above; 0: not
  uint poll_loads;  // chained: the attention's count polled by loads (else by atomics)
  uint att_pos1;    // step A: the token's position + 1 (0: no step A)
  uint wtypes;      // the products' type codes, 4 bits each: gate/up, down, wo, wq, wk, wv (0: no such step)
} p;

// Whether product `slot`'s weights are of type code t in this dispatch, and
// whether the product runs: fixed by the pipeline where its set TS holds one
// code, else read from wtypes.
uint wtype(uint slot) { return (p.wtypes >> (4 * slot)) & 15u; }
bool is_type(uint TS, uint slot, uint t) { return (TS & (1u << t)) != 0 && (TS == (1u << t) || wtype(slot) == t); }
bool present(uint TS, uint slot) { return (TS & ~1u) != 0 && ((TS & 1u) == 0 || wtype(slot) != 0); }
const uint GU = 0, DN = 1, WO = 2, WQ = 3, WK = 4, WV = 5;  // the slots

shared vec4 xs[XS4];  // x * a norm's weights (the router's input before its scale)
shared ivec4 xq[4 * XQ_STRIDE];
shared vec2 xds[XQ_WORDS / 8];
shared int sel_id[64];
shared float sel_w[64];
shared bool is_last;

// xq's entry w (16 int8 values) in the layout XQ_SWIZZLE picks.
uint xq_at(uint w) { return XQ_SWIZZLE != 0 ? (w % 4) * XQ_STRIDE + w / 4 : w; }
#define Q8X_XQ(i) xq[xq_at(i)]
#define Q8X_SLOT g
#include "q8x_slot.glsl"
#define Q8X_SLOT u
#include "q8x_slot.glsl"
#define Q8X_SLOT d
#include "q8x_slot.glsl"
#define Q8X_SLOT o
#include "q8x_slot.glsl"
#define Q8X_SLOT q
#include "q8x_slot.glsl"
#define Q8X_SLOT k
#include "q8x_slot.glsl"
#define Q8X_SLOT v
#include "q8x_slot.glsl"

#include "glu.glsl"

// The sum over a group of L lanes (L: a power of 2, <= subgroup size).
float sum_over_lanes(float v, uint L) {
  for (uint o = L / 2; o > 0; o >>= 1) v += subgroupShuffleXor(v, o);
  return v;
}
// The top-k's rank counts (< 2^24: exact in float).
#define TK_SUM_LANES(v, P) uint(sum_over_lanes(float(v), P))
#define SUBGROUP 1
#define TK_WG_MAX 512
#define TK_N_EXPERT p.n_expert
#define TK_K p.k
#define TK_NORMALIZE p.topk_normalize
#define TK_GATING p.topk_gating
#define TK_HAS_BIAS 0u
#define TK_N_GROUP 1u
#define TK_TOPK_GROUP 1u
#define TK_SCALE p.topk_scale
#define TK_LOGIT(i) logits[i]
#define TK_BIAS(e) 0.0
#define TK_SET_ID(j, e)                                   \
  {                                                       \
    sel_id[j] = int(e);                                   \
    if (gl_WorkGroupID.x == 0u) ids_out[j] = int(e);      \
  }
#define TK_SET_WEIGHT(j, w)                               \
  {                                                       \
    sel_w[j] = (w);                                       \
    if (gl_WorkGroupID.x == 0u) wts_out[j] = (w);         \
  }
#include "moe_topk.glsl"

// Slots of one workgroup's stamps (vk_moe_fused.h's FusedClock).
const uint CLK_START = 0, CLK_WAITED = 1, CLK_ATT_ROTATED = 2, CLK_ATT_KEYS = 3, CLK_ATT_ARRIVE = 4,
           CLK_ATT_LEAVE = 5, CLK_OUT_ARRIVE = 6, CLK_OUT_LEAVE = 7, CLK_ROUTER_ARRIVE = 8, CLK_ROUTER_LEAVE = 9,
           CLK_TOPK = 10, CLK_GU_ARRIVE = 11, CLK_GU_LEAVE = 12, CLK_H_QUANT = 13, CLK_DOWN_ARRIVE = 14,
           CLK_DOWN_LEAVE = 15, CLK_NEXT_NORM = 16, CLK_END = 17, CLK_SLOTS = 18;
// Invocation 0 stamps the device clock into slot `slot` (CLOCKS only).
void stamp(uint slot) {
#if CLOCKS
  if (gl_LocalInvocationID.x == 0) stamps[p.clock_base + gl_WorkGroupID.x * CLK_SLOTS + slot] = clockRealtime2x32EXT();
#endif
}

// Lowers first_bad to 1 and writes NaN into x: the token fails.
void give_up() {
  atomicMin(first_bad, 1u);
  x1[0] = uintBitsToFloat(0x7fc00000u);
}

// Polls counter[c] (one invocation) until it reaches `target`, in rounds of 1024
// (llvmpipe ends any one loop after 65535 iterations), giving up after
// spin_limit polls (first_bad 1, NaN into x) or, after a round, where an
// earlier wait gave up. `arrived`: already there (no poll). loads: polls by
// loads (an atomic's read-modify-write holds the line longer). exact: a count
// past the target (left from an earlier token) also gives up.
void wait_count(uint c, uint target, bool arrived, bool loads, bool exact) {
  bool lost = false, past = false;
  for (uint outer = 0; outer <= p.spin_limit / 1024 && !arrived && !lost; ++outer) {
    for (uint inner = 0; inner < 1024; ++inner) {
      const uint v = loads ? counter_v[c] : atomicAdd(counter[c], 0u);
      if (v >= target) {
        arrived = true;
        past = exact && v != target;
        break;
      }
    }
    lost = !arrived && atomicAdd(first_bad, 0u) == 1u;
  }
  if ((!arrived && !lost) || past) give_up();
}

// Waits until every workgroup has arrived at its n-th grid barrier of this
// dispatch (the counter only grows within it), their buffer writes visible.
// Stamps `arrive` once the workgroup is there and `leave` once it may go on.
void grid_barrier(uint n, uint arrive, uint leave) {
  memoryBarrierBuffer();
  barrier();
  stamp(arrive);
  // The last to arrive does not poll (the others' polls are the barrier's
  // latency; it would add its own).
  if (gl_LocalInvocationID.x == 0) {
    const uint target = n * p.grid, before = atomicAdd(counter[p.counter], 1u);
    if (before >= target)
      give_up();  // a count left from an earlier dispatch
    else
      wait_count(p.counter, target, before + 1 == target, false, false);
  }
  stamp(leave);
  barrier();
  memoryBarrierBuffer();
}

// The sum over the workgroup, in every invocation (the subgroups' sums added
// in order: the same in every workgroup); two barriers.
shared float sg_sum[64];
float wg_add(float v) {
  v = subgroupAdd(v);
  if (subgroupElect()) sg_sum[gl_SubgroupID] = v;
  barrier();
  float s = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) s += sg_sum[i];
  barrier();
  return s;
}

// wg_add of two values at once.
shared vec2 sg_sum2[64];
vec2 wg_add2(vec2 v) {
  v = subgroupAdd(v);
  if (subgroupElect()) sg_sum2[gl_SubgroupID] = v;
  barrier();
  vec2 s = vec2(0);
  for (uint i = 0; i < gl_NumSubgroups; ++i) s += sg_sum2[i];
  barrier();
  return s;
}

// att = the attention's split-K partials combined: per split s of head h
// (partial row h * n + s) an unnormalized output, its running max m (base 2)
// and sum l. Chunks of CW vec4 columns of a head spread over the grid;
// invocation (column, split) loads its partial and pair in one round, and the
// max, the weighted outputs and sums are reduced by subgroups (64 / subgroup
// size of them per column) and then through shared memory.
shared float sg_max[64];
shared vec4 sg_sum4[64];
void combine_att() {
  const uint CW = WG / 64, n = p.att_splits, D4 = p.head_dim / 4, per = 64 / gl_SubgroupSize;
  const uint col = gl_LocalInvocationID.x / 64, s = gl_LocalInvocationID.x % 64, sg = gl_SubgroupID;
  for (uint chunk = gl_WorkGroupID.x; chunk < p.att_dim / (4 * CW); chunk += p.grid) {
    const uint c4 = chunk * CW + col, pr = (c4 / D4) * n + s;
    const bool ok = s < n;
    const vec4 v = ok ? att_part4[pr * D4 + c4 % D4] : vec4(0);
    const float m = ok ? att_part[p.att_ml_off + 2 * pr] : -1e30, l = ok ? att_part[p.att_ml_off + 2 * pr + 1] : 0.0;
    const float mx = subgroupMax(m);
    if (subgroupElect()) sg_max[sg] = mx;
    barrier();
    float big = -1e30;
    for (uint i = 0; i < per; ++i) big = max(big, sg_max[col * per + i]);
    const float w = ok ? exp2(m - big) : 0.0;
    const vec4 a = subgroupAdd(w * v);
    const float wl = subgroupAdd(w * l);
    if (subgroupElect()) {
      sg_sum4[sg] = a;
      sg_sum[sg] = wl;
    }
    barrier();
    if (s == 0) {
      vec4 acc = vec4(0);
      float sum = 0.0;
      for (uint i = 0; i < per; ++i) {
        acc += sg_sum4[col * per + i];
        sum += sg_sum[col * per + i];
      }
      att4[c4] = acc / sum;
    }
    barrier();  // sg_max, sg_sum4 and sg_sum again
  }
}

#include "moe_fused_attention.glsl"

// xq, xds = int8 blocks (q8x_quantize_block's) of n values (n % 32 == 0),
// vec4 i of them being V4(i): eight lanes a block, a vec4 each.
#define QUANTIZE_COOP(n, V4)                                                              \
  for (uint i = gl_LocalInvocationID.x; i < (n) / 4; i += WG) {                            \
    const vec4 v = V4(i), a = abs(v);                                                      \
    float amax = max(max(a.x, a.y), max(a.z, a.w));                                        \
    for (uint o = 1; o < 8; o <<= 1) amax = max(amax, subgroupShuffleXor(amax, o));        \
    const float inv = amax > 0.0 ? 127.0 / amax : 0.0;                                     \
    const ivec4 q = ivec4(round(v * inv));                                                 \
    int isum = (q.x + q.y) + (q.z + q.w);                                                  \
    for (uint o = 1; o < 8; o <<= 1) isum += subgroupShuffleXor(isum, o);                  \
    const uvec4 b = uvec4(q) & 0xFFu;                                                      \
    xq[xq_at(i / 4)][i % 4] = int(b.x | (b.y << 8) | (b.z << 16) | (b.w << 24));           \
    if (i % 8 == 0) xds[i / 8] = vec2(amax / 127.0, amax / 127.0 * float(isum));           \
  }

// This invocation's lane in its group of L and the group's index in the grid;
// `groups`: the grid's groups of L.
uint lane_of(uint L) { return (gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID) % L; }
uint group_of(uint L) {
  return gl_WorkGroupID.x * (WG / L) + (gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID) / L;
}
uint groups_of(uint L) { return p.grid * (WG / L); }

// rmsnorm scale of the sum of squares ss of x's n_embd values; where report,
// a non-finite ss lowers first_bad to check (0: no check).
float scale_of(float ss, uint check, bool report) {
  if (check != 0 && report && gl_LocalInvocationID.x == 0 && (isnan(ss) || isinf(ss)))
    atomicMin(first_bad, check);
  return inversesqrt(ss / float(p.n_embd) + p.eps);
}

// rmsnorm scale of x (scale_of). stage: 2 xs = x * next_norm, 0 not.
float norm_scale(uint check, bool report, uint stage) {
  float ss = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n_embd / 4; i += WG) {
    const vec4 v = x4[i];
    ss += dot(v, v);
    if (stage == 2) xs[i] = v * next_norm_w4[i];
  }
  return scale_of(wg_add(ss), check, report);
}

// xq, xds = int8 blocks of xs * scale (n_embd values).
void quantize_xs(float scale) {
#define XS_SCALED(i) (xs[i] * scale)
  QUANTIZE_COOP(p.n_embd, XS_SCALED)
#undef XS_SCALED
}

// One row's dot product with the quantized x over a group of L lanes: the
// row starts at unit rb and has nb blocks; lane takes units lane, lane + L, ...
#define ROW_DOT_T(S, T)                                                                           \
  float S##T##_row(uint rb, uint nb, uint lane, uint L) {                                         \
    float acc = 0.0;                                                                              \
    for (uint u = lane; u < nb * S##T##_UPB; u += L) {                                            \
      const uint b = u / S##T##_UPB, kk = u % S##T##_UPB;                                         \
      acc += S##T##_dot_w(S##T##_load_w(rb + b * S##T##_BLOCK_UNITS, kk), kk, S##T##_load_x(b, kk)); \
    }                                                                                             \
    return acc;                                                                                   \
  }
#define ROW_AT(S, T, row, ncols, lane, L) \
  S##T##_row((row) * ((ncols) / S##T##_QK) * S##T##_BLOCK_UNITS, (ncols) / S##T##_QK, lane, L)
// S_row(row, ncols, lane): row `row` of slot S's [rows][ncols] matrix of type
// WT, as above, over groups of L lanes.
#define ROW_DOT(S, TS, SLOT, L)                                             \
  ROW_DOT_T(S, 4) ROW_DOT_T(S, 5) ROW_DOT_T(S, 6) ROW_DOT_T(S, 7)         \
  float S##_row(uint row, uint ncols, uint lane) {                          \
    if (is_type(TS, SLOT, 4)) return ROW_AT(S, 4, row, ncols, lane, L);     \
    if (is_type(TS, SLOT, 5)) return ROW_AT(S, 5, row, ncols, lane, L);     \
    if (is_type(TS, SLOT, 6)) return ROW_AT(S, 6, row, ncols, lane, L);     \
    if (is_type(TS, SLOT, 7)) return ROW_AT(S, 7, row, ncols, lane, L);     \
    return 0.0;                                                             \
  }
ROW_DOT(o, O_TS, WO, O_LANES)
ROW_DOT(q, Q_TS, WQ, QKV_LANES)
ROW_DOT(k, K_TS, WK, QKV_LANES)
ROW_DOT(v, V_TS, WV, QKV_LANES)

// x[row] += wo[row] . att over a group of O_LANES lanes; x's load goes out
// before the weights' (a warp's loads return in order).
void out_proj_row(uint row, uint lane) {
  const float xr = x1[row];
  const float acc = sum_over_lanes(o_row(row, p.att_dim, lane), O_LANES);
  if (lane == 0) x1[row] = xr + acc;
}

// The k experts' gate and up rows (item = j * n_ff + row) with their
// activation into h, items spread over the grid's groups of GU_LANES.
#define GATE_UP_T(T)                                                                            \
  void gate_up##T() {                                                                           \
    const uint lane = lane_of(GU_LANES), gg = group_of(GU_LANES), groups = groups_of(GU_LANES);  \
    const uint nb = p.n_embd / g##T##_QK;                                                       \
    const uint units = nb * g##T##_UPB, row_units = nb * g##T##_BLOCK_UNITS;                    \
    for (uint item = gg; item < p.k * p.n_ff; item += groups) {                                 \
      const uint rb =                                                                           \
          uint(sel_id[item / p.n_ff]) * (p.gu_stride / g##T##_UNIT_BYTES) + (item % p.n_ff) * row_units; \
      float ag = 0.0, au = 0.0;                                                                 \
      for (uint u = lane; u < units; u += GU_LANES) {                                           \
        const uint b = u / g##T##_UPB, kk = u % g##T##_UPB;                                     \
        const g##T##_WData wg_ = g##T##_load_w(rb + b * g##T##_BLOCK_UNITS, kk);                \
        const u##T##_WData wu_ = u##T##_load_w(rb + b * g##T##_BLOCK_UNITS, kk);                \
        ag += g##T##_dot_w(wg_, kk, g##T##_load_x(b, kk));                                      \
        au += u##T##_dot_w(wu_, kk, u##T##_load_x(b, kk));                                      \
      }                                                                                         \
      ag = sum_over_lanes(ag, GU_LANES);                                                        \
      au = sum_over_lanes(au, GU_LANES);                                                        \
      if (lane == 0) h1[item] = glu(ag, au, p.glu_act);                                         \
    }                                                                                           \
  }
GATE_UP_T(4)
GATE_UP_T(5)
GATE_UP_T(6)
GATE_UP_T(7)

// x[row] += sum_j w[j] down_j[row] . h[j], rows spread over the grid's
// groups of DN_LANES; a row's units of all k experts one after another.
#define DOWN_T(T)                                                                               \
  void down##T() {                                                                              \
    const uint lane = lane_of(DN_LANES), gg = group_of(DN_LANES), groups = groups_of(DN_LANES);  \
    const uint nb = p.n_ff / d##T##_QK;                                                         \
    const uint units_e = nb * d##T##_UPB, units = p.k * units_e, row_units = nb * d##T##_BLOCK_UNITS; \
    const uint estride = p.dn_stride / d##T##_UNIT_BYTES;                                       \
    for (uint row = gg; row < p.n_embd; row += groups) {                                        \
      const float xr = x1[row]; /* before the weights' loads */                                 \
      float acc = 0.0;                                                                          \
      for (uint u = lane; u < units; u += DN_LANES) {                                           \
        const uint j = u / units_e, ue = u % units_e;                                           \
        const uint b = ue / d##T##_UPB, kk = ue % d##T##_UPB;                                   \
        const d##T##_WData wd =                                                                 \
            d##T##_load_w(uint(sel_id[j]) * estride + row * row_units + b * d##T##_BLOCK_UNITS, kk); \
        acc += sel_w[j] * d##T##_dot_w(wd, kk, d##T##_load_x(j * nb + b, kk));                  \
      }                                                                                         \
      acc = sum_over_lanes(acc, DN_LANES);                                                      \
      if (lane == 0) x1[row] = xr + acc;                                                        \
    }                                                                                           \
  }
DOWN_T(4)
DOWN_T(5)
DOWN_T(6)
DOWN_T(7)

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint wg = gl_WorkGroupID.x;
  const uint E = p.n_embd, F = p.n_ff, K = p.k;
  uint barriers = 0;
  stamp(CLK_START);
  if (p.att_wgs != 0) {  // chained: the attention's workgroups are done
    // Exact: the next attention counts only after this dispatch's end.
    if (t == 0) wait_count(p.att_done - 1, p.att_wgs, false, p.poll_loads != 0, true);
    stamp(CLK_WAITED);
    barrier();
    memoryBarrierBuffer();
  }

  // A, 0. The attention (or its splits combined), the output projection into x.
  if (present(O_TS, WO)) {
    if (ATT_D != 0 && p.att_pos1 != 0) {
      fold_attention();
      grid_barrier(++barriers, CLK_ATT_ARRIVE, CLK_ATT_LEAVE);
    } else if (p.att_splits > 1) {
      combine_att();
      grid_barrier(++barriers, CLK_ATT_ARRIVE, CLK_ATT_LEAVE);
    }
#define ATT4(i) att4[i]
    QUANTIZE_COOP(p.att_dim, ATT4)
#undef ATT4
    barrier();
    const uint lane = lane_of(O_LANES);
    for (uint row = group_of(O_LANES); row < E; row += groups_of(O_LANES)) out_proj_row(row, lane);
    grid_barrier(++barriers, CLK_OUT_ARRIVE, CLK_OUT_LEAVE);
  }

  // 1. The ffn norm (each workgroup) and the router's logits, a row per
  // workgroup at a time, the first in the norm's pass over x: its loads issued
  // with x's, one workgroup sum for both (run 42: the step 3.8 -> 2.9 us).
  const bool has_row = wg < p.n_expert;
  vec2 sums = vec2(0);  // x's sum of squares, the row's dot product with x * ffn_norm
  for (uint i = t; i < E / 4; i += WG) {
    const vec4 v = x4[i];
    const vec4 r = has_row ? router4[wg * (E / 4) + i] : vec4(0);
    const vec4 xw = v * norm_w4[i];
    xs[i] = xw;
    sums += vec2(dot(v, v), dot(r, xw));
  }
  sums = wg_add2(sums);
  const float scale = scale_of(sums.x, p.check_in, wg == 0);
  if (has_row && t == 0) logits[wg] = sums.y * scale;
  for (uint row = wg + p.grid; row < p.n_expert; row += p.grid) {
    float acc = 0.0;
    for (uint i = t; i < E / 4; i += WG) acc += dot(router4[row * (E / 4) + i], xs[i]);
    acc = wg_add(acc);
    if (t == 0) logits[row] = acc * scale;
  }
  quantize_xs(scale);
  grid_barrier(++barriers, CLK_ROUTER_ARRIVE, CLK_ROUTER_LEAVE);

  // 2. Top-k, then the k experts' gate and up products with their activation.
  route_topk(0);
  barrier();
  stamp(CLK_TOPK);
  if (is_type(GU_TS, GU, 4)) gate_up4();
  if (is_type(GU_TS, GU, 5)) gate_up5();
  if (is_type(GU_TS, GU, 6)) gate_up6();
  if (is_type(GU_TS, GU, 7)) gate_up7();
  grid_barrier(++barriers, CLK_GU_ARRIVE, CLK_GU_LEAVE);

  // 3. The down products of the k experts, weighted, added to x.
#define H4(i) h4[i]
  QUANTIZE_COOP(K * F, H4)
#undef H4
  barrier();
  stamp(CLK_H_QUANT);
  if (is_type(DN_TS, DN, 4)) down4();
  if (is_type(DN_TS, DN, 5)) down5();
  if (is_type(DN_TS, DN, 6)) down6();
  if (is_type(DN_TS, DN, 7)) down7();

  // 4. The next layer's norm (each workgroup) and its q, k and v.
  if (present(Q_TS, WQ)) {
    grid_barrier(++barriers, CLK_DOWN_ARRIVE, CLK_DOWN_LEAVE);
    quantize_xs(norm_scale(p.check_out, wg == 0, 2));
    barrier();
    stamp(CLK_NEXT_NORM);
    const uint QK = p.q_dim + p.kv_dim, lane = lane_of(QKV_LANES);
    for (uint row = group_of(QKV_LANES); row < QK + p.kv_dim; row += groups_of(QKV_LANES)) {
      const float acc = sum_over_lanes(row < p.q_dim ? q_row(row, E, lane)
                                       : row < QK    ? k_row(row - p.q_dim, E, lane)
                                                     : v_row(row - QK, E, lane),
                                       QKV_LANES);
      if (lane != 0) continue;
      if (row < p.q_dim)
        q_out[row] = acc;
      else if (row < QK)
        k_out[row - p.q_dim] = acc;
      else
        v_out[row - QK] = acc;
    }
  }

  // The last workgroup to finish, where it has work: the chained attention's
  // counter, or the next norm. Elsewhere no end is counted.
  memoryBarrierBuffer();
  barrier();
  stamp(CLK_END);
  const bool write_xn = p.next_norm != 0 && !present(Q_TS, WQ);
  if (p.qkv_ready == 0 && !write_xn) return;
  if (t == 0) {
    is_last = atomicAdd(counter[p.counter + 1], 1u) == p.grid - 1;
    if (is_last && p.qkv_ready != 0) {
      memoryBarrierBuffer();
      atomicMax(counter[p.qkv_ready - 1], p.qkv_value);
    }
  }
  barrier();
  if (!is_last || !write_xn) return;
  memoryBarrierBuffer();
  const float s = norm_scale(p.check_out, true, 0);
  for (uint i = t; i < E / 4; i += WG) xn4[i] = x4[i] * s * next_norm_w4[i];
}
