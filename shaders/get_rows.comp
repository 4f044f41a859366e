#version 450
// Token rows of the embedding table decoded on the GPU: row t of y (y_stride
// floats apart) is raw row t (ggml rows of WTYPE, cols elements each, packed
// one after another: rows the host copied out of the mapped file), cols a
// multiple of 16. One workgroup a row, one 16-element chunk per invocation
// and step.
#extension GL_EXT_control_flow_attributes : require

#include "wtype.glsl"
#include "wchunk.glsl"

layout(local_size_x = 128) in;
layout(set = 0, binding = 1) writeonly buffer Y4 { vec4 y4[]; };
// Must match GetRowsPush in engine/forward/gpu_engine.cpp.
layout(push_constant) uniform P {
  uint cols, y_stride;  // y_stride: a multiple of 4
} p;

void main() {
  const uint row = gl_WorkGroupID.x, rb = row * (p.cols / QK * BU), yb = row * p.y_stride / 4;
  for (uint c = gl_LocalInvocationID.x; c < p.cols / 16; c += gl_WorkGroupSize.x) {
    const Raw w = fetch_w(rb, 16 * c);
    [[unroll]] for (uint i = 0; i < 4; ++i)
      y4[yb + 4 * c + i] = vec4(dequant(w, 16 * c, 4 * i), dequant(w, 16 * c, 4 * i + 1),
                                dequant(w, 16 * c, 4 * i + 2), dequant(w, 16 * c, 4 * i + 3));
  }
}
