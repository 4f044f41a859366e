#pragma once
// Per-head matrix products (shaders/head_matmul.comp): latent attention's
// attn_k_b (queries into latent space) and attn_v_b (latent outputs back).
#include <cstdint>

#include "cpu/quant.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

// For head h < n_head, token t < n_tokens, row r < rows:
//   y[t*y_tok + h*y_head + y_off + r] = W_h[r] . x[t*x_tok + h*x_head + x_off + (0..cols)]
// W: n_head stacked matrices of rows x cols (ggml layout, type `type`; cols
// a multiple of 16 and of the block). An empty w copies instead:
// y[...+ r] = x[...+ r] for r < rows (cols unused). Offsets and strides in floats.
struct HeadMatmulArgs {
  GgmlType type = GgmlType::F32;
  uint32_t rows = 0, cols = 0, n_head = 0, n_tokens = 0;
  BufferRange w, x, y;
  uint32_t x_off = 0, x_tok = 0, x_head = 0;
  uint32_t y_off = 0, y_tok = 0, y_head = 0;
};
void record_head_matmul(Recorder& rec, const HeadMatmulArgs& a);

}  // namespace vkmoe::vk
