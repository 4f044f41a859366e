#version 450
// y[i] += alpha * x[i] over `items` vectors of n values (x item stride n, y shared):
// alpha = scale * (mode 0: 1, mode 1: a[a_off + item], mode 2: sigmoid(a[a_off + item])).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n, items, x_off, a_off, y_off, mode;
  float scale;
} p;
void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  float acc = 0.0;
  for (uint j = 0; j < p.items; ++j) {
    float alpha = p.scale;
    if (p.mode == 1) alpha *= a[p.a_off + j];
    else if (p.mode == 2) alpha *= 1.0 / (1.0 + exp(-a[p.a_off + j]));
    acc += alpha * x[p.x_off + j * p.n + i];
  }
  y[p.y_off + i] += acc;
}
