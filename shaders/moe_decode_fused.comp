#version 450
// One decoded token's routed-MoE block in one dispatch whose `grid`
// workgroups wait for each other at two grid barriers (the host launches no
// more workgroups than the device runs at once; see vk_moe_fused.h):
//   1. xn = rmsnorm(x) * ffn_norm, formed by every workgroup for itself; the
//      router's logits, rows spread over the grid's subgroups.      | barrier
//   2. the top-k of the logits in every workgroup (workgroup 0 writes ids
//      and weights); h[j] = act(gate_j . xn, up_j . xn) for the k experts,
//      rows spread over the grid.                                    | barrier
//   3. x[r] += sum_j w[j] down_j[r] . h[j], rows spread over the grid; the
//      last workgroup to finish resets the counters and, with next_norm,
//      writes xn = rmsnorm(x) * next_norm_w (the next layer's input).
// A dispatch boundary between dependent steps costs several microseconds on
// a GPU; a grid barrier is one atomic round trip.
// Products on int8 activations as matvec_q8x.comp's (q8x_type.glsl): xn and
// h are quantized per 32-element block in shared memory.
// Compile-time: GU_WT, DN_WT: weight types of gate/up and of down (4 = Q8_0,
// 5 = Q4_K, 6 = Q5_K, 7 = Q6_K).
// Specialization: 0 = workgroup size (a power of 2, <= 512), 1 = TPR lanes per
// row (power of 2, <= subgroup size), 2 = XQ_WORDS (>= max(n_embd, k * n_ff) /
// 4), 3 = XS4 (n_embd / 4). A lane group works on one row at a time, a lane on
// one unit of it at a time: more rows or units at once measured slower on an
// H200 (registers; docs/PERF.md run 36).
// A grid barrier that waits spin_limit polls gives up: it lowers first_bad to
// 1 and writes NaN into x, so the token fails loudly instead of silently; a
// wait that finds first_bad at 1 gives up at once (one loss, one timeout).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_spirv_intrinsics : require
#if GU_WT == 4 || GU_WT == 7 || DN_WT == 4 || DN_WT == 7
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

// OpSDot (4450) on two int32 words of 4 packed signed bytes (format 0 = 4x8Bit).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4(int a, int b, spirv_literal int packed_format);

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TPR = 32;
layout(constant_id = 2) const uint XQ_WORDS = 1536;
layout(constant_id = 3) const uint XS4 = 512;
const uint WG = gl_WorkGroupSize.x;

layout(set = 0, binding = 0) coherent buffer X4 { vec4 x4[]; };
layout(set = 0, binding = 0) coherent buffer X1 { float x1[]; };
layout(set = 0, binding = 1) readonly buffer NW { vec4 norm_w4[]; };
layout(set = 0, binding = 2) readonly buffer R { vec4 router4[]; };
layout(set = 0, binding = 3) readonly buffer G4 { uvec4 gate4[]; };
layout(set = 0, binding = 4) readonly buffer U4 { uvec4 up4[]; };
layout(set = 0, binding = 5) readonly buffer D4 { uvec4 down4[]; };
#if GU_WT == 4 || GU_WT == 7
layout(set = 0, binding = 3) readonly buffer G2 { uint16_t gate2[]; };
layout(set = 0, binding = 4) readonly buffer U2 { uint16_t up2[]; };
#endif
#if DN_WT == 4 || DN_WT == 7
layout(set = 0, binding = 5) readonly buffer D2 { uint16_t down2[]; };
#endif
layout(set = 0, binding = 6) coherent buffer L { float logits[]; };
layout(set = 0, binding = 7) coherent buffer H4 { vec4 h4[]; };
layout(set = 0, binding = 7) coherent buffer H1 { float h1[]; };
layout(set = 0, binding = 8) writeonly buffer Ids { int ids_out[]; };
layout(set = 0, binding = 9) writeonly buffer Wts { float wts_out[]; };
layout(set = 0, binding = 10) coherent buffer C { uint counter[]; };
layout(set = 0, binding = 11) readonly buffer NNW { vec4 next_norm_w4[]; };
layout(set = 0, binding = 12) writeonly buffer XN { vec4 xn4[]; };
layout(set = 0, binding = 13) buffer F { uint first_bad; };

layout(push_constant) uniform Push {
  uint n_embd, n_ff, n_expert, k;
  float eps;
  uint check_in, check_out;  // non-finite sites of x on entry and on exit (0: no check)
  uint gu_stride, dn_stride;  // bytes from one expert's matrix to the next
  uint grid, counter, spin_limit;  // workgroups; counter[counter], [counter + 1]: zero between dispatches
  uint topk_normalize, topk_gating;
  float topk_scale;
  uint glu_act, next_norm;
} p;

shared vec4 xs[XS4];  // x * ffn_norm (the router's input before its scale)
shared ivec4 xq[XQ_WORDS / 4];
shared vec2 xds[XQ_WORDS / 8];
shared int sel_id[64];
shared float sel_w[64];
shared bool is_last;

#include "q8x_quant.glsl"
#define Q8X_WT GU_WT
#define Q8X(n) g_##n
#define Q8X_W4(i) gate4[i]
#define Q8X_W2(i) gate2[i]
#include "q8x_type.glsl"
#undef Q8X
#undef Q8X_W4
#undef Q8X_W2
#define Q8X(n) u_##n
#define Q8X_W4(i) up4[i]
#define Q8X_W2(i) up2[i]
#include "q8x_type.glsl"
#undef Q8X
#undef Q8X_W4
#undef Q8X_W2
#undef Q8X_WT
#define Q8X_WT DN_WT
#define Q8X(n) d_##n
#define Q8X_W4(i) down4[i]
#define Q8X_W2(i) down2[i]
#include "q8x_type.glsl"

#include "glu.glsl"
#include "reduce.glsl"

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

// Waits until every workgroup has arrived at its n-th grid barrier of this
// dispatch (the counter only grows within it), their buffer writes visible.
void grid_barrier(uint n) {
  memoryBarrierBuffer();
  barrier();
  if (gl_LocalInvocationID.x == 0) {
    atomicAdd(counter[p.counter], 1u);
    // Two nested loops: llvmpipe ends any one loop after 65535 iterations.
    bool arrived = atomicAdd(first_bad, 0u) == 1u;  // an earlier wait was lost
    for (uint outer = 0; outer <= p.spin_limit / 1024 && !arrived; ++outer)
      for (uint inner = 0; inner < 1024; ++inner)
        if (atomicAdd(counter[p.counter], 0u) >= n * p.grid) {
          arrived = true;
          break;
        }
    if (!arrived) {
      atomicMin(first_bad, 1u);
      x1[0] = uintBitsToFloat(0x7fc00000u);
    }
  }
  barrier();
  memoryBarrierBuffer();
}

float sum_over_lanes(float v) {
  for (uint o = TPR / 2; o > 0; o >>= 1) v += subgroupShuffleXor(v, o);
  return v;
}

// rmsnorm scale of the n_embd values of x; where report, a non-finite sum of
// squares lowers first_bad to check (0: no check). With stage, xs = x * ffn_norm.
float norm_scale(uint check, bool report, bool stage) {
  float ss = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < p.n_embd / 4; i += WG) {
    const vec4 v = x4[i];
    ss += dot(v, v);
    if (stage) xs[i] = v * norm_w4[i];
  }
  ss = wg_sum(ss);
  if (check != 0 && report && gl_LocalInvocationID.x == 0 && (isnan(ss) || isinf(ss)))
    atomicMin(first_bad, check);
  return inversesqrt(ss / float(p.n_embd) + p.eps);
}

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint wg = gl_WorkGroupID.x;
  const uint E = p.n_embd, F = p.n_ff, K = p.k;
  const uint E4 = E / 4;
  const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  const uint lane = tid % TPR;
  const uint groups = p.grid * (WG / TPR);  // lane groups in the grid
  const uint gg = wg * (WG / TPR) + tid / TPR;

  // 1. The ffn norm (each workgroup) and the router's logits.
  const float scale = norm_scale(p.check_in, wg == 0, true);
  const uint sgs = p.grid * gl_NumSubgroups;
  for (uint row = wg * gl_NumSubgroups + gl_SubgroupID; row < p.n_expert; row += sgs) {
    float acc = 0.0;
    for (uint i = gl_SubgroupInvocationID; i < E4; i += gl_SubgroupSize)
      acc += dot(router4[row * E4 + i], xs[i]);
    acc = subgroupAdd(acc);
    if (subgroupElect()) logits[row] = acc * scale;
  }
  for (uint blk = t; blk < E / 32; blk += WG) {
    vec4 v[8];
    [[unroll]] for (uint i = 0; i < 8; ++i) v[i] = xs[blk * 8 + i] * scale;
    q8x_quantize_block(v, blk);
  }
  grid_barrier(1);

  // 2. Top-k, then the k experts' gate and up products with their activation.
  route_topk(0);
  barrier();
  {
    const uint KF = K * F;
    const uint nb = E / g_QK;
    const uint units = nb * g_UPB, row_units = nb * g_BLOCK_UNITS;
    for (uint item = gg; item < KF; item += groups) {
      const uint rb = uint(sel_id[item / F]) * (p.gu_stride / g_UNIT_BYTES) + (item % F) * row_units;
      float ag = 0.0, au = 0.0;
      for (uint u = lane; u < units; u += TPR) {
        const uint b = u / g_UPB, kk = u % g_UPB;
        const g_WData wg_ = g_load_w(rb + b * g_BLOCK_UNITS, kk);
        const u_WData wu_ = u_load_w(rb + b * g_BLOCK_UNITS, kk);
        ag += g_dot_w(wg_, kk, g_load_x(b, kk));
        au += u_dot_w(wu_, kk, u_load_x(b, kk));  // the same x, as the up inclusion's type
      }
      ag = sum_over_lanes(ag);
      au = sum_over_lanes(au);
      if (lane == 0) h1[item] = glu(ag, au, p.glu_act);
    }
  }
  grid_barrier(2);

  // 3. The down products of the k experts, weighted, added to x.
  {
    const uint KF = K * F;
    for (uint blk = t; blk < KF / 32; blk += WG) {
      vec4 v[8];
      [[unroll]] for (uint i = 0; i < 8; ++i) v[i] = h4[blk * 8 + i];
      q8x_quantize_block(v, blk);
    }
    barrier();
    const uint nb = F / d_QK;
    const uint units_e = nb * d_UPB, units = K * units_e, row_units = nb * d_BLOCK_UNITS;
    const uint estride = p.dn_stride / d_UNIT_BYTES;
    for (uint row = gg; row < E; row += groups) {
      // The row of each of the k experts, one after another (units_e units each).
      float acc = 0.0;
      for (uint u = lane; u < units; u += TPR) {
        const uint j = u / units_e, ue = u % units_e;
        const uint b = ue / d_UPB, kk = ue % d_UPB;
        const d_WData wd = d_load_w(uint(sel_id[j]) * estride + row * row_units + b * d_BLOCK_UNITS, kk);
        acc += sel_w[j] * d_dot_w(wd, kk, d_load_x(j * nb + b, kk));
      }
      acc = sum_over_lanes(acc);
      if (lane == 0) x1[row] += acc;
    }
  }

  // The last workgroup to finish: counters back to zero, the next norm.
  memoryBarrierBuffer();
  barrier();
  if (t == 0) {
    is_last = atomicAdd(counter[p.counter + 1], 1u) == p.grid - 1;
    if (is_last) {
      atomicExchange(counter[p.counter], 0u);
      atomicExchange(counter[p.counter + 1], 0u);
    }
  }
  barrier();
  if (!is_last || p.next_norm == 0) return;
  memoryBarrierBuffer();
  const float s = norm_scale(p.check_out, true, false);
  for (uint i = t; i < E4; i += WG) xn4[i] = x4[i] * s * next_norm_w4[i];
}
