#version 450
// Per-head products (latent attention's attn_k_b and attn_v_b): for head
// h < n_head and token t < n_tokens, row r < rows,
//   y[t*y_tok + h*y_head + y_off + r] = W_h[r] . x[t*x_tok + h*x_head + x_off + (0..cols)]
// with W_h the h-th of n_head stacked rows x cols matrices (ggml rows of
// WTYPE, w_head load units apart; cols a multiple of 16 and of the block).
// copy != 0: y = x element r instead (no weights read).
// A workgroup owns RPW rows of one head for up to NT tokens: TPR lanes per
// row share its 16-element chunks, each decoded once for all NT tokens.
#extension GL_EXT_control_flow_attributes : require

#include "wtype.glsl"
#include "wchunk.glsl"

#define WG 64
#define TPR 8
#define RPW (WG / TPR)
#define NT 4
layout(local_size_x = WG) in;
layout(set = 0, binding = 1) readonly buffer X { float x[]; };
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };
// Must match HeadMatmulPush in engine/vulkan/vk_head_matmul.cpp.
layout(push_constant) uniform P {
  uint rows, cols, n_tokens, w_head;
  uint x_off, x_tok, x_head, y_off;
  uint y_tok, y_head, copy;
} p;

shared float red[NT * WG];

void main() {
  const uint tid = gl_LocalInvocationID.x, lane = tid % TPR, h = gl_WorkGroupID.y, t0 = gl_WorkGroupID.z * NT;
  const uint r = gl_WorkGroupID.x * RPW + tid / TPR;
  const uint nt = min(NT, p.n_tokens - t0);
  if (p.copy != 0) {
    if (lane == 0 && r < p.rows)
      for (uint k = 0; k < nt; ++k)
        y[(t0 + k) * p.y_tok + h * p.y_head + p.y_off + r] = x[(t0 + k) * p.x_tok + h * p.x_head + p.x_off + r];
    return;
  }
  float acc[NT];
  [[unroll]] for (uint k = 0; k < NT; ++k) acc[k] = 0.0;
  if (r < p.rows) {
    const uint rb = h * p.w_head + r * (p.cols / QK * BU);
    for (uint c = lane; c < p.cols / 16; c += TPR) {
      const Raw w = fetch_w(rb, 16 * c);
      float wv[16];
      [[unroll]] for (uint t = 0; t < 16; ++t) wv[t] = dequant(w, 16 * c, t);
      [[unroll]] for (uint k = 0; k < NT; ++k) {
        if (k >= nt) break;
        const uint xb = (t0 + k) * p.x_tok + h * p.x_head + p.x_off + 16 * c;
        float s = 0.0;
        [[unroll]] for (uint t = 0; t < 16; ++t) s = fma(wv[t], x[xb + t], s);
        acc[k] += s;
      }
    }
  }
  [[unroll]] for (uint k = 0; k < NT; ++k) red[k * WG + tid] = acc[k];
  barrier();
  [[unroll]] for (uint s = TPR / 2; s > 0; s >>= 1) {
    if (lane < s)
      [[unroll]] for (uint k = 0; k < NT; ++k) red[k * WG + tid] += red[k * WG + tid + s];
    barrier();
  }
  if (lane == 0 && r < p.rows)
    for (uint k = 0; k < nt; ++k) y[(t0 + k) * p.y_tok + h * p.y_head + p.y_off + r] = red[k * WG + tid];
}
