#version 450
// y[y_off + t*y_stride + i] += alpha(t) * x[x_off + t*x_stride + i]  for i < n, t < rows
// alpha: mode 0: 1, mode 1: a[a_off + t], mode 2: sigmoid(a[a_off + t]).
// x_stride 0 broadcasts one x row (biases) over every y row.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n, rows, x_off, x_stride, a_off, y_off, y_stride, mode;
} p;
void main() {
  const uint i = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
  if (i >= p.n || t >= p.rows) return;
  float alpha = 1.0;
  if (p.mode == 1) alpha = a[p.a_off + t];
  else if (p.mode == 2) alpha = 1.0 / (1.0 + exp(-a[p.a_off + t]));
  y[p.y_off + t * p.y_stride + i] += alpha * x[p.x_off + t * p.x_stride + i];
}
