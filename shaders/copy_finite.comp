#version 450
// dst[i] = src[i] for i < n (a token's logits into host-visible memory), and
// flag[word] |= 1 where any of them is NaN or infinite, so the host need not
// read them all to check.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer S { float src[]; };
layout(std430, binding = 1) writeonly buffer D { float dst[]; };
layout(std430, binding = 2) buffer F { uint flag[]; };
layout(push_constant) uniform P { uint n, word; } p;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  const float v = src[i];
  dst[i] = v;
  if (isnan(v) || isinf(v)) atomicOr(flag[p.word], 1u);  // rare: no vote needed
}
