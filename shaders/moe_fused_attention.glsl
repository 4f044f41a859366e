// The one-token attention folded into moe_decode_fused.comp (its step A, with
// p.att_pos1 = the token's position + 1): a q head a workgroup (heads spread
// over the grid), F16 caches, grouped-query heads, optionally per-head q/k
// RMS norms, then rotary embedding (attn_flash.comp's ROPE_IN operations):
//   1. q of head h and k, v of its kv head g as the q/k/v products left them;
//      the first workgroup of each kv head stores the new key and value;
//   2. keys 0..pos in passes of WG / 8: eight lanes a key (an eighth of its
//      dims each), its score, and with an online softmax (base 2: q is
//      pre-scaled by scale * log2(e)) each key slot's weighted values; the
//      next pass's cache loads go out before a pass's arithmetic;
//   3. the slots combined: att[h] = sum_j p_j v_j / sum_j p_j.
// The new position's key and value come from shared memory, not the cache.
// The loops over a lane's registers are unrolled (the driver does not
// unroll by itself, and their arrays would go to local memory).
// The includer declares the spec constants ATT_* (ATT_D: head_dim, 64 or
// 128), the q/k/v inputs q_in4 / k_in4 / v_in2, the caches (kc_u / vc_u as
// uints, kc4 / vc4 as uvec4s), the norm weights qn_w / kn_w, att1, xs (XS4
// vec4s), wg_add, sg_max and stamp (CLK_ATT_ROTATED, CLK_ATT_KEYS).
#define ROPE_PARAM(name) ATT_##name
#include "rope.glsl"

const uint ATT_DS = ATT_D > 0 ? ATT_D : 64;  // array sizes where the kernel folds none
const uint ATT_DL = ATT_DS / 8;               // a lane's dims of a key (8 lanes a key)
const uint ATT_LU = ATT_DL / 8;               // its uvec4s (8 halves each)
const uint ATT_ROW_U = (ATT_HEADS / ATT_GROUP) * (ATT_DS / 2);  // cache uints a position
// q's element d, one float of padding after each lane's dims (no bank
// conflicts where a key's eight lanes read their parts).
uint qa(uint d) { return d + d / ATT_DL; }
shared float att_q[ATT_DS + 8], att_k[ATT_DS];  // raw, then normed and rotated (q also scaled)
shared uint att_kn[ATT_DS / 2], att_vn[ATT_DS / 2];  // the new key and value as the cache holds them
shared float att_rs[2];  // inverse RMS of q and k
shared float att_w[2 * ATT_DS];  // the q and k norm weights (ATT_NORM)
shared vec2 att_cs[ATT_DS / 2];  // by subgroups: each rotation unit's (cos, sin)
// The subgroups' partial outputs, up to 16 rows of head_dim at once, in xs
// (free until step 1 writes it; n_embd >= head_dim).
const uint ATT_RED_ROWS = 4 * XS4 / ATT_DS < 16 ? 4 * XS4 / ATT_DS : 16;
void set_red(uint i, float v) { xs[i / 4][i % 4] = v; }
float red_at(uint i) { return xs[i / 4][i % 4]; }

// The maximum over the workgroup, in every invocation (sg_max as scratch).
float wg_max(float v) {
  v = subgroupMax(v);
  if (subgroupElect()) sg_max[gl_SubgroupID] = v;
  barrier();
  float m = sg_max[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) m = max(m, sg_max[i]);
  barrier();
  return m;
}

// Element e of row r (0: q, 1: k) normed.
float att_normed(uint r, uint e) {
  const float x = r == 0 ? att_q[qa(e)] : att_k[e];
  return ATT_NORM != 0 ? x * att_rs[r] * att_w[r * ATT_DS + e] : x;
}

// This lane's part c of the cached key and value of position j (zeros past
// n_kv and at the new position pos, which comes from shared memory).
void load_kv(uint j, uint n_kv, uint pos, uint base, uint c, out uvec4 kw[ATT_LU], out uvec4 vw[ATT_LU]) {
  const bool ok = j < n_kv && j != pos;
  [[unroll]] for (uint u = 0; u < ATT_LU; ++u) {
    const uint at = (j * ATT_ROW_U + base + c * (ATT_DL / 2) + 4 * u) / 4;
    kw[u] = ok ? kc4[at] : uvec4(0);
    vw[u] = ok ? vc4[at] : uvec4(0);
  }
}

// Pair i of the new value (i < head_dim / 2, else none), as the cache holds
// it, into att_vn and (store) the cache row.
void new_value(uint i, uint g, uint new_row, bool store) {
  if (i >= ATT_DS / 2) return;
  const uint w = packHalf2x16(v_in2[g * (ATT_DS / 2) + i]);
  att_vn[i] = w;
  if (store) vc_u[new_row + i] = w;
}

// By subgroups (ATT_SG = S, the subgroup size; 0: not): q and k normed and
// rotated in registers by subgroups 0 and 1, lane l holding elements l + S j,
// so that a NeoX pair (n_rot / 2 a multiple of S) lies in one lane and a pair
// of neighbours in lanes l and l ^ 1, while other subgroups form the units'
// (cos, sin): two workgroup barriers instead of four; and the key slots
// combined with each subgroup scaled by its own max, one barrier a round of
// ATT_RED_ROWS subgroups instead of six (docs/PERF.md run 47: step A 1.0 us
// shorter at depth 0 on an H200). Where the subgroups are not of size S, or
// NeoX pairs lie apart, by the workgroup as below.
const uint ATT_S = ATT_SG > 0 ? ATT_SG : 32;
const uint ATT_NE = ATT_DS / ATT_S < 1 ? 1 : ATT_DS / ATT_S;  // a lane's elements of q or k
bool att_by_subgroups() {
  return ATT_SG != 0 && gl_SubgroupSize == ATT_S && ATT_DS % ATT_S == 0 && ATT_NE <= 16 &&
         (ATT_NEOX == 0 || (ATT_N_ROT / 2) % ATT_S == 0) && gl_NumSubgroups >= 2;
}
// Subgroup r (0: q of head h, 1: k of kv head g) loads its row's elements.
void att_sg_load(uint r, uint h, uint g, out float xr[ATT_NE], out float wr[ATT_NE]) {
  const uint l = gl_SubgroupInvocationID;
  [[unroll]] for (uint j = 0; j < ATT_NE; ++j) {
    const uint e = l + ATT_S * j;
    xr[j] = r == 0 ? q_in1[h * ATT_DS + e] : k_in1[g * ATT_DS + e];
    wr[j] = ATT_NORM != 0 ? (r == 0 ? qn_w[e] : kn_w[e]) : 1.0;
  }
}
// Subgroup r's row normed in registers (att_normed's values).
void att_sg_norm(inout float xr[ATT_NE], float wr[ATT_NE]) {
  if (ATT_NORM == 0) return;
  float ss = 0.0;
  [[unroll]] for (uint j = 0; j < ATT_NE; ++j) ss += xr[j] * xr[j];
  const float rs = inversesqrt(subgroupAdd(ss) / float(ATT_DS) + p.eps);
  [[unroll]] for (uint j = 0; j < ATT_NE; ++j) xr[j] = xr[j] * rs * wr[j];
}
// Subgroup r rotated its normed row (fold_attention's rotation units, their
// (cos, sin) from att_cs) into att_q (scaled) or att_k; subgroup 1 also packed
// and stored the new key.
void att_sg_rotate(uint r, float xr[ATT_NE], uint new_row, bool store) {
  const uint l = gl_SubgroupInvocationID, half_r = ATT_N_ROT / 2;
  float nb[ATT_NE], y[ATT_NE];
  [[unroll]] for (uint j = 0; j < ATT_NE; ++j) nb[j] = subgroupShuffleXor(xr[j], 1);
  [[unroll]] for (uint j = 0; j < ATT_NE; ++j) {
    const uint e = l + ATT_S * j;
    // The pair (x_a, x_b) holding e, its unit m, whether e is its a.
    const bool neox_pair = ATT_NEOX != 0 && e < ATT_N_ROT;
    const uint jd = half_r / ATT_S;  // a NeoX partner's element distance
    const bool is_a = neox_pair ? e < half_r : (e % 2) == 0;
    const float other = neox_pair ? (is_a ? xr[min(j + jd, ATT_NE - 1)] : xr[j >= jd ? j - jd : 0]) : nb[j];
    const float xa = is_a ? xr[j] : other, xb = is_a ? other : xr[j];
    const vec2 cs = att_cs[rope_unit_of(e, ATT_N_ROT, ATT_NEOX != 0)];
    y[j] = is_a ? xa * cs.x - xb * cs.y : xa * cs.y + xb * cs.x;
  }
  [[unroll]] for (uint j = 0; j < ATT_NE; ++j) {
    const uint e = l + ATT_S * j;
    if (r == 0) {
      att_q[qa(e)] = y[j] * ATT_scale_log2;
    } else {
      const float hi = subgroupShuffleXor(y[j], 1);
      att_k[e] = y[j];
      if (l % 2 == 0) {
        const uint w = packHalf2x16(vec2(y[j], hi));
        att_kn[e / 2] = w;
        if (store) kc_u[new_row + e / 2] = w;
      }
    }
  }
}

void fold_attention() {
  const uint D = ATT_DS, D4 = D / 4, D2 = D / 2, DL = ATT_DL, LU = ATT_LU;
  const uint t = gl_LocalInvocationID.x, tf = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  const uint pos = p.att_pos1 - 1, n_kv = p.att_pos1;
  const uint c = tf % 8, slot = tf / 8, SLOTS = WG / 8;
  for (uint h = gl_WorkGroupID.x; h < ATT_HEADS; h += p.grid) {
    const uint g = h / ATT_GROUP, new_row = pos * ATT_ROW_U + g * D2;
    const bool store = h % ATT_GROUP == 0;
    // 1. The inputs, the new value stored; the first keys' loads go out with them
    // (by subgroups after q's and k's, which then do not wait behind them).
    uvec4 kw[ATT_LU], vw[ATT_LU];
    if (att_by_subgroups()) {
      float xr[ATT_NE], wr[ATT_NE];
      const uint r = gl_SubgroupID;
      if (r < 2) att_sg_load(r, h, g, xr, wr);
      load_kv(slot, n_kv, pos, g * D2, c, kw, vw);
      new_value(t - 2 * D4, g, new_row, store);
      // Each rotation unit's (cos, sin), by the invocations past q, k and v.
      const uint cu = t - (2 * D4 + D2);
      if (t >= 2 * D4 + D2 && cu < D2)
        att_cs[cu] = cu < ATT_N_ROT / 2 ? cos_sin(angle(float(pos), cu)) * ATT_mscale : vec2(1, 0);
      if (r < 2) att_sg_norm(xr, wr);
      barrier();
      if (r < 2) att_sg_rotate(r, xr, new_row, store);
      barrier();
    } else {
      load_kv(slot, n_kv, pos, g * D2, c, kw, vw);
      if (ATT_NORM != 0)
        for (uint i = t; i < 2 * D; i += WG) att_w[i] = i < D ? qn_w[i] : kn_w[i - D];
      if (t < D4) {
        const vec4 v = q_in4[h * D4 + t];
        [[unroll]] for (uint i = 0; i < 4; ++i) att_q[qa(4 * t + i)] = v[i];
      } else if (t < 2 * D4) {
        const vec4 v = k_in4[g * D4 + t - D4];
        [[unroll]] for (uint i = 0; i < 4; ++i) att_k[4 * (t - D4) + i] = v[i];
      } else {
        new_value(t - 2 * D4, g, new_row, store);
      }
      barrier();
      if (ATT_NORM != 0) {
        for (uint r = gl_SubgroupID; r < 2; r += gl_NumSubgroups) {
          float ss = 0.0;
          for (uint e = gl_SubgroupInvocationID; e < D; e += gl_SubgroupSize) {
            const float x = r == 0 ? att_q[qa(e)] : att_k[e];
            ss += x * x;
          }
          ss = subgroupAdd(ss);
          if (subgroupElect()) att_rs[r] = inversesqrt(ss / float(D) + p.eps);
        }
        barrier();
      }
      // Rotation unit m of row r: pair (a, b) rotated, or two elements past n_rot normed only.
      for (uint j = t; j < 2 * D2; j += WG) {
        const uint r = j / D2, m = j % D2;
        uint a, b;
        const vec2 cs =
            rope_unit_pair(m, ATT_N_ROT, ATT_NEOX != 0, a, b) ? cos_sin(angle(float(pos), m)) * ATT_mscale : vec2(1, 0);
        const float x0 = att_normed(r, a), x1 = att_normed(r, b);
        const vec2 y = vec2(x0 * cs.x - x1 * cs.y, x0 * cs.y + x1 * cs.x);
        if (r == 0) {
          att_q[qa(a)] = y.x * ATT_scale_log2;
          att_q[qa(b)] = y.y * ATT_scale_log2;
        } else {
          att_k[a] = y.x;
          att_k[b] = y.y;
        }
      }
      barrier();
      for (uint i = t; i < D2; i += WG) {
        const uint w = packHalf2x16(vec2(att_k[2 * i], att_k[2 * i + 1]));
        att_kn[i] = w;
        if (store) kc_u[new_row + i] = w;
      }
      barrier();
    }
    stamp(CLK_ATT_ROTATED);

    // 2. Scores and the slots' weighted values.
    float m = -1e30, l = 0.0, acc[DL];
    [[unroll]] for (uint i = 0; i < DL; ++i) acc[i] = 0.0;
    for (uint j0 = 0; j0 < n_kv; j0 += SLOTS) {
      const uint j = j0 + slot;
      const bool ok = j < n_kv;
      if (j == pos)
        [[unroll]] for (uint u = 0; u < LU; ++u) {
          const uint w0 = c * (DL / 2) + 4 * u;  // this lane's uints of the row
          kw[u] = uvec4(att_kn[w0], att_kn[w0 + 1], att_kn[w0 + 2], att_kn[w0 + 3]);
          vw[u] = uvec4(att_vn[w0], att_vn[w0 + 1], att_vn[w0 + 2], att_vn[w0 + 3]);
        }
      uvec4 kn[ATT_LU], vn[ATT_LU];
      load_kv(j + SLOTS, n_kv, pos, g * D2, c, kn, vn);
      float s = 0.0;
      [[unroll]] for (uint u = 0; u < LU; ++u)
        [[unroll]] for (uint e = 0; e < 4; ++e) {
          const vec2 kk = unpackHalf2x16(kw[u][e]);
          const uint d = c * DL + 8 * u + 2 * e;
          s += att_q[qa(d)] * kk.x + att_q[qa(d + 1)] * kk.y;
        }
      s += subgroupShuffleXor(s, 1);
      s += subgroupShuffleXor(s, 2);
      s += subgroupShuffleXor(s, 4);
      if (ok) {
        const float mn = max(m, s), a = exp2(m - mn), pj = exp2(s - mn);
        l = l * a + pj;
        [[unroll]] for (uint u = 0; u < LU; ++u)
          [[unroll]] for (uint e = 0; e < 4; ++e) {
            const vec2 vv = unpackHalf2x16(vw[u][e]);
            const uint i = 8 * u + 2 * e;
            acc[i] = acc[i] * a + pj * vv.x;
            acc[i + 1] = acc[i + 1] * a + pj * vv.y;
          }
        m = mn;
      }
      [[unroll]] for (uint u = 0; u < LU; ++u) {
        kw[u] = kn[u];
        vw[u] = vn[u];
      }
    }

    stamp(CLK_ATT_KEYS);

    // 3. The slots combined: each weighted by exp2(m - max), summed within
    // subgroups (lanes of one part) and then over them; by subgroups each one
    // scales by its own max and one barrier joins them.
    const bool by_sg = att_by_subgroups();
    const float big = by_sg ? subgroupMax(m) : wg_max(m), w = exp2(m - big);
    const float sum = by_sg ? subgroupAdd(c == 0 ? l * w : 0.0) : wg_add(c == 0 ? l * w : 0.0);
    [[unroll]] for (uint i = 0; i < DL; ++i) acc[i] *= w;
    for (uint o = 8; o < gl_SubgroupSize; o <<= 1)  // a round's shuffles independent of each other
      [[unroll]] for (uint i = 0; i < DL; ++i) acc[i] += subgroupShuffleXor(acc[i], o);
    if (by_sg) {
      // Rounds of ATT_RED_ROWS subgroups, the running total rescaled to the
      // running max.
      float top = -1e30, total = 0.0, den = 0.0;
      for (uint s0 = 0; s0 < gl_NumSubgroups; s0 += ATT_RED_ROWS) {
        const uint rows = min(ATT_RED_ROWS, gl_NumSubgroups - s0);
        const bool mine = gl_SubgroupID >= s0 && gl_SubgroupID < s0 + rows;
        if (mine && gl_SubgroupInvocationID < 8)
          [[unroll]] for (uint i = 0; i < DL; ++i) set_red((gl_SubgroupID - s0) * D + c * DL + i, acc[i]);
        if (mine && subgroupElect()) {
          sg_max[gl_SubgroupID - s0] = big;
          sg_sum[gl_SubgroupID - s0] = sum;
        }
        barrier();
        if (t < D) {
          float nt = top;
          for (uint r = 0; r < rows; ++r) nt = max(nt, sg_max[r]);
          const float keep = exp2(top - nt);
          total *= keep;
          den *= keep;
          for (uint r = 0; r < rows; ++r) {
            const float ws = exp2(sg_max[r] - nt);
            total += ws * red_at(r * D + t);
            den += ws * sg_sum[r];
          }
          top = nt;
        }
        // before the next round's or head's writes (the block's next writes
        // of xs and the sums follow a grid barrier)
        if (s0 + ATT_RED_ROWS < gl_NumSubgroups || h + p.grid < ATT_HEADS) barrier();
      }
      if (t < D) att1[h * D + t] = total / den;
      continue;
    }
    float total = 0.0;
    for (uint s0 = 0; s0 < gl_NumSubgroups; s0 += ATT_RED_ROWS) {
      if (gl_SubgroupID >= s0 && gl_SubgroupID < s0 + ATT_RED_ROWS && gl_SubgroupInvocationID < 8)
        [[unroll]] for (uint i = 0; i < DL; ++i) set_red((gl_SubgroupID - s0) * D + c * DL + i, acc[i]);
      barrier();
      if (t < D)
        for (uint r = 0; r < min(ATT_RED_ROWS, gl_NumSubgroups - s0); ++r) total += red_at(r * D + t);
      barrier();
    }
    if (t < D) att1[h * D + t] = total / sum;
  }
}
