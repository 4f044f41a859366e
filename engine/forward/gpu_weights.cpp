#include "engine/forward/gpu_weights.h"

#include <string>

#include "base/progress.h"
#include "cpu/thread_pool.h"

namespace vkmoe {
namespace {

using vk::MemoryKind;

vk::Uploader::CopyFn staging_copy(ThreadPool* pool) {
  if (!pool) return {};
  return [pool](void* dst, const void* src, uint64_t bytes) { parallel_memcpy(pool, dst, src, bytes); };
}

class ModelUploader {
 public:
  ModelUploader(vk::Context& ctx, uint64_t total, const char* what, ThreadPool* pool)
      : ctx_(ctx),
        up_(ctx, 128ull << 20, 4, staging_copy(pool)),
        progress_(std::string("uploading ") + what + " to VRAM", total, 256ull << 20) {}

  // as_f32: a table of vectors (per-expert biases) the GPU reads as f32 rows.
  // rows_first: that many last rows go first (quantized rows are independent bytes).
  GpuTensor tensor(const Weight& w, const std::string& what, bool as_f32 = false, uint32_t rows_first = 0) {
    GpuTensor t;
    if (!w) return t;
    t.ncols = static_cast<uint32_t>(w.in());
    t.nrows = static_cast<uint32_t>(w.t->nrows());
    if ((t.nrows == 1 || as_f32) && w.type() != GgmlType::F32) {  // norm / bias vectors are read as f32
      const uint64_t count = uint64_t(t.ncols) * t.nrows;
      std::vector<float> v(count);
      for (uint32_t r = 0; r < t.nrows; ++r) dequantize_row(w.type(), w.row(r), v.data() + uint64_t(r) * t.ncols, t.ncols);
      t.buf = ctx_.create_buffer((count * 4 + 15) / 16 * 16, MemoryKind::Device, what);
      up_.enqueue(t.buf, 0, v.data(), count * 4);
    } else {
      t.type = w.type();
      t.buf = ctx_.create_buffer((w.t->nbytes + 15) / 16 * 16, MemoryKind::Device, what);
      const uint64_t tail = uint64_t(rows_first) * row_bytes(w.type(), t.ncols), head = w.t->nbytes - tail;
      if (tail > 0) up_.enqueue(t.buf, 0, static_cast<const uint8_t*>(w.t->data) + head, tail);
      up_.enqueue(t.buf, tail, w.t->data, head);
    }
    progress_.advance(w.t->nbytes);
    return t;
  }

  void finish() {
    up_.flush().wait();
    progress_.finish();
  }

 private:
  vk::Context& ctx_;
  vk::Uploader up_;
  ProgressLine progress_;
};

uint64_t bytes_of(const Weight& w) { return w ? w.t->nbytes : 0; }

// A per-layer tensor: where it is in the model, where it goes, its name after "blk.N.".
struct LayerTensor {
  Weight LayerWeights::*src;
  GpuTensor GpuLayer::*dst;
  const char* name;
  bool as_f32 = false;  // every row as f32 (bias tables), whatever the file's type
  bool rope_rows_first = false;  // wkv_a: its last n_rot rows (the rope key) first
};
constexpr LayerTensor kTrunkTensors[] = {
    {&LayerWeights::attn_norm, &GpuLayer::attn_norm, "attn_norm"},
    {&LayerWeights::wq, &GpuLayer::wq, "attn_q"},
    {&LayerWeights::wk, &GpuLayer::wk, "attn_k"},
    {&LayerWeights::wv, &GpuLayer::wv, "attn_v"},
    {&LayerWeights::wo, &GpuLayer::wo, "attn_output"},
    {&LayerWeights::bq, &GpuLayer::bq, "attn_q.bias"},
    {&LayerWeights::bk, &GpuLayer::bk, "attn_k.bias"},
    {&LayerWeights::bv, &GpuLayer::bv, "attn_v.bias"},
    {&LayerWeights::bo, &GpuLayer::bo, "attn_output.bias"},
    {&LayerWeights::attn_sinks, &GpuLayer::attn_sinks, "attn_sinks"},
    {&LayerWeights::q_norm, &GpuLayer::q_norm, "attn_q_norm"},
    {&LayerWeights::k_norm, &GpuLayer::k_norm, "attn_k_norm"},
    {&LayerWeights::wq_a, &GpuLayer::wq_a, "attn_q_a"},
    {&LayerWeights::q_a_norm, &GpuLayer::q_a_norm, "attn_q_a_norm"},
    {&LayerWeights::wq_b, &GpuLayer::wq_b, "attn_q_b"},
    {&LayerWeights::wkv_a, &GpuLayer::wkv_a, "attn_kv_a_mqa", false, true},
    {&LayerWeights::kv_a_norm, &GpuLayer::kv_a_norm, "attn_kv_a_norm"},
    {&LayerWeights::wk_b, &GpuLayer::wk_b, "attn_k_b"},
    {&LayerWeights::wv_b, &GpuLayer::wv_b, "attn_v_b"},
    {&LayerWeights::ffn_norm, &GpuLayer::ffn_norm, "ffn_norm"},
    {&LayerWeights::ffn_gate, &GpuLayer::ffn_gate, "ffn_gate"},
    {&LayerWeights::ffn_up, &GpuLayer::ffn_up, "ffn_up"},
    {&LayerWeights::ffn_down, &GpuLayer::ffn_down, "ffn_down"},
    {&LayerWeights::router, &GpuLayer::router, "ffn_gate_inp"},
    {&LayerWeights::router_b, &GpuLayer::router_b, "ffn_gate_inp.bias"},
    {&LayerWeights::exp_probs_b, &GpuLayer::exp_probs_b, "exp_probs_b"},
    {&LayerWeights::gate_exps_b, &GpuLayer::gate_exps_b, "ffn_gate_exps.bias", true},
    {&LayerWeights::up_exps_b, &GpuLayer::up_exps_b, "ffn_up_exps.bias", true},
    {&LayerWeights::down_exps_b, &GpuLayer::down_exps_b, "ffn_down_exps.bias", true},
    {&LayerWeights::shexp_gate, &GpuLayer::shexp_gate, "ffn_gate_inp_shexp"},
    {&LayerWeights::gate_shexp, &GpuLayer::gate_shexp, "ffn_gate_shexp"},
    {&LayerWeights::up_shexp, &GpuLayer::up_shexp, "ffn_up_shexp"},
    {&LayerWeights::down_shexp, &GpuLayer::down_shexp, "ffn_down_shexp"},
};
constexpr LayerTensor kExpertTensors[] = {
    {&LayerWeights::gate_exps, &GpuLayer::gate_exps, "ffn_gate_exps"},
    {&LayerWeights::up_exps, &GpuLayer::up_exps, "ffn_up_exps"},
    {&LayerWeights::down_exps, &GpuLayer::down_exps, "ffn_down_exps"},
};

template <size_t N>
uint64_t layer_bytes(const Model& m, const LayerTensor (&table)[N]) {
  uint64_t total = 0;
  for (const LayerWeights& w : m.layers())
    for (const LayerTensor& t : table) total += bytes_of(w.*t.src);
  return total;
}

// Uploads layer il's tensors of `table` into l.
template <size_t N>
void upload_layer(ModelUploader& up, const LayerWeights& w, int il, GpuLayer& l, const LayerTensor (&table)[N],
                  uint32_t n_rot) {
  const std::string p = "blk." + std::to_string(il) + ".";
  for (const LayerTensor& t : table)
    l.*t.dst = up.tensor(w.*t.src, p + t.name, t.as_f32, t.rope_rows_first ? n_rot : 0);
}

}  // namespace

GpuModel upload_model(vk::Context& ctx, const Model& m, uint64_t kv_bytes_per_layer, ThreadPool* pool) {
  const ModelConfig& c = m.config();
  const uint64_t total = bytes_of(m.output_norm) + bytes_of(m.output) + layer_bytes(m, kTrunkTensors);

  GpuModel g;  // declared first: on failure `up` waits for its copies before g's buffers are freed
  g.layers.resize(c.n_layer);
  ModelUploader up(ctx, total, "weights", pool);
  for (int il = 0; il < c.n_layer; ++il) {
    GpuLayer& l = g.layers[il];
    upload_layer(up, m.layers()[il], il, l, kTrunkTensors, uint32_t(c.n_rot));
    const std::string p = "blk." + std::to_string(il) + ".";
    l.k_cache = ctx.create_buffer(kv_bytes_per_layer, MemoryKind::Device, p + "k cache");
    if (!m.layers()[il].spec.mla) l.v_cache = ctx.create_buffer(kv_bytes_per_layer, MemoryKind::Device, p + "v cache");
  }
  g.output_norm = up.tensor(m.output_norm, "output_norm");
  g.output = up.tensor(m.output, "output");
  up.finish();
  return g;
}

void upload_experts(vk::Context& ctx, const Model& m, GpuModel& g, ThreadPool* pool) {
  try {
    ModelUploader up(ctx, layer_bytes(m, kExpertTensors), "experts", pool);
    for (size_t il = 0; il < g.layers.size(); ++il)
      upload_layer(up, m.layers()[il], int(il), g.layers[il], kExpertTensors, 0);
    up.finish();
  } catch (...) {  // `up` has waited for its copies
    for (GpuLayer& l : g.layers)
      for (const LayerTensor& t : kExpertTensors) l.*t.dst = GpuTensor{};
    throw;
  }
}

}  // namespace vkmoe
