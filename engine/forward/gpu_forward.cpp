#include "engine/forward/gpu_forward.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <sstream>

#include "cpu/expert_ffn.h"
#include "cpu/moe_route.h"
#include "cpu/thread_pool.h"
#include "engine/offload/plan_model.h"
#include "engine/offload/route_stats.h"
#include "engine/offload/slru_policy.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {
namespace {

using vk::Buffer;
using vk::MemoryKind;
using vk::Recorder;

struct RmsNormPush {
  uint32_t n, x_off, w_off, y_off, row_stride, has_w;
  float eps;
};
struct QkNormRopePush {
  uint32_t head_dim, n_head, q_off, k_off, pos, neox, norm;
  float theta, eps;
};
struct AttentionPush {
  uint32_t head_dim, n_head, n_head_kv, n_kv, q_off, k_off, v_off, o_off, s_stride;
  float scale;
};
struct AxpyPush {
  uint32_t n, items, x_off, a_off, y_off, mode;
  float scale;
};
struct SwigluPush {
  uint32_t n, g_off, u_off;
};
struct CombineNormPush {
  uint32_t n, items;
  float eps;
};
struct TopkPush {
  uint32_t n_expert, k, normalize, l_off;
};

uint32_t div_up(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// A weight matrix (or vector: nrows 1) in VRAM.
struct GpuTensor {
  Buffer buf;
  GgmlType type = GgmlType::F32;
  uint32_t ncols = 0, nrows = 0;
  explicit operator bool() const { return static_cast<bool>(buf); }
};

struct GpuLayer {
  GpuTensor attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm;
  GpuTensor ffn_gate, ffn_up, ffn_down, router, shexp_gate, gate_shexp, up_shexp, down_shexp;
  GpuTensor gate_exps, up_exps, down_exps;  // Resident mode
  Buffer k_cache, v_cache;
  // ExpertCache mode: slot pools, one expert per slot.
  Buffer gate_pool, up_pool, down_pool;
};

class GpuEngine final : public Engine {
 public:
  GpuEngine(const Model& m, const EngineOptions& o);
  ~GpuEngine() override {
    if (upload_thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(up_mu_);
        up_stop_ = true;
      }
      up_cv_.notify_all();
      upload_thread_.join();
    }
    if (ctx_) ctx_->wait_idle();
  }
  std::vector<float> eval(const std::vector<int32_t>& tokens) override;
  void reset() override {
    pos_ = 0;
    drop_prepared();
    for (auto& p : prev_route_) p.clear();
  }
  int n_ctx() const override { return n_ctx_; }
  std::string describe() const override;
  std::string stats_report() const override;

 private:
  void upload_weights();
  GpuTensor upload_tensor(const Weight& w, const std::string& what);
  Recorder& next_recorder();
  void embed(int32_t token, uint32_t slot);
  // Records layer il's attention block (and the FFN norm) for one token.
  // normed: xn already holds this layer's attention-normed input.
  void record_attention(Recorder& r, int il, int pos, bool normed = false);
  // y = down(silu(gate xn) * up xn) into out (accumulated when acc), via g/u scratch.
  void record_swiglu_ffn(Recorder& r, const GpuTensor& gate, const GpuTensor& up, const GpuTensor& down,
                         uint32_t n_ff, const Buffer& g, const Buffer& u, const Buffer& out, bool acc);
  void record_dense_ffn(Recorder& r, int il);
  void record_shared_expert(Recorder& r, int il);
  // With next_norm (and no shared expert) the expert combine also writes
  // xn = rmsnorm(x) * next_norm for what follows; returns whether it did.
  bool record_resident_moe(Recorder& r, int il, const GpuTensor* next_norm = nullptr);
  void record_output(Recorder& r, bool normed = false);
  void mv(Recorder& r, const GpuTensor& w, const Buffer& x, uint32_t xo, const Buffer& y, uint32_t yo,
          bool acc = false);
  void rms(Recorder& r, const Buffer& x, uint32_t xo, const GpuTensor* w, const Buffer& y, uint32_t yo,
           uint32_t n, uint32_t rows = 1);
  void axpy(Recorder& r, const Buffer& x, uint32_t xo, uint32_t n, uint32_t items, const Buffer* a,
            uint32_t ao, uint32_t mode, const Buffer& y, uint32_t yo);
  // g[i] = silu(g[i]) * u[i] for n values.
  void swiglu(Recorder& r, const Buffer& g, const Buffer& u, uint32_t n);
  void decode_resident(const std::vector<int32_t>& tokens);
  void record_resident_tokens(Recorder& r, int pos0, size_t n);
  void decode_offload(int32_t token);
  // Offload mode, per layer: A = (previous CPU experts' output +) attention,
  // router and readback; B = the layer's GPU experts from cache slots.
  void record_offload_a(Recorder& r, int il);
  void record_offload_b(Recorder& r, int il);
  void record_offload_end(Recorder& r);
  // Whether layer il's pass also predicts layer il + 1's experts.
  bool predicts(int il) const { return opt_.predict_prefetch && il + 1 < c_.n_layer; }
  // gate/up -> swiglu -> down for the K routed experts named by `ids` (expert
  // or slot indices into the given weight buffers) into eo_.
  void record_routed_experts(Recorder& r, const LayerWeights& lw, const Buffer& gate, const Buffer& up,
                             const Buffer& down, const Buffer& ids, uint32_t n_experts);
  // Routes layer il on the host: slot ids/weights for B, the CPU's share.
  void route_offload(int il, std::vector<vk::SyncPoint>& waits, std::vector<ExpertView>& cold,
                     std::vector<float>& cold_w, std::vector<int>& cold_ids);
  // Host work overlapping layer il's GPU experts: admit the previous layer's
  // misses, then prefetch what is predicted for layer il + 1.
  void cache_maintenance(int il, bool predict);
  void prefetch(int il, const std::vector<int>& experts);
  void admit(int il, int expert);
  void pin_hot_experts();
  vk::SyncPoint upload_expert(int il, int expert, int slot);
  // Slot fills run on a worker thread (staging copies + transfer-queue
  // submits) so they never stall the decode loop; finished fills are marked
  // ready by the decode thread, which alone touches the SLRU policies.
  struct UploadJob {
    int layer, expert, slot;
  };
  void upload_loop();
  void drain_uploads();
  std::thread upload_thread_;
  std::mutex up_mu_;
  std::condition_variable up_cv_;
  std::deque<UploadJob> up_jobs_;
  std::vector<std::pair<UploadJob, vk::SyncPoint>> up_done_;
  bool up_stop_ = false;

  const Model& m_;
  const ModelConfig& c_;
  EngineOptions opt_;
  int n_ctx_;
  int pos_ = 0;
  std::unique_ptr<vk::Context> ctx_;
  Plan plan_;
  std::vector<GpuLayer> L_;
  GpuTensor output_norm_, output_;
  // Activations.
  Buffer x_, xn_, q_, att_, logits_, rlog_, ids_, wts_, eg_, eu_, eo_, sg_, su_, so_, gate1_, scores_;
  Buffer in_x_;      // host -> GPU embeddings (Upload)
  Buffer readback_;  // GPU -> host (Readback): logits | router logits | xn | predicted logits
  Buffer host_ids_, host_wts_, cpu_out_;  // host-written MoE inputs (Upload)
  uint64_t rb_logits_ = 0, rb_rlog_ = 0, rb_xn_ = 0, rb_plog_ = 0;
  std::vector<std::unique_ptr<Recorder>> recorders_;
  size_t rec_cur_ = 0;
  Recorder* prepared_ = nullptr;  // next token's commands, recorded ahead
  int prepared_pos_ = -1;
  void drop_prepared() {
    if (prepared_) prepared_->discard();
    prepared_ = nullptr;
  }
  std::unique_ptr<vk::Uploader> uploader_;
  uint32_t max_batch_ = 64;
  // Expert offload state.
  bool offload_ = false;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<std::unique_ptr<SlruPolicy>> cache_;       // per layer
  std::vector<std::vector<vk::SyncPoint>> slot_ready_;   // per layer, per slot
  std::vector<std::vector<int>> prev_route_;             // previous token's experts per layer
  std::vector<std::vector<int>> predicted_;              // prediction for the current token
  std::vector<std::pair<int, int>> pending_admit_;       // (layer, expert) misses to upload
  bool pinned_ = false;                                  // --pin-experts applied
  RouteStats stats_;
  // GPU time per step of the resident decode (env VKMOE_PROFILE=1).
  std::unique_ptr<vk::TimestampPool> prof_;
  std::vector<const char*> prof_labels_;
  std::vector<std::pair<std::string, double>> prof_ns_;
  uint64_t prof_tokens_ = 0;
  void mark(Recorder& r, const char* label) {
    if (!prof_ || prof_labels_.size() >= prof_->count()) return;
    r.timestamp(*prof_, static_cast<uint32_t>(prof_labels_.size()));
    prof_labels_.push_back(label);
  }
};

GpuEngine::GpuEngine(const Model& m, const EngineOptions& o)
    : m_(m), c_(m.config()), opt_(o), n_ctx_(o.n_ctx), stats_(m.config().n_layer) {
  if (c_.head_dim > 256) throw Error("head dimension above 256 is not supported by the GPU attention kernel");
  if (c_.n_expert > 1024 || c_.n_expert_used > 64) throw Error("more than 1024 experts or top-64 routing is not supported");
  ctx_ = vk::Context::create(o.device);
  uint64_t budget = o.vram_budget ? o.vram_budget : ctx_->memory_budget().free();
  PlanInput in = plan_input_for(m, n_ctx_, budget, GgmlType::F32);
  in.forced = o.mode;
  in.pinned_per_layer = o.pin_per_layer;
  plan_ = make_plan(in);
  // A stacked expert tensor is bound whole in resident mode; devices with a
  // small storage-buffer range (lavapipe: 128 MiB) use the slot cache instead.
  if (plan_.mode == PlanMode::Resident && c_.is_moe()) {
    for (const auto& t : in.experts.tensors) {
      if (t.bytes <= ctx_->info().max_storage_buffer_range) continue;
      if (o.mode == PlanMode::Resident)
        throw Error("expert tensor '" + t.name + "' (" + format_bytes(t.bytes) +
                    ") exceeds this device's storage buffer range (" +
                    format_bytes(ctx_->info().max_storage_buffer_range) + "); use --moe-mode expert-cache");
      in.forced = PlanMode::ExpertCache;
      plan_ = make_plan(in);
      break;
    }
  }
  offload_ = c_.is_moe() && plan_.mode != PlanMode::Resident;
  if (offload_) {  // each slot pool is bound whole: keep it within one binding's range
    uint64_t biggest = 1;
    for (const auto& l : m.layers())
      biggest = std::max({biggest, l.gate_exps.expert_bytes(), l.up_exps.expert_bytes(), l.down_exps.expert_bytes()});
    const uint64_t cap = ctx_->info().max_storage_buffer_range / biggest;
    if (uint64_t(plan_.expert_slots_per_layer) > cap) plan_.expert_slots_per_layer = static_cast<int>(cap);
  }
  for (int i = 0; i < 8; ++i) recorders_.push_back(std::make_unique<Recorder>(*ctx_));
  uploader_ = std::make_unique<vk::Uploader>(*ctx_, 64ull << 20, 4);

  const uint32_t E = c_.n_embd, Q = c_.q_dim(), K = std::max(1, c_.n_expert_used);
  const uint32_t F = std::max({c_.n_ff, c_.n_ff_exp, 1});
  auto dev = [&](uint64_t floats, const char* what) {
    return ctx_->create_buffer(std::max<uint64_t>(floats, 4) * 4, MemoryKind::Device, what);
  };
  x_ = dev(E, "hidden state");
  xn_ = dev(E, "normed state");
  q_ = dev(Q, "queries");
  att_ = dev(Q, "attention output");
  logits_ = dev(c_.n_vocab, "logits");
  rlog_ = dev(2 * std::max(1, c_.n_expert), "router logits");
  ids_ = dev(K, "expert ids");
  wts_ = dev(K, "expert weights");
  eg_ = dev(uint64_t(K) * F, "expert gate");
  eu_ = dev(uint64_t(K) * F, "expert up");
  eo_ = dev(uint64_t(K) * E, "expert out");
  sg_ = dev(std::max(c_.n_ff_shexp, 1), "shared gate");
  su_ = dev(std::max(c_.n_ff_shexp, 1), "shared up");
  so_ = dev(E, "shared out");
  gate1_ = dev(4, "shared gate scalar");
  scores_ = dev(uint64_t(c_.n_head) * n_ctx_, "attention scores");
  in_x_ = ctx_->create_buffer(uint64_t(max_batch_) * E * 4, MemoryKind::Upload, "embeddings");
  rb_logits_ = 0;
  rb_rlog_ = uint64_t(c_.n_vocab) * 4;
  rb_xn_ = rb_rlog_ + uint64_t(std::max(1, c_.n_expert)) * 4;
  rb_plog_ = rb_xn_ + uint64_t(E) * 4;
  readback_ = ctx_->create_buffer(rb_plog_ + uint64_t(std::max(1, c_.n_expert)) * 4, MemoryKind::Readback, "readback");
  host_ids_ = ctx_->create_buffer(K * 4, MemoryKind::Upload, "expert slot ids");
  host_wts_ = ctx_->create_buffer(K * 4, MemoryKind::Upload, "expert slot weights");
  cpu_out_ = ctx_->create_buffer(uint64_t(E) * 4, MemoryKind::Upload, "CPU expert output");
  {  // offload mode reads the expert outputs of skipped items (with weight 0): keep them finite
    Recorder& r = next_recorder();
    for (const Buffer* b : {&eg_, &eu_, &eo_}) r.fill(*b, 0, b->size(), 0);
    r.submit().wait();
  }
  upload_weights();
  if (std::getenv("VKMOE_PROFILE") && ctx_->info().timestamps)
    prof_ = std::make_unique<vk::TimestampPool>(*ctx_, 64 * c_.n_layer + 16);
  if (offload_) {
    pool_ = std::make_unique<ThreadPool>(o.threads);
    prev_route_.assign(c_.n_layer, {});
    predicted_.assign(c_.n_layer, {});
  }
}

GpuTensor GpuEngine::upload_tensor(const Weight& w, const std::string& what) {
  GpuTensor t;
  if (!w) return t;
  t.type = w.type();
  t.ncols = static_cast<uint32_t>(w.in());
  t.nrows = static_cast<uint32_t>(w.t->nrows());
  t.buf = ctx_->create_buffer((w.t->nbytes + 15) / 16 * 16, MemoryKind::Device, what);
  uploader_->enqueue(t.buf, 0, w.t->data, w.t->nbytes);
  return t;
}

void GpuEngine::upload_weights() {
  const auto& layers = m_.layers();
  L_.resize(c_.n_layer);
  const uint64_t total = plan_.trunk_bytes + (offload_ ? 0 : plan_.expert_cache_bytes);
  uint64_t done = 0;
  auto t0 = std::chrono::steady_clock::now();
  const bool progress = total > (256ull << 20);
  int shown = -1;
  auto up = [&](const Weight& w, const std::string& what) {
    GpuTensor t = upload_tensor(w, what);
    if (w) done += w.t->nbytes;
    const int pct = static_cast<int>(100 * done / std::max<uint64_t>(total, 1));
    if (progress && pct != shown) std::fprintf(stderr, "\ruploading weights to VRAM: %3d%%", shown = pct);
    return t;
  };
  for (int il = 0; il < c_.n_layer; ++il) {
    const LayerWeights& w = layers[il];
    GpuLayer& g = L_[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    g.attn_norm = up(w.attn_norm, p + "attn_norm");
    g.wq = up(w.wq, p + "attn_q");
    g.wk = up(w.wk, p + "attn_k");
    g.wv = up(w.wv, p + "attn_v");
    g.wo = up(w.wo, p + "attn_output");
    g.bq = up(w.bq, p + "attn_q.bias");
    g.bk = up(w.bk, p + "attn_k.bias");
    g.bv = up(w.bv, p + "attn_v.bias");
    g.q_norm = up(w.q_norm, p + "attn_q_norm");
    g.k_norm = up(w.k_norm, p + "attn_k_norm");
    g.ffn_norm = up(w.ffn_norm, p + "ffn_norm");
    g.ffn_gate = up(w.ffn_gate, p + "ffn_gate");
    g.ffn_up = up(w.ffn_up, p + "ffn_up");
    g.ffn_down = up(w.ffn_down, p + "ffn_down");
    g.router = up(w.router, p + "ffn_gate_inp");
    g.shexp_gate = up(w.shexp_gate, p + "ffn_gate_inp_shexp");
    g.gate_shexp = up(w.gate_shexp, p + "ffn_gate_shexp");
    g.up_shexp = up(w.up_shexp, p + "ffn_up_shexp");
    g.down_shexp = up(w.down_shexp, p + "ffn_down_shexp");
    if (c_.is_moe() && !offload_) {
      g.gate_exps = up(w.gate_exps, p + "ffn_gate_exps");
      g.up_exps = up(w.up_exps, p + "ffn_up_exps");
      g.down_exps = up(w.down_exps, p + "ffn_down_exps");
    }
    const uint64_t kv_bytes = uint64_t(n_ctx_) * c_.kv_dim() * 4;
    g.k_cache = ctx_->create_buffer(kv_bytes, MemoryKind::Device, p + "k cache");
    g.v_cache = ctx_->create_buffer(kv_bytes, MemoryKind::Device, p + "v cache");
  }
  output_norm_ = up(m_.output_norm, "output_norm");
  output_ = up(m_.output, "output");
  if (offload_) {
    const int slots = plan_.expert_slots_per_layer;
    cache_.resize(c_.n_layer);
    slot_ready_.assign(c_.n_layer, std::vector<vk::SyncPoint>(std::max(slots, 0)));
    for (int il = 0; il < c_.n_layer && slots > 0; ++il) {
      const LayerWeights& w = layers[il];
      GpuLayer& g = L_[il];
      const std::string p = "blk." + std::to_string(il) + ".";
      g.gate_pool = ctx_->create_buffer(w.gate_exps.expert_bytes() * slots, MemoryKind::Device, p + "gate expert slots");
      g.up_pool = ctx_->create_buffer(w.up_exps.expert_bytes() * slots, MemoryKind::Device, p + "up expert slots");
      g.down_pool = ctx_->create_buffer(w.down_exps.expert_bytes() * slots, MemoryKind::Device, p + "down expert slots");
      SlruConfig sc;
      sc.slots = slots;
      cache_[il] = std::make_unique<SlruPolicy>(sc);
    }
  }
  uploader_->flush().wait();
  if (offload_ && plan_.expert_slots_per_layer > 0)
    upload_thread_ = std::thread([this] { upload_loop(); });
  if (progress)
    std::fprintf(stderr, "\ruploading weights to VRAM: done, %.2f GiB in %.1f s\n", done / double(1ull << 30),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

Recorder& GpuEngine::next_recorder() {
  Recorder& r = *recorders_[rec_cur_];
  rec_cur_ = (rec_cur_ + 1) % recorders_.size();
  r.begin();
  return r;
}

void GpuEngine::mv(Recorder& r, const GpuTensor& w, const Buffer& x, uint32_t xo, const Buffer& y, uint32_t yo,
                   bool acc) {
  vk::MatvecArgs a;
  a.type = w.type;
  a.ncols = w.ncols;
  a.x = x;
  a.x_offset = xo;
  a.y = y;
  a.accumulate = acc;
  // Matrices larger than one binding may cover (e.g. a big output head on a
  // device with a small storage-buffer range) go in row chunks whose
  // offsets respect the binding alignment.
  const uint64_t rb = row_bytes(w.type, w.ncols);
  const uint64_t align = std::max<uint64_t>(ctx_->info().min_storage_offset_alignment, 16);
  const uint64_t row_step = align / std::gcd(rb, align);
  uint64_t chunk = std::min<uint64_t>(w.nrows, ctx_->info().max_storage_buffer_range / rb);
  if (chunk < w.nrows) chunk = chunk / row_step * row_step;
  if (chunk == 0) throw Error("a row of tensor " + w.buf.name() + " exceeds the device's storage buffer range");
  for (uint64_t r0 = 0; r0 < w.nrows; r0 += chunk) {
    const uint64_t n = std::min<uint64_t>(chunk, w.nrows - r0);
    a.w = vk::BufferRange(w.buf, r0 * rb, n * rb);
    a.nrows = static_cast<uint32_t>(n);
    a.y_offset = yo + static_cast<uint32_t>(r0);
    vk::record_matvec(r, a);
  }
}

void GpuEngine::rms(Recorder& r, const Buffer& x, uint32_t xo, const GpuTensor* w, const Buffer& y, uint32_t yo,
                    uint32_t n, uint32_t rows) {
  const auto& p = ctx_->pipeline("rms_norm", 3, sizeof(RmsNormPush));
  RmsNormPush pc{n, xo, 0, yo, n, w ? 1u : 0u, c_.norm_eps};
  r.dispatch(p, {x, w ? vk::BufferRange(w->buf) : vk::BufferRange(x), y}, pc, rows);
}

void GpuEngine::axpy(Recorder& r, const Buffer& x, uint32_t xo, uint32_t n, uint32_t items, const Buffer* a,
                     uint32_t ao, uint32_t mode, const Buffer& y, uint32_t yo) {
  const auto& p = ctx_->pipeline("axpy", 3, sizeof(AxpyPush));
  AxpyPush pc{n, items, xo, ao, yo, mode, 1.0f};
  r.dispatch(p, {x, a ? vk::BufferRange(*a) : vk::BufferRange(x), y}, pc, div_up(n, 256));
}

void GpuEngine::swiglu(Recorder& r, const Buffer& g, const Buffer& u, uint32_t n) {
  const auto& p = ctx_->pipeline("swiglu", 2, sizeof(SwigluPush));
  r.dispatch(p, {g, u}, SwigluPush{n, 0, 0}, div_up(n, 256));
}

void GpuEngine::embed(int32_t token, uint32_t slot) {
  if (token < 0 || token >= c_.n_vocab)
    throw Error("token id " + std::to_string(token) + " is outside the vocabulary");
  dequantize_row(m_.tok_embd.type(), m_.tok_embd.row(token), in_x_.as<float>() + size_t(slot) * c_.n_embd,
                 c_.n_embd);
}

void GpuEngine::record_attention(Recorder& r, int il, int pos, bool normed) {
  GpuLayer& g = L_[il];
  const uint32_t E = c_.n_embd, Q = c_.q_dim(), KV = c_.kv_dim(), D = c_.head_dim;
  const uint32_t kv_off = uint32_t(pos) * KV;
  if (!normed) {
    rms(r, x_, 0, &g.attn_norm, xn_, 0, E);
    r.barrier();
    mark(r, "attn norm");
  }
  mv(r, g.wq, xn_, 0, q_, 0);
  mv(r, g.wk, xn_, 0, g.k_cache, kv_off);
  mv(r, g.wv, xn_, 0, g.v_cache, kv_off);
  r.barrier();
  mark(r, "q/k/v matvec");
  if (g.bq) {
    axpy(r, g.bq.buf, 0, Q, 1, nullptr, 0, 0, q_, 0);
    axpy(r, g.bk.buf, 0, KV, 1, nullptr, 0, 0, g.k_cache, kv_off);
    axpy(r, g.bv.buf, 0, KV, 1, nullptr, 0, 0, g.v_cache, kv_off);
    r.barrier();
  }
  const bool per_head = g.q_norm && g.q_norm.ncols == D;
  if (g.q_norm && !per_head) {  // norm over the whole projection (olmoe)
    rms(r, q_, 0, &g.q_norm, q_, 0, Q, 1);
    rms(r, g.k_cache, kv_off, &g.k_norm, g.k_cache, kv_off, KV, 1);
    r.barrier();
  }
  const auto& rp = ctx_->pipeline("qk_norm_rope", 4, sizeof(QkNormRopePush));
  QkNormRopePush qp{D, uint32_t(c_.n_head), 0, kv_off, uint32_t(pos), c_.rope_neox ? 1u : 0u, per_head ? 1u : 0u,
                    c_.rope_theta, c_.norm_eps};
  r.dispatch(rp, {q_, g.k_cache, per_head ? g.q_norm.buf : q_, per_head ? g.k_norm.buf : q_}, qp,
             c_.n_head + c_.n_head_kv);
  r.barrier();
  mark(r, "bias/qk-norm/rope");
  const auto& ap = ctx_->pipeline("attention", 5, sizeof(AttentionPush));
  AttentionPush pc{D, uint32_t(c_.n_head), uint32_t(c_.n_head_kv), uint32_t(pos + 1), 0, 0, 0, 0,
                   uint32_t(n_ctx_), 1.0f / std::sqrt(float(D))};
  r.dispatch(ap, {q_, g.k_cache, g.v_cache, scores_, att_}, pc, c_.n_head);
  r.barrier();
  mark(r, "attention");
  mv(r, g.wo, att_, 0, x_, 0, /*acc=*/true);
  r.barrier();
  rms(r, x_, 0, &g.ffn_norm, xn_, 0, E);
  r.barrier();
  mark(r, "out proj + ffn norm");
}

void GpuEngine::record_swiglu_ffn(Recorder& r, const GpuTensor& gate, const GpuTensor& up, const GpuTensor& down,
                                  uint32_t n_ff, const Buffer& g, const Buffer& u, const Buffer& out, bool acc) {
  mv(r, gate, xn_, 0, g, 0);
  mv(r, up, xn_, 0, u, 0);
  r.barrier();
  swiglu(r, g, u, n_ff);
  r.barrier();
  mv(r, down, g, 0, out, 0, acc);
  r.barrier();
}

void GpuEngine::record_dense_ffn(Recorder& r, int il) {
  const GpuLayer& g = L_[il];
  record_swiglu_ffn(r, g.ffn_gate, g.ffn_up, g.ffn_down, c_.n_ff, eg_, eu_, x_, /*acc=*/true);
}

void GpuEngine::record_shared_expert(Recorder& r, int il) {
  const GpuLayer& g = L_[il];
  if (!g.gate_shexp) return;
  mv(r, g.shexp_gate, xn_, 0, gate1_, 0);  // completes before the FFN's first barrier
  record_swiglu_ffn(r, g.gate_shexp, g.up_shexp, g.down_shexp, c_.n_ff_shexp, sg_, su_, so_, /*acc=*/false);
  axpy(r, so_, 0, c_.n_embd, 1, &gate1_, 0, /*sigmoid*/ 2, x_, 0);
  r.barrier();
}

bool GpuEngine::record_resident_moe(Recorder& r, int il, const GpuTensor* next_norm) {
  GpuLayer& g = L_[il];
  const uint32_t E = c_.n_embd, K = c_.n_expert_used, N = c_.n_expert;
  mv(r, g.router, xn_, 0, rlog_, 0);
  r.barrier();
  const auto& tp = ctx_->pipeline(ctx_->info().subgroup_arithmetic ? "moe_topk_sg" : "moe_topk", 3, sizeof(TopkPush));
  r.dispatch(tp, {rlog_, ids_, wts_}, TopkPush{N, K, c_.norm_topk_prob ? 1u : 0u, 0}, 1);
  r.barrier();
  mark(r, "router + top-k");
  const LayerWeights& lw = m_.layers()[il];
  record_routed_experts(r, lw, g.gate_exps.buf, g.up_exps.buf, g.down_exps.buf, ids_, N);
  if (next_norm && !g.gate_shexp) {
    const auto& cp = ctx_->pipeline("moe_combine_norm", 5, sizeof(CombineNormPush));
    r.dispatch(cp, {eo_, wts_, x_, next_norm->buf, xn_}, CombineNormPush{E, K, c_.norm_eps}, 1);
    r.barrier();
    mark(r, "combine + next norm");
    return true;
  }
  axpy(r, eo_, 0, E, K, &wts_, 0, /*weights*/ 1, x_, 0);
  r.barrier();
  mark(r, "combine");
  record_shared_expert(r, il);
  return false;
}

void GpuEngine::record_output(Recorder& r, bool normed) {
  if (!normed) {
    rms(r, x_, 0, &output_norm_, xn_, 0, c_.n_embd);
    r.barrier();
  }
  mv(r, output_, xn_, 0, logits_, 0);
  r.barrier();
  r.copy(logits_, 0, readback_, rb_logits_, uint64_t(c_.n_vocab) * 4);
}

void GpuEngine::record_resident_tokens(Recorder& r, int pos0, size_t n) {
  bool normed = false;
  for (size_t t = 0; t < n; ++t) {
    r.copy(in_x_, t * c_.n_embd * 4, x_, 0, uint64_t(c_.n_embd) * 4);
    r.barrier();
    mark(r, "start");
    normed = false;
    for (int il = 0; il < c_.n_layer; ++il) {
      record_attention(r, il, pos0 + int(t), normed);
      normed = false;
      const bool last = il + 1 == c_.n_layer;
      const GpuTensor* next_norm = !last ? &L_[il + 1].attn_norm : t + 1 == n ? &output_norm_ : nullptr;
      if (c_.is_moe())
        normed = record_resident_moe(r, il, next_norm);
      else
        record_dense_ffn(r, il);
    }
  }
  record_output(r, normed);
  mark(r, "output head");
}

void GpuEngine::decode_resident(const std::vector<int32_t>& tokens) {
  for (size_t t0 = 0; t0 < tokens.size(); t0 += max_batch_) {
    const size_t n = std::min<size_t>(max_batch_, tokens.size() - t0);
    for (size_t t = 0; t < n; ++t) embed(tokens[t0 + t], uint32_t(t));
    const bool profile = prof_ && n == 1;
    Recorder* r = nullptr;
    if (n == 1 && prepared_ && prepared_pos_ == pos_) {
      r = prepared_;  // recorded while the GPU ran the previous token
      prepared_ = nullptr;
    } else {
      drop_prepared();
      r = &next_recorder();
      if (profile) {
        r->reset_timestamps(*prof_, 0, prof_->count());
        prof_labels_.clear();
      }
      record_resident_tokens(*r, pos_, n);
    }
    vk::SyncPoint done = r->submit();
    pos_ += static_cast<int>(n);
    // Decoding goes one token at a time: record the next one (whose position
    // is known) while the GPU works; only its embedding is written later.
    if (n == 1 && !profile && pos_ < n_ctx_) {
      prepared_ = &next_recorder();
      record_resident_tokens(*prepared_, pos_, 1);
      prepared_pos_ = pos_;
    }
    done.wait();
    if (profile && !prof_labels_.empty()) {
      std::vector<double> ns = prof_->read_ns(0, static_cast<uint32_t>(prof_labels_.size()));
      for (size_t i = 1; i < ns.size(); ++i) {
        auto it = std::find_if(prof_ns_.begin(), prof_ns_.end(), [&](auto& p) { return p.first == prof_labels_[i]; });
        if (it == prof_ns_.end()) it = prof_ns_.insert(prof_ns_.end(), {prof_labels_[i], 0.0});
        it->second += ns[i] - ns[i - 1];
      }
      ++prof_tokens_;
    }
  }
}

void GpuEngine::record_offload_a(Recorder& r, int il) {
  const uint32_t E = c_.n_embd;
  if (il == 0)
    r.copy(in_x_, 0, x_, 0, uint64_t(E) * 4);
  else
    axpy(r, cpu_out_, 0, E, 1, nullptr, 0, 0, x_, 0);  // the previous layer's CPU experts
  r.barrier();
  record_attention(r, il, pos_);
  const GpuLayer& g = L_[il];
  mv(r, g.router, xn_, 0, rlog_, 0);
  const bool predict = predicts(il);
  if (predict) {  // layer il+1's router applied to this layer's hidden state
    rms(r, x_, 0, &L_[il + 1].ffn_norm, so_, 0, E);
    r.barrier();
    mv(r, L_[il + 1].router, so_, 0, rlog_, c_.n_expert);
  }
  r.barrier();
  r.copy(rlog_, 0, readback_, rb_rlog_, uint64_t(c_.n_expert) * 4);
  r.copy(xn_, 0, readback_, rb_xn_, uint64_t(E) * 4);
  if (predict) r.copy(rlog_, uint64_t(c_.n_expert) * 4, readback_, rb_plog_, uint64_t(c_.n_expert) * 4);
}

void GpuEngine::record_offload_b(Recorder& r, int il) {
  const int slots = plan_.expert_slots_per_layer;
  if (slots > 0) {
    const GpuLayer& g = L_[il];
    record_routed_experts(r, m_.layers()[il], g.gate_pool, g.up_pool, g.down_pool, host_ids_, slots);
    // Items computed on the CPU have weight 0 here (their stale, finite outputs drop out).
    axpy(r, eo_, 0, c_.n_embd, c_.n_expert_used, &host_wts_, 0, 1, x_, 0);
    r.barrier();
  }
  record_shared_expert(r, il);
}

void GpuEngine::record_routed_experts(Recorder& r, const LayerWeights& lw, const Buffer& gate, const Buffer& up,
                                      const Buffer& down, const Buffer& ids, uint32_t n_experts) {
  const uint32_t E = c_.n_embd, F = c_.n_ff_exp, K = c_.n_expert_used;
  auto ids_mv = [&](const Weight& wt, const Buffer& w, const Buffer& x, uint32_t x_stride, const Buffer& y,
                    uint32_t y_stride) {
    vk::MatvecIdsArgs a;
    a.type = wt.type();
    a.ncols = static_cast<uint32_t>(wt.in());
    a.nrows = static_cast<uint32_t>(wt.out());
    a.w = w;
    a.x = x;
    a.y = y;
    a.ids = ids;
    a.n_ids = K;
    a.n_experts = n_experts;
    a.expert_stride = wt.expert_bytes();
    a.x_stride = x_stride;
    a.y_stride = y_stride;
    vk::record_matvec_ids(r, a);
  };
  ids_mv(lw.gate_exps, gate, xn_, 0, eg_, F);
  ids_mv(lw.up_exps, up, xn_, 0, eu_, F);
  r.barrier();
  mark(r, "experts gate+up");
  swiglu(r, eg_, eu_, K * F);
  r.barrier();
  mark(r, "swiglu");
  ids_mv(lw.down_exps, down, eg_, F, eo_, E);
  r.barrier();
  mark(r, "experts down");
}

void GpuEngine::record_offload_end(Recorder& r) {
  axpy(r, cpu_out_, 0, c_.n_embd, 1, nullptr, 0, 0, x_, 0);
  r.barrier();
  record_output(r);
}

// Per layer the host waits once: for the router. While the GPU runs a
// layer's attention the host has already recorded that layer's experts and
// the next layer's attention; only slot ids, weights and the CPU experts'
// output (all in host-visible buffers) are filled in after routing.
void GpuEngine::decode_offload(int32_t token) {
  embed(token, 0);
  const int L = c_.n_layer;
  auto record_next_a = [&](int il) {
    Recorder* r = &next_recorder();
    if (il < L)
      record_offload_a(*r, il);
    else
      record_offload_end(*r);
    return r;
  };
  Recorder* a = record_next_a(0);
  vk::SyncPoint routed = a->submit();
  Recorder* b = &next_recorder();
  record_offload_b(*b, 0);
  a = record_next_a(1);
  routed.wait();
  for (int il = 0; il < L; ++il) {
    const bool predict = predicts(il);
    std::vector<vk::SyncPoint> waits;
    std::vector<ExpertView> cold;
    std::vector<float> cold_w;
    std::vector<int> cold_ids;
    route_offload(il, waits, cold, cold_w, cold_ids);
    b->submit(waits);  // the GPU works on the hits while the host computes the misses
    float* cpu_out = cpu_out_.as<float>();
    if (cold.empty()) {
      std::fill(cpu_out, cpu_out + c_.n_embd, 0.f);
    } else {
      const float* xn = reinterpret_cast<const float*>(readback_.data() + rb_xn_);
      const int n = static_cast<int>(cold.size());
      moe_ffn_cpu(cold.data(), cold_w.data(), n, xn, cpu_out, *pool_,
                  opt_.cpu_q8 ? CpuActivations::Q8 : CpuActivations::F32);
    }
    cache_maintenance(il, predict);
    if (il < int(cache_.size()) && cache_[il])
      for (int e : cold_ids) pending_admit_.push_back({il, e});
    routed = a->submit();
    if (il + 1 < L) {
      b = &next_recorder();
      record_offload_b(*b, il + 1);
      a = record_next_a(il + 2);
    }
    routed.wait();
  }
  ++pos_;
  stats_.add_tokens(1);
}

void GpuEngine::route_offload(int il, std::vector<vk::SyncPoint>& waits, std::vector<ExpertView>& cold,
                              std::vector<float>& cold_w, std::vector<int>& cold_ids) {
  const int K = c_.n_expert_used, N = c_.n_expert;
  const float* rl = reinterpret_cast<const float*>(readback_.data() + rb_rlog_);
  std::vector<int> ids(K);
  std::vector<float> w(K);
  route_topk(rl, N, K, c_.norm_topk_prob, ids.data(), w.data());
  if (opt_.predict_prefetch && il > 0) stats_.record_routing(il, predicted_[il], ids);
  prev_route_[il] = ids;
  const LayerWeights& lw = m_.layers()[il];
  SlruPolicy* cache = il < int(cache_.size()) ? cache_[il].get() : nullptr;
  if (cache) drain_uploads();
  int32_t* slot_ids = host_ids_.as<int32_t>();
  float* slot_w = host_wts_.as<float>();
  int hits = 0;
  for (int j = 0; j < K; ++j) {
    std::optional<int> slot = cache ? cache->lookup({il, ids[j]}) : std::nullopt;
    slot_ids[j] = slot ? *slot : -1;
    slot_w[j] = slot ? w[j] : 0.f;
    if (slot) {
      ++hits;
      if (!slot_ready_[il][*slot].reached()) waits.push_back(slot_ready_[il][*slot]);
    } else {
      cold.push_back({lw.gate_exps.type(), lw.up_exps.type(), lw.down_exps.type(), lw.gate_exps.expert(ids[j]),
                      lw.up_exps.expert(ids[j]), lw.down_exps.expert(ids[j]), c_.n_embd, c_.n_ff_exp});
      cold_w.push_back(w[j]);
      cold_ids.push_back(ids[j]);
    }
  }
  stats_.record_cache(il, hits, cold.size());
  stats_.record_compute(il, hits, cold.size());
}

void GpuEngine::cache_maintenance(int il, bool predict) {
  // The previous layer's GPU work is complete (this layer's router was read
  // back after it), so its slots can be refilled.
  for (auto [l, e] : pending_admit_) admit(l, e);
  pending_admit_.clear();
  if (!predict) return;
  std::vector<int> ids(c_.n_expert_used);
  std::vector<float> w(c_.n_expert_used);
  route_topk(reinterpret_cast<const float*>(readback_.data() + rb_plog_), c_.n_expert, c_.n_expert_used, false,
             ids.data(), w.data());
  predicted_[il + 1] = ids;
  std::vector<int> want = ids;
  for (int e : prev_route_[il + 1])
    if (std::find(want.begin(), want.end(), e) == want.end()) want.push_back(e);
  prefetch(il + 1, want);
}

vk::SyncPoint GpuEngine::upload_expert(int il, int expert, int slot) {
  const LayerWeights& lw = m_.layers()[il];
  GpuLayer& g = L_[il];
  uploader_->enqueue(g.gate_pool, lw.gate_exps.expert_bytes() * slot, lw.gate_exps.expert(expert),
                     lw.gate_exps.expert_bytes());
  uploader_->enqueue(g.up_pool, lw.up_exps.expert_bytes() * slot, lw.up_exps.expert(expert),
                     lw.up_exps.expert_bytes());
  uploader_->enqueue(g.down_pool, lw.down_exps.expert_bytes() * slot, lw.down_exps.expert(expert),
                     lw.down_exps.expert_bytes());
  return uploader_->flush();
}

void GpuEngine::upload_loop() {
  for (;;) {
    UploadJob job;
    {
      std::unique_lock<std::mutex> lock(up_mu_);
      up_cv_.wait(lock, [&] { return up_stop_ || !up_jobs_.empty(); });
      if (up_stop_) return;
      job = up_jobs_.front();
      up_jobs_.pop_front();
    }
    vk::SyncPoint done = upload_expert(job.layer, job.expert, job.slot);
    std::lock_guard<std::mutex> lock(up_mu_);
    up_done_.push_back({job, done});
  }
}

void GpuEngine::drain_uploads() {
  std::lock_guard<std::mutex> lock(up_mu_);
  for (auto& [job, done] : up_done_) {
    slot_ready_[job.layer][job.slot] = done;
    cache_[job.layer]->mark_ready(job.slot);
  }
  up_done_.clear();
}

void GpuEngine::pin_hot_experts() {
  drain_uploads();
  for (int il = 0; il < int(cache_.size()); ++il) {
    SlruPolicy* cache = cache_[il].get();
    if (!cache) continue;
    std::vector<ExpertKey> resident;
    for (int slot = 0; slot < cache->capacity(); ++slot)
      if (auto k = cache->key_at(slot)) resident.push_back(*k);
    std::stable_sort(resident.begin(), resident.end(),
                     [&](ExpertKey a, ExpertKey b) { return cache->frequency(a) > cache->frequency(b); });
    for (int i = 0; i < int(resident.size()) && cache->pinned_count() < opt_.pin_per_layer; ++i)
      cache->pin(resident[i]);
  }
  pinned_ = true;
}

void GpuEngine::admit(int il, int expert) {
  SlruPolicy* cache = cache_[il].get();
  if (!cache || cache->contains({il, expert})) return;
  // cpu-moe mode keeps only pinned experts: fill the slots once, then stop.
  if (plan_.mode != PlanMode::ExpertCache && (pinned_ || cache->size() >= cache->capacity())) return;
  SlruPolicy::Acquire a = cache->acquire({il, expert});
  if (!a) return;
  const LayerWeights& lw = m_.layers()[il];
  stats_.record_upload(il, lw.gate_exps.expert_bytes() + lw.up_exps.expert_bytes() + lw.down_exps.expert_bytes());
  {
    std::lock_guard<std::mutex> lock(up_mu_);
    up_jobs_.push_back({il, expert, a.slot});
  }
  up_cv_.notify_one();
}

void GpuEngine::prefetch(int il, const std::vector<int>& experts) {
  if (plan_.mode != PlanMode::ExpertCache || !cache_[il]) return;
  for (int e : experts) admit(il, e);
}

std::vector<float> GpuEngine::eval(const std::vector<int32_t>& tokens) {
  if (tokens.empty()) throw Error("eval: no tokens");
  if (pos_ + static_cast<int>(tokens.size()) > n_ctx_)
    throw Error("context is full (" + std::to_string(n_ctx_) + " tokens); raise --ctx");
  if (offload_) {
    for (int32_t t : tokens) decode_offload(t);
    if (opt_.pin_per_layer > 0 && !pinned_) pin_hot_experts();
  } else {
    decode_resident(tokens);
  }
  const float* lg = reinterpret_cast<const float*>(readback_.data() + rb_logits_);
  return std::vector<float>(lg, lg + c_.n_vocab);
}

std::string GpuEngine::describe() const {
  std::ostringstream o;
  const auto& d = ctx_->info();
  o << "vulkan: " << d.name << " (" << d.vendor << ", " << d.driver_name << "), transfer queue "
    << (ctx_->has_separate_transfer_queue() ? "separate" : "shared with compute") << ", experts "
    << plan_mode_name(c_.is_moe() ? plan_.mode : PlanMode::Resident);
  if (offload_)
    o << " (" << plan_.expert_slots_per_layer << " slots/layer of " << c_.n_expert
      << (opt_.predict_prefetch ? ", predictive prefetch" : "")
      << (opt_.pin_per_layer ? ", " + std::to_string(opt_.pin_per_layer) + " pinned" : "") << ")";
  o << ", VRAM " << format_bytes(ctx_->allocated_bytes(MemoryKind::Device));
  return o.str();
}

std::string GpuEngine::stats_report() const {
  std::ostringstream o;
  if (prof_tokens_ > 0) {
    double total = 0;
    for (auto& [k, v] : prof_ns_) total += v;
    o << "GPU time per decoded token (" << prof_tokens_ << " tokens): " << total / prof_tokens_ / 1e3 << " us\n";
    for (auto& [k, v] : prof_ns_) {
      char line[128];
      std::snprintf(line, sizeof line, "  %-22s %9.1f us %5.1f%%\n", k.c_str(), v / prof_tokens_ / 1e3, 100 * v / total);
      o << line;
    }
  }
  if (!offload_) return o.str() + "expert statistics: all experts resident in VRAM (no cache, no transfers)\n";
  return o.str() + stats_.report();
}

}  // namespace

std::unique_ptr<Engine> make_gpu_engine(const Model& m, const EngineOptions& o) {
  return std::make_unique<GpuEngine>(m, o);
}

}  // namespace vkmoe
