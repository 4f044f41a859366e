// Router top-k of one token's logits, shared by moe_topk_batch.comp (one
// workgroup per token) and the fused router matvec (matvec.comp with
// TAIL_TOPK: its last workgroup). cpu/moe_route.h's route_topk (softmax /
// sigmoid / softmax over the selected, selection bias, group-limited
// selection, renormalization, scale). NaN logits and scores read as -inf;
// p(l) = exp(l - max), and exactly 1 where l == max, so rows of -inf or with
// +inf still give finite weights.
// Thread t owns experts t, t + TK_WG, ... and keeps its best unchosen one; each
// of the k rounds reduces the owners' bests (subgroup ops when SUBGROUP=1,
// else a shared-memory tree) and only the winner's owner rescans.
// The includer defines: TK_WG_MAX (shared array bound, >= the workgroup
// size, a power of two), TK_LOGIT(i) (logit i), TK_BIAS(e), TK_SET_ID(j, e),
// TK_SET_WEIGHT(j, w), and TK_* parameters: N_EXPERT (<= 32 * workgroup size,
// <= 1024), K (<= 64), NORMALIZE, GATING (Gating of moe_route.h), HAS_BIAS,
// N_GROUP (<= 64), TOPK_GROUP, SCALE; optionally TK_SUM_LANES(v, P) (a uint
// summed over aligned groups of P lanes, P a power of 2 within a subgroup),
// with which several invocations count one expert's rank.
#define TK_WG gl_WorkGroupSize.x
const uint SOFTMAX = 0, SIGMOID = 1, SOFTMAX_WEIGHT = 2;

const uint NONE = 0xffffffffu;
#define NEG_INF uintBitsToFloat(0xff800000u)
shared float lv[1024];  // sanitized logits (n_expert <= 1024)
shared float sv[1024];  // selection scores; written by e's owner only
shared float pw[64];    // chosen experts' probs (SoftmaxWeight: logits) (k <= 64)
shared float gs[64];    // group scores (n_group <= 64)
shared bool keep[64];
// Reduction scratch in two halves, alternated between calls so that one
// barrier per call separates a call's reads from the next call's writes.
shared float red_v[2 * TK_WG_MAX];
shared uint red_i[2 * TK_WG_MAX];
uint half_base = 0;

bool better(float v, uint i, float ov, uint oi) { return v > ov || (v == ov && i < oi); }

// The best (value, index) over the workgroup, in every invocation.
void reduce_best(inout float v, inout uint i) {
  const uint h = half_base;
  half_base ^= TK_WG;
#if SUBGROUP
  const float m = subgroupMax(v);
  const uint mi = subgroupMin(v == m ? i : NONE);
  if (subgroupElect()) { red_v[h + gl_SubgroupID] = m; red_i[h + gl_SubgroupID] = mi; }
  barrier();
  v = red_v[h];
  i = red_i[h];
  for (uint s = 1; s < gl_NumSubgroups; ++s)
    if (better(red_v[h + s], red_i[h + s], v, i)) { v = red_v[h + s]; i = red_i[h + s]; }
#else
  const uint t = gl_LocalInvocationID.x;
  red_v[h + t] = v;
  red_i[h + t] = i;
  barrier();
  for (uint s = TK_WG / 2; s > 0; s >>= 1) {
    if (t < s && better(red_v[h + t + s], red_i[h + t + s], red_v[h + t], red_i[h + t])) {
      red_v[h + t] = red_v[h + t + s];
      red_i[h + t] = red_i[h + t + s];
    }
    barrier();
  }
  v = red_v[h];
  i = red_i[h];
#endif
}

// Sum (op 0) or max (op 1) over the workgroup, in every invocation; the
// order of additions is fixed, so results are deterministic.
float reduce_float(float v, uint op) {
  const uint h = half_base;
  half_base ^= TK_WG;
#if SUBGROUP
  const float r = op == 0 ? subgroupAdd(v) : subgroupMax(v);
  if (subgroupElect()) red_v[h + gl_SubgroupID] = r;
  barrier();
  float acc = red_v[h];
  for (uint s = 1; s < gl_NumSubgroups; ++s) acc = op == 0 ? acc + red_v[h + s] : max(acc, red_v[h + s]);
  return acc;
#else
  const uint t = gl_LocalInvocationID.x;
  red_v[h + t] = v;
  barrier();
  for (uint s = TK_WG / 2; s > 0; s >>= 1) {
    if (t < s) red_v[h + t] = op == 0 ? red_v[h + t] + red_v[h + t + s] : max(red_v[h + t], red_v[h + t + s]);
    barrier();
  }
  return red_v[h];
#endif
}

float prob(float l, float mx) { return l == mx ? 1.0 : exp(l - mx); }
float no_nan(float x) { return isnan(x) ? NEG_INF : x; }
// The unbiased prob of logit l (Softmax: unnormalized; SoftmaxWeight: l).
float gate(float l, float mx) {
  return TK_GATING == SOFTMAX ? prob(l, mx) : TK_GATING == SIGMOID ? 1.0 / (1.0 + exp(-l)) : l;
}

// This invocation's best expert not in `taken` (bit r: expert t + r * TK_WG).
void local_best(uint taken, out float bv, out uint bi) {
  bv = NEG_INF;
  bi = NONE;
  uint r = 0;
  for (uint e = gl_LocalInvocationID.x; e < TK_N_EXPERT; e += TK_WG, ++r)
    if ((taken & (1u << r)) == 0u && better(sv[e], e, bv, bi)) { bv = sv[e]; bi = e; }
}

// Writes TK_SET_WEIGHT(j, w) for j < TK_K, as route_topk: Softmax divides by
// the sum over all experts, or max(sum over the k, clamp * that) when
// normalize. pw[j] holds the j-th chosen expert's gate(l, mx), or with
// logits its logit l (largest first); SoftmaxWeight's gate is l itself.
void set_topk_weights(float mx, float sum, bool logits) {
  const float clamp_sum = 6.103515625e-5;
  const bool sw = TK_GATING == SOFTMAX_WEIGHT;
  float m = NEG_INF, sel = 0.0;
  if (sw)
    for (uint j = 0; j < TK_K; ++j) m = max(m, pw[j]);
  for (uint j = 0; j < TK_K; ++j) sel += sw ? prob(pw[j], m) : logits ? gate(pw[j], mx) : pw[j];
  float denom = TK_GATING == SOFTMAX ? sum : 1.0;
  if (sw && TK_NORMALIZE != 0) {  // the softmax's own sum, as llama.cpp divides by it
    float s2 = 0.0;
    for (uint j = 0; j < TK_K; ++j) s2 += prob(pw[j], m) / sel;
    denom = max(s2, clamp_sum);
  } else if (TK_NORMALIZE != 0) {
    denom = max(sel, clamp_sum * denom);
  }
  const float scale = TK_SCALE != 0.0 ? TK_SCALE : 1.0;
  for (uint j = gl_LocalInvocationID.x; j < TK_K; j += TK_WG) {
    const float w = sw ? prob(pw[j], m) / sel : logits ? gate(pw[j], mx) : pw[j];
    TK_SET_WEIGHT(j, w / denom * scale);
  }
}

// route_topk where experts are chosen by logit alone (no bias, no groups),
// each invocation holds at most one, and no weight needs the softmax over all
// experts (all gatings but an unnormalized softmax: route_topk's normalized
// softmax divides by max(sel, clamp_sum * sum), and sel >= 1 > clamp_sum *
// n_expert). Each expert counts those ranked before it (value, then index, the
// rounds' order) and the first k write themselves; each weight then comes
// from the k logits. The same results as the rounds with far fewer steps and
// less code, which in place cost more than their isolated time (docs/PERF.md
// run 25). False where it does not apply.
bool route_topk_by_logit(uint base) {
  if (TK_N_EXPERT > TK_WG || TK_HAS_BIAS != 0 || TK_N_GROUP > 1 || (TK_GATING == SOFTMAX && TK_NORMALIZE == 0))
    return false;
  const uint t = gl_LocalInvocationID.x;
  const float l = t < TK_N_EXPERT ? no_nan(TK_LOGIT(base + t)) : NEG_INF;
  lv[t] = l;
  barrier();
  // P invocations per expert e, each comparing every P-th other expert (P = 1
  // without TK_SUM_LANES).
#ifdef TK_SUM_LANES
  const uint P = min(gl_SubgroupSize, 1u << findMSB(max(1u, TK_WG / TK_N_EXPERT)));
#else
  const uint P = 1;
#endif
  const uint e = t / P;
  uint rank = 0;
  if (e < TK_N_EXPERT) {
    const float le = lv[e];
    for (uint o = t % P; o < TK_N_EXPERT; o += P) rank += better(lv[o], o, le, e) ? 1u : 0u;
  }
#ifdef TK_SUM_LANES
  rank = TK_SUM_LANES(rank, P);
#endif
  if (e < TK_N_EXPERT && t % P == 0 && rank < TK_K) {
    TK_SET_ID(rank, e);
    pw[rank] = lv[e];
  }
  barrier();
  // pw[0] is the largest logit of all; a normalized softmax's sum over all
  // experts cannot change its weights, so none is passed.
  set_topk_weights(pw[0], 0.0, true);
  return true;
}

// Routes the logits TK_LOGIT(base + e), e < TK_N_EXPERT: writes TK_SET_ID(j, e)
// and TK_SET_WEIGHT(j, w) for j < TK_K. Every invocation of the workgroup calls it.
void route_topk(uint base) {
  if (route_topk_by_logit(base)) return;
  const uint t = gl_LocalInvocationID.x;
  float mx = NEG_INF;
  for (uint e = t; e < TK_N_EXPERT; e += TK_WG) {
    const float l = no_nan(TK_LOGIT(base + e));
    lv[e] = l;
    mx = max(mx, l);
  }
  mx = reduce_float(mx, 1);
  float sum = 0.0;
  if (TK_GATING == SOFTMAX)
    for (uint e = t; e < TK_N_EXPERT; e += TK_WG) sum += prob(lv[e], mx);
  sum = reduce_float(sum, 0);
  // Selection scores: prob + bias, or (no bias nor groups) the logits, in the same order.
  const bool values = TK_HAS_BIAS != 0 || TK_N_GROUP > 1;
  for (uint e = t; e < TK_N_EXPERT; e += TK_WG) {
    const float pr = TK_GATING == SOFTMAX ? prob(lv[e], mx) / sum : gate(lv[e], mx);
    sv[e] = values ? no_nan(pr + (TK_HAS_BIAS != 0 ? TK_BIAS(e) : 0.0)) : lv[e];
  }
  if (TK_N_GROUP > 1) {  // keep the topk_group groups of the best sums of 2 best scores
    barrier();
    const uint per = TK_N_EXPERT / TK_N_GROUP;
    if (t < TK_N_GROUP) {
      float b1 = NEG_INF, b2 = NEG_INF;
      for (uint e = t * per; e < (t + 1) * per; ++e) {
        const float x = sv[e];
        if (x > b1) { b2 = b1; b1 = x; } else if (x > b2) b2 = x;
      }
      gs[t] = per > 1 ? no_nan(b1 + b2) : b1;
    }
    barrier();
    if (t < TK_N_GROUP) {
      uint rank = 0;
      for (uint o = 0; o < TK_N_GROUP; ++o) rank += better(gs[o], o, gs[t], t) ? 1 : 0;
      keep[t] = rank < TK_TOPK_GROUP;
    }
    barrier();
    for (uint e = t; e < TK_N_EXPERT; e += TK_WG)
      if (!keep[e / per]) sv[e] = NEG_INF;
  }

  uint taken = 0;
  float bv;
  uint bi;
  local_best(taken, bv, bi);
  for (uint j = 0; j < TK_K; ++j) {
    float v = bv;
    uint i = bi;
    reduce_best(v, i);  // k <= n_expert: i is a valid unchosen expert
    if (i % TK_WG == t) {
      taken |= 1u << (i / TK_WG);
      local_best(taken, bv, bi);
    }
    if (t == 0) {
      TK_SET_ID(j, i);
      pw[j] = gate(lv[i], mx);
    }
  }
  barrier();
  set_topk_weights(mx, sum, false);
}
