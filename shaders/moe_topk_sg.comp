#version 450
// Router top-k with subgroup operations: one subgroup does the whole job
// (softmax over n_expert logits, k argmax rounds, lower index wins ties).
// Same results as moe_topk.comp; used when subgroup arithmetic is available.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) writeonly buffer I { int ids[]; };
layout(std430, binding = 2) writeonly buffer W { float weights[]; };
layout(push_constant) uniform P { uint n_expert, k, normalize, l_off; } p;
shared float pw[64];  // k <= 64
void main() {
  if (gl_SubgroupID != 0) return;
  const uint lane = gl_SubgroupInvocationID, S = gl_SubgroupSize;
  float mx = -3.4e38;
  for (uint e = lane; e < p.n_expert; e += S) mx = max(mx, logits[p.l_off + e]);
  mx = subgroupMax(mx);
  float sum = 0.0;
  for (uint e = lane; e < p.n_expert; e += S) sum += exp(logits[p.l_off + e] - mx);
  sum = subgroupAdd(sum);
  uint taken[4] = uint[4](0u, 0u, 0u, 0u);  // bit i: expert lane + i*S chosen (n_expert/S <= 128)
  float sel = 0.0;
  for (uint j = 0; j < p.k; ++j) {
    float best = -3.4e38;
    uint besti = 0xffffffffu;
    uint i = 0;
    for (uint e = lane; e < p.n_expert; e += S, ++i) {
      const float l = logits[p.l_off + e];
      if ((taken[i >> 5] & (1u << (i & 31u))) == 0u && (l > best || (l == best && e < besti))) {
        best = l;
        besti = e;
      }
    }
    const float bv = subgroupMax(best);
    const uint bi = subgroupMin(best == bv ? besti : 0xffffffffu);
    if (bi % S == lane) {
      const uint bit = bi / S;
      taken[bit >> 5] |= 1u << (bit & 31u);
    }
    const float pe = exp(bv - mx);
    sel += pe;
    if (lane == 0) {
      ids[j] = int(bi);
      pw[j] = pe;
    }
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  const float denom = p.normalize != 0 ? sel : sum;
  for (uint j = lane; j < p.k; j += S) weights[j] = pw[j] / denom;
}
