#include "engine/forward/gpu_weights.h"

#include <chrono>
#include <cstdio>
#include <string>

namespace vkmoe {
namespace {

using vk::MemoryKind;

class ModelUploader {
 public:
  ModelUploader(vk::Context& ctx, uint64_t total, const char* what)
      : ctx_(ctx), up_(ctx, 64ull << 20, 4), total_(total), what_(what) {}
  ~ModelUploader() {
    if (shown_ >= 0 && !finished_) std::fputc('\n', stderr);  // end an interrupted progress line
  }

  GpuTensor tensor(const Weight& w, const std::string& what) {
    GpuTensor t;
    if (!w) return t;
    t.ncols = static_cast<uint32_t>(w.in());
    t.nrows = static_cast<uint32_t>(w.t->nrows());
    if (t.nrows == 1 && w.type() != GgmlType::F32) {  // norm / bias vectors are read as f32
      std::vector<float> v(t.ncols);
      dequantize_row(w.type(), w.t->data, v.data(), t.ncols);
      t.buf = ctx_.create_buffer((uint64_t(t.ncols) * 4 + 15) / 16 * 16, MemoryKind::Device, what);
      up_.enqueue(t.buf, 0, v.data(), uint64_t(t.ncols) * 4);
    } else {
      t.type = w.type();
      t.buf = ctx_.create_buffer((w.t->nbytes + 15) / 16 * 16, MemoryKind::Device, what);
      up_.enqueue(t.buf, 0, w.t->data, w.t->nbytes);
    }
    done_ += w.t->nbytes;
    const int pct = static_cast<int>(100 * done_ / std::max<uint64_t>(total_, 1));
    if (progress() && pct != shown_) std::fprintf(stderr, "\ruploading %s to VRAM: %3d%%", what_, shown_ = pct);
    return t;
  }

  void finish() {
    up_.flush().wait();
    finished_ = true;
    if (progress())
      std::fprintf(stderr, "\ruploading %s to VRAM: done, %.2f GiB in %.1f s\n", what_, done_ / double(1ull << 30),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  bool progress() const { return total_ > (256ull << 20); }
  vk::Context& ctx_;
  vk::Uploader up_;
  uint64_t total_, done_ = 0;
  const char* what_;
  int shown_ = -1;
  bool finished_ = false;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

uint64_t bytes_of(const Weight& w) { return w ? w.t->nbytes : 0; }

}  // namespace

GpuModel upload_model(vk::Context& ctx, const Model& m, uint64_t kv_bytes_per_layer) {
  const ModelConfig& c = m.config();
  uint64_t total = bytes_of(m.output_norm) + bytes_of(m.output);
  for (const LayerWeights& w : m.layers())
    for (const Weight* t : {&w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.bq, &w.bk, &w.bv, &w.q_norm, &w.k_norm,
                            &w.ffn_norm, &w.ffn_gate, &w.ffn_up, &w.ffn_down, &w.router, &w.shexp_gate,
                            &w.gate_shexp, &w.up_shexp, &w.down_shexp})
      total += bytes_of(*t);

  GpuModel g;  // declared first: on failure `up` waits for its copies before g's buffers are freed
  g.layers.resize(c.n_layer);
  ModelUploader up(ctx, total, "weights");
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerWeights& w = m.layers()[il];
    GpuLayer& l = g.layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    l.attn_norm = up.tensor(w.attn_norm, p + "attn_norm");
    l.wq = up.tensor(w.wq, p + "attn_q");
    l.wk = up.tensor(w.wk, p + "attn_k");
    l.wv = up.tensor(w.wv, p + "attn_v");
    l.wo = up.tensor(w.wo, p + "attn_output");
    l.bq = up.tensor(w.bq, p + "attn_q.bias");
    l.bk = up.tensor(w.bk, p + "attn_k.bias");
    l.bv = up.tensor(w.bv, p + "attn_v.bias");
    l.q_norm = up.tensor(w.q_norm, p + "attn_q_norm");
    l.k_norm = up.tensor(w.k_norm, p + "attn_k_norm");
    l.ffn_norm = up.tensor(w.ffn_norm, p + "ffn_norm");
    l.ffn_gate = up.tensor(w.ffn_gate, p + "ffn_gate");
    l.ffn_up = up.tensor(w.ffn_up, p + "ffn_up");
    l.ffn_down = up.tensor(w.ffn_down, p + "ffn_down");
    l.router = up.tensor(w.router, p + "ffn_gate_inp");
    l.shexp_gate = up.tensor(w.shexp_gate, p + "ffn_gate_inp_shexp");
    l.gate_shexp = up.tensor(w.gate_shexp, p + "ffn_gate_shexp");
    l.up_shexp = up.tensor(w.up_shexp, p + "ffn_up_shexp");
    l.down_shexp = up.tensor(w.down_shexp, p + "ffn_down_shexp");
    l.k_cache = ctx.create_buffer(kv_bytes_per_layer, MemoryKind::Device, p + "k cache");
    l.v_cache = ctx.create_buffer(kv_bytes_per_layer, MemoryKind::Device, p + "v cache");
  }
  g.output_norm = up.tensor(m.output_norm, "output_norm");
  g.output = up.tensor(m.output, "output");
  up.finish();
  return g;
}

void upload_experts(vk::Context& ctx, const Model& m, GpuModel& g) {
  uint64_t total = 0;
  for (const LayerWeights& w : m.layers()) total += bytes_of(w.gate_exps) + bytes_of(w.up_exps) + bytes_of(w.down_exps);
  try {
    ModelUploader up(ctx, total, "experts");
    for (size_t il = 0; il < g.layers.size(); ++il) {
      const LayerWeights& w = m.layers()[il];
      GpuLayer& l = g.layers[il];
      const std::string p = "blk." + std::to_string(il) + ".";
      l.gate_exps = up.tensor(w.gate_exps, p + "ffn_gate_exps");
      l.up_exps = up.tensor(w.up_exps, p + "ffn_up_exps");
      l.down_exps = up.tensor(w.down_exps, p + "ffn_down_exps");
    }
    up.finish();
  } catch (...) {  // `up` has waited for its copies
    for (GpuLayer& l : g.layers)
      for (GpuTensor* t : {&l.gate_exps, &l.up_exps, &l.down_exps}) *t = GpuTensor{};
    throw;
  }
}

}  // namespace vkmoe
