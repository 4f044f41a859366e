#version 450
// Router: softmax over n_expert logits, top-k (lower index wins ties),
// optional renormalization. Writes k expert ids and k weights.
#define WG 256
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) writeonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer W { float weights[]; };
layout(push_constant) uniform P { uint n_expert, k, normalize, l_off; } p;
shared float val[WG];
shared uint arg[WG];
shared float taken[1024];  // n_expert <= 1024
shared float pw[64];        // k <= 64
#include "reduce.glsl"
void main() {
  const uint t = gl_LocalInvocationID.x;
  float mx = -3.4e38;
  for (uint e = t; e < p.n_expert; e += WG) { mx = max(mx, logits[p.l_off + e]); taken[e] = 0.0; }
  mx = wg_max(mx);
  float sum = 0.0;
  for (uint e = t; e < p.n_expert; e += WG) sum += exp(logits[p.l_off + e] - mx);
  sum = wg_sum(sum);
  float sel = 0.0;
  for (uint j = 0; j < p.k; ++j) {
    float best = -3.4e38;
    uint besti = 0xffffffffu;
    for (uint e = t; e < p.n_expert; e += WG) {
      const float l = logits[p.l_off + e];
      if (taken[e] == 0.0 && (l > best || (l == best && e < besti))) { best = l; besti = e; }
    }
    val[t] = best; arg[t] = besti;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
      if (t < s) {
        const float ov = val[t + s]; const uint oa = arg[t + s];
        if (ov > val[t] || (ov == val[t] && oa < arg[t])) { val[t] = ov; arg[t] = oa; }
      }
      barrier();
    }
    const uint e = arg[0];
    const float pe = exp(val[0] - mx);
    if (t == 0) { ids[j] = int(e); pw[j] = pe; taken[e] = 1.0; }
    sel += pe;
    barrier();
  }
  const float denom = p.normalize != 0 ? sel : sum;
  if (t < p.k) weights[t] = pw[t] / denom;
}
