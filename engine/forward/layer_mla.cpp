// Multi-head latent attention (deepseek2), absorbed as llama.cpp and
// CpuForward::project_mla run it: the cached row of a position is [rotated
// rope key (R) | normalized latent (kv_lora)] = D values, shared by all heads
// (one kv head), and its latent doubles as the value.
#include "engine/forward/layer_program.h"
#include "engine/vulkan/vk_head_matmul.h"

namespace vkmoe {

void LayerProgram::project_mla(vk::Recorder& r, int il, uint32_t n) const {
  const GpuLayer& g = g_.layers[il];
  const ModelConfig::Mla& m = c_.mla;
  const uint32_t E = c_.n_embd, H = c_.n_head, R = c_.n_rot, D = c_.head_dim, QH = H * m.head_k;
  const uint32_t L = m.kv_lora, nope = m.head_k - R;
  const Rows xn(a_.xn, E), qh(a_.qh, QH);
  if (m.q_lora > 0) {
    const Rows qa(a_.qa, m.q_lora);
    ops_.linear(r, g.wq_a, xn, qa, n);
    r.barrier();
    ops_.rms_norm(r, qa, &g.q_a_norm, qa, m.q_lora, n, c_.norm_eps);
    r.barrier();
    ops_.linear(r, g.wq_b, qa, qh, n);
  } else {
    ops_.linear(r, g.wq, xn, qh, n);
  }
  ops_.linear(r, g.wkv_a, xn, Rows(a_.k, D), n);  // rows reordered at upload: [rope key | latent]
  r.barrier();
  mark_(r, "q / kv_a");
  ops_.rms_norm(r, Rows(a_.k, D, R), &g.kv_a_norm, Rows(a_.k, D, R), L, n, c_.norm_eps);
  // Query head h: [its rope part | attn_k_b[h] . its no-rope part].
  vk::HeadMatmulArgs hm;
  hm.type = g.wk_b.type;
  hm.rows = L;
  hm.cols = nope;
  hm.n_head = H;
  hm.n_tokens = n;
  hm.w = g.wk_b.buf;
  hm.x = a_.qh;
  hm.x_tok = QH;
  hm.x_head = m.head_k;
  hm.y = a_.q;
  hm.y_tok = H * D;
  hm.y_head = D;
  hm.y_off = R;
  vk::record_head_matmul(r, hm);
  hm.w = {};  // copy
  hm.rows = R;
  hm.x_off = nope;
  hm.y_off = 0;
  vk::record_head_matmul(r, hm);
  r.barrier();
  mark_(r, "kv norm / q absorb");
}

void LayerProgram::expand_mla(vk::Recorder& r, int il, uint32_t n) const {
  const GpuLayer& g = g_.layers[il];
  const ModelConfig::Mla& m = c_.mla;
  const uint32_t H = c_.n_head, D = c_.head_dim;
  vk::HeadMatmulArgs hm;
  hm.type = g.wv_b.type;
  hm.rows = m.head_v;
  hm.cols = m.kv_lora;
  hm.n_head = H;
  hm.n_tokens = n;
  hm.w = g.wv_b.buf;
  hm.x = a_.att;
  hm.x_tok = H * D;
  hm.x_head = D;
  hm.x_off = c_.n_rot;
  hm.y = a_.ao;
  hm.y_tok = H * m.head_v;
  hm.y_head = m.head_v;
  vk::record_head_matmul(r, hm);
  r.barrier();
  mark_(r, "latent expand");
}

}  // namespace vkmoe
