#version 450
// Adds the partial planes of a split-K GEMM (gemm_coopmat.comp with k_split):
// Y[n][r] = (accumulate ? Y[n][r] : 0) + sum_z P[z][n][r], the planes of
// n_tokens x nrows floats `plane` apart, in a fixed order (deterministic).
layout(local_size_x = 256) in;
layout(std430, binding = 0) restrict readonly buffer P { float part[]; };
layout(std430, binding = 1) restrict buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint nrows, n_tokens, splits, plane;
  uint y_offset, y_stride, accumulate;
} p;

void main() {
  const uint r = gl_GlobalInvocationID.x, n = gl_WorkGroupID.y;
  if (r >= p.nrows) return;
  float sum = 0.0;
  for (uint z = 0; z < p.splits; ++z) sum += part[z * p.plane + n * p.nrows + r];
  const uint yi = p.y_offset + n * p.y_stride + r;
  y[yi] = p.accumulate != 0 ? y[yi] + sum : sum;
}
