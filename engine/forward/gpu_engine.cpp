#include "engine/forward/gpu_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string_view>

#include "cpu/thread_pool.h"
#include "engine/forward/gpu_forward.h"
#include "engine/offload/plan_model.h"
#include "engine/vulkan/vk_gemm.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe {

using vk::MemoryKind;

namespace {

vk::KvType parse_kv_type(const std::string& s) {
  if (s == "f16") return vk::KvType::F16;
  if (s == "f32") return vk::KvType::F32;
  if (s == "q8_0") return vk::KvType::Q8_0;
  throw Error("unknown KV cache type '" + s + "' (f16, f32, q8_0)");
}

vk::GemmConfig parse_gemm(const std::string& s) {
  if (const auto p = vk::gemm_path_by_name(s)) return {*p};
  throw Error("unknown GEMM path '" + s + "' (" + vk::kGemmPathNames + ")");
}

// Whether a product of any matrix in the file converts its activations into
// the GEMM scratch on this device (vk::gemm_converts_x).
bool gemm_converts_x(const vk::Context& ctx, vk::GemmConfig gemm, const Model& m) {
  for (const GgufTensor& t : m.gguf().tensors())
    if (t.ne.size() >= 2 && vk::gemm_converts_x(ctx, gemm.path, t.type)) return true;
  return false;
}

// Whether every MoE layer's prompt runs its expert gate and up products as one
// product (ActivationShape::gate_up_in_one).
bool gate_up_in_one(const vk::Context& ctx, vk::GemmConfig gemm, const Model& m) {
  if (!m.config().is_moe()) return false;
  for (const auto& l : m.layers())
    if (l.gate_exps && !experts_gate_up_in_one(ctx, gemm, l)) return false;
  return true;
}

GgmlType kv_ggml_type(vk::KvType t) {
  return t == vk::KvType::F16 ? GgmlType::F16 : t == vk::KvType::Q8_0 ? GgmlType::Q8_0 : GgmlType::F32;
}

}  // namespace

// Every matrix the GPU multiplies needs a matvec and a GEMM kernel for its
// type (token_embd rows are decoded on the CPU unless it is the tied output).
void check_gpu_weight_types(const Model& m, const vk::DeviceInfo& d) {
  const GgufTensor* embd = m.tok_embd.t;
  const bool tied = m.output.t == embd;
  for (const GgufTensor& t : m.gguf().tensors()) {
    if (t.nrows() <= 1 || (&t == embd && !tied)) continue;
    const char* missing = vk::gpu_weight_type_missing_feature(d, t.type);
    if (!missing && vk::matvec_supported(t.type) && vk::gemm_supported(t.type)) continue;
    const std::string why = missing && std::string(missing) != "kernels"
                                ? std::string(" needing ") + missing + ", which " + d.name + " lacks"
                                : std::string();
    throw Error(std::string("the GPU backend has no kernels for tensor type ") + type_name(t.type) + " (tensor '" +
                t.name + "')" + why + "; run this model with --backend cpu");
  }
}

GpuEngine::GpuEngine(const Model& m, const EngineOptions& o)
    : m_(m),
      c_(m.config()),
      opt_(o),
      n_ctx_(o.n_ctx),
      n_ubatch_(uint32_t(std::clamp(o.n_ubatch, 1, std::max(o.n_ctx, 1)))),
      kv_type_(parse_kv_type(o.kv_type)),
      stats_(m.config().n_layer, m.config().n_expert) {
  if (o.n_ubatch < 1) throw Error("the ubatch size must be at least 1");
  if (uint32_t(c_.head_dim) > vk::kMaxHeadDim)
    throw Error("head dimension above " + std::to_string(vk::kMaxHeadDim) +
                " is not supported by the GPU attention kernel");
  if (c_.n_expert > 1024 || c_.n_expert_used > 64) throw Error("more than 1024 experts or top-64 routing is not supported");
  ctx_ = vk::Context::create(o.device);
  check_gpu_weight_types(m, ctx_->info());
  const uint64_t budget = o.vram_budget ? o.vram_budget : ctx_->memory_budget().free();
  const vk::GemmConfig gemm = parse_gemm(o.gemm);
  const bool gemm_converts = gemm_converts_x(*ctx_, gemm, m), one_gate_up = gate_up_in_one(*ctx_, gemm, m);
  PlanInput in =
      plan_input_for(m, n_ctx_, budget, kv_ggml_type(kv_type_), int(n_ubatch_), gemm_converts, one_gate_up);
  in.forced = o.mode;
  in.pinned_per_layer = o.pin_per_layer;
  plan_ = make_plan(in);
  // A stacked expert tensor is bound whole in resident mode; devices with a
  // small storage-buffer range (lavapipe: 128 MiB) use the slot cache instead.
  const uint64_t range = ctx_->info().max_storage_buffer_range;
  if (plan_.mode == PlanMode::Resident && c_.is_moe()) {
    for (const auto& t : in.experts.tensors) {
      if (t.bytes <= range) continue;
      if (o.mode == PlanMode::Resident)
        throw Error("expert tensor '" + t.name + "' (" + format_bytes(t.bytes) +
                    ") exceeds this device's storage buffer range (" + format_bytes(range) +
                    "); use --moe-mode expert-cache");
      in.forced = PlanMode::ExpertCache;
      plan_ = make_plan(in);
      break;
    }
  }
  offload_ = c_.is_moe() && plan_.mode != PlanMode::Resident;
  for (const auto& l : m.layers())
    if (l.gate_exps)
      for (auto [i, w] : {std::pair{0, &l.gate_exps}, {1, &l.up_exps}, {2, &l.down_exps}})
        slice_max_[i] = std::max(slice_max_[i], uint64_t(w->expert_bytes()));
  if (offload_) fit_offload_plan();
  const int planned_staging = staging_slots_;
  // CPU threads: the offload modes' experts, a prompt's embedding rows, and the
  // load's staging copies.
  if (offload_ || n_ubatch_ > 1) pool_ = std::make_unique<ThreadPool>(o.threads, o.placement);
  for (int i = 0; i < 8; ++i) recorders_.push_back(std::make_unique<vk::Recorder>(*ctx_));

  // The trunk first: what must be in VRAM; then what can do with less.
  const uint64_t kv_bytes = vk::kv_cache_bytes(kv_type_, uint32_t(n_ctx_), c_.head_dim, c_.n_head_kv);
  ActivationShape shape = ActivationShape::of(c_, n_ubatch_, uint32_t(n_ctx_));
  shape.gemm_converts_x = gemm_converts;
  shape.gate_up_in_one = one_gate_up;
  allocate_trunk(kv_bytes, shape);
  if (c_.is_moe() && !offload_) allocate_resident_experts(in);
  const bool int8_x = o.gpu_q8 == EngineOptions::GpuQ8::On ||
                      (o.gpu_q8 == EngineOptions::GpuQ8::Auto && vk::q8x_by_default(ctx_->info()));
  ops_ = std::make_unique<GpuOps>(*ctx_, act_->gemm_scratch, act_->non_finite, act_->counters, &act_->gemm_split,
                                  gemm, int8_x);
  prog_ = std::make_unique<LayerProgram>(m, w_, *act_, *ops_, kv_type_,
                                         [this](vk::Recorder& r, const char* label) { mark(r, label); });
  const uint32_t fused_grid = vk::moe_fused_grid(ctx_->info());
  if (vk::env_on("VKMOE_FUSED_CLOCKS") && c_.is_moe() && !offload_) {
    if (!ctx_->info().device_clock || fused_grid == 0) {
      std::fprintf(stderr, "warning: VKMOE_FUSED_CLOCKS: this device has no shader device clock or no fused grid\n");
    } else {
      clocks_ = std::make_unique<DecodeClocks>(*ctx_, uint32_t(c_.n_layer), fused_grid);
      prog_->set_clocks(clocks_.get());
    }
  }

  // Token rows are decoded on the CPU from the mapped file (unless tied to the
  // output head): their pages in memory before the first prompt.
  if (m.tok_embd.t != m.output.t) m.gguf().prefetch(*m.tok_embd.t);
  const uint64_t E = c_.n_embd, N = std::max(1, c_.n_expert), K = std::max(1, c_.n_expert_used);
  in_x_ = ctx_->create_buffer(n_ubatch_ * E * 4, MemoryKind::Upload, "embeddings");
  // A prompt ubatch's token rows are decoded on the GPU (decoding 512 Qwen3 rows
  // on the host's pool took 0.5-3 ms on the H200 machine, PERF.md run 34);
  // VKMOE_GPU_EMBED=0: on the host.
  const vk::GpuWeightType* et = vk::gpu_weight_type(m_.tok_embd.type());
  const uint64_t embd_row = row_bytes(m_.tok_embd.type(), c_.n_embd);
  if (n_ubatch_ > 1 && et && !vk::gpu_weight_type_missing_feature(ctx_->info(), m_.tok_embd.type()) &&
      c_.n_embd % 16 == 0 && embd_row % et->align == 0 && !vk::env_off("VKMOE_GPU_EMBED"))
    in_rows_ = ctx_->create_buffer(n_ubatch_ * embd_row, MemoryKind::Upload, "token rows");
  rb_logits_ = 0;
  rb_rlog_ = uint64_t(c_.n_vocab) * 4;
  rb_xn_ = rb_rlog_ + n_ubatch_ * N * 4;
  rb_plog_ = rb_xn_ + n_ubatch_ * E * 4;
  readback_ = ctx_->create_buffer(rb_plog_ + N * 4, MemoryKind::Readback, "readback");
  if (std::getenv("VKMOE_PROFILE") && ctx_->info().timestamps) {
    prof_ = std::make_unique<vk::TimestampPool>(*ctx_, 64 * c_.n_layer + 16);
    prof_each_ = std::string_view(std::getenv("VKMOE_PROFILE")) == "2";
  }

  if (offload_) {
    for (const LayerWeights& l : m.layers())
      host_biases_.push_back({HostFloats(l.exp_probs_b),
                              {HostFloats(l.gate_exps_b), HostFloats(l.up_exps_b), HostFloats(l.down_exps_b)}});
    prev_route_.assign(c_.n_layer, {});
    predicted_.assign(c_.n_layer, {});
    allocate_expert_cache();
    host_ids_ = ctx_->create_buffer(K * 4, MemoryKind::Upload, "expert slot ids");
    host_eids_ = ctx_->create_buffer(K * 4, MemoryKind::Upload, "expert ids");
    const MoeTableLayout table = MoeTableLayout::make(n_ubatch_, uint32_t(K), uint32_t(N));
    for (int h = 0; h < 2; ++h) {
      host_wts_[h] = ctx_->create_buffer(n_ubatch_ * K * 4, MemoryKind::Upload, "expert weights (host)");
      for (int t = 0; t < 2; ++t)
        host_table_[h][t] = ctx_->create_buffer(table.bytes(), MemoryKind::Upload, "expert table (host)");
    }
    cpu_out_ = ctx_->create_buffer(n_ubatch_ * E * 4, MemoryKind::Upload, "CPU expert output");
    if (staging_slots_ > 0 && n_ubatch_ > 1) allocate_staging();
    if (host_experts_) cache_->copy_from(*host_experts_);
    const uint64_t groups = std::max<uint64_t>({N, uint64_t(cache_->slots()), uint64_t(staging_slots_)});
    for (auto& parity : host_group_expert_)
      for (vk::Buffer& b : parity) b = ctx_->create_buffer(groups * 4, MemoryKind::Upload, "expert of each group");
  }
  if (!vram_shortfall_.empty()) warn_vram_fallback(planned_staging);
  if (!offload_ && n_ubatch_ > 1 && !vk::env_off("VKMOE_PIPELINES_AHEAD")) create_pipelines_ahead();
}

// The pipelines of a whole prompt ubatch and of a decoded token, named by dry
// recordings and compiled by the driver on the pool's threads: compiled one by
// one at the first prompt they took ~2 s on a cold driver cache, the GPU idle
// meanwhile (PERF.md run 35). VKMOE_PIPELINES_AHEAD=0: at first use.
void GpuEngine::create_pipelines_ahead() {
  vk::Recorder dry(*ctx_);
  ctx_->collect_pipelines();
  try {
    vk::Recorder* r = &dry;
    for (uint32_t n : {std::min<uint32_t>(n_ubatch_, uint32_t(n_ctx_)), 1u}) {
      dry.begin_dry();
      record_resident(r, 0, n, /*submit_early=*/false);
      dry.discard();
    }
  } catch (...) {
    ctx_->compile_collected(1);
    throw;
  }
  ctx_->compile_collected(unsigned(pool_ ? pool_->size() : 1));
}

GpuEngine::~GpuEngine() {
  cache_.reset();
  try {
    if (ctx_) ctx_->wait_idle();
  } catch (const Error&) {  // a lost device: its queue waits fail at once
    ctx_->idle_for_teardown();
  }
}

void GpuEngine::reset() {
  pos_ = 0;
  act_->clear_non_finite();
  drop_prepared();
  for (auto& p : prev_route_) p.clear();
}

void GpuEngine::truncate(int n_keep) {
  if (n_keep < 0 || n_keep > pos_) throw Error("truncate: " + std::to_string(n_keep) + " is outside the context");
  pos_ = n_keep;
  drop_prepared();  // recorded for the old position
}

uint64_t GpuEngine::vram_bytes() const { return ctx_->allocated_bytes(MemoryKind::Device); }

vk::Recorder& GpuEngine::next_recorder() {
  vk::Recorder& r = *recorders_[rec_cur_];
  rec_cur_ = (rec_cur_ + 1) % recorders_.size();
  r.begin();
  return r;
}

void GpuEngine::drop_prepared() {
  if (prepared_) prepared_->discard();
  prepared_ = nullptr;
}

// Decoding a 512-token ubatch's rows takes about 0.7 ms on one core (Q4_K
// 2048 wide, the build machine), so a prompt's rows go to the pool.
void GpuEngine::embed(const int32_t* tokens, uint32_t n) {
  for (uint32_t t = 0; t < n; ++t)
    if (tokens[t] < 0 || tokens[t] >= c_.n_vocab)
      throw Error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary");
  if (rows_on_gpu(n)) {
    const size_t rb = row_bytes(m_.tok_embd.type(), c_.n_embd);
    for (uint32_t t = 0; t < n; ++t) std::memcpy(in_rows_.as<uint8_t>() + t * rb, m_.tok_embd.row(tokens[t]), rb);
    return;
  }
  auto rows = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      dequantize_row(m_.tok_embd.type(), m_.tok_embd.row(tokens[t]), in_x_.as<float>() + size_t(t) * c_.n_embd,
                     c_.n_embd);
  };
  if (pool_ && n >= 32)
    pool_->parallel_for(n, rows);
  else
    rows(0, n);
}

void GpuEngine::record_embed(vk::Recorder& r, uint32_t n) const {
  const vk::Buffer& x = act_->x;
  if (!rows_on_gpu(n)) {
    r.copy(in_x_, 0, x, 0, uint64_t(n) * c_.n_embd * 4);
    return;
  }
  struct GetRowsPush {
    uint32_t cols, y_stride;
  };
  const auto& p = ctx_->pipeline(std::string("get_rows_") + vk::gpu_weight_type(m_.tok_embd.type())->suffix, 2,
                                 sizeof(GetRowsPush));
  r.dispatch(p, {in_rows_, x}, GetRowsPush{uint32_t(c_.n_embd), uint32_t(c_.n_embd)}, n);
}

// The logits in the mapped readback buffer.
std::span<const float> GpuEngine::read_logits() const {
  return {reinterpret_cast<const float*>(readback_.data() + rb_logits_), size_t(c_.n_vocab)};
}

// Copies the last token's logits into the readback buffer, flagging NaN/Inf
// there (copy_finite), so that the host checks one word instead of reading them.
void GpuEngine::record_logits_readback(vk::Recorder& r) const {
  struct Push {
    uint32_t n, word;
  };
  const uint32_t n = uint32_t(c_.n_vocab);
  const auto& p = ctx_->pipeline("copy_finite", 3, sizeof(Push));
  r.dispatch(p, {act_->logits, vk::BufferRange(readback_, rb_logits_, uint64_t(n) * 4), act_->non_finite},
             Push{n, Activations::kLogitsFlagWord}, (n + 255) / 256);
}

bool GpuEngine::logits_finite(std::span<const float>) const { return !act_->logits_non_finite(); }

std::span<const float> GpuEngine::forward(const std::vector<int32_t>& tokens) {
  act_->clear_logits_flag();
  if (tokens.empty()) throw Error("eval: no tokens");
  if (pos_ + tokens.size() > size_t(n_ctx_))
    throw Error(std::to_string(tokens.size()) + " tokens do not fit the context (" + std::to_string(pos_) + " of " +
                std::to_string(n_ctx_) + " used); raise --ctx");
  for (size_t t0 = 0; t0 < tokens.size(); t0 += n_ubatch_) {
    const uint32_t n = uint32_t(std::min<size_t>(n_ubatch_, tokens.size() - t0));
    const bool logits = t0 + n == tokens.size();
    if (n == 1)
      offload_ ? decode_offload(tokens[t0]) : decode_resident(tokens[t0]);
    else
      offload_ ? prefill_offload(tokens.data() + t0, n, logits) : prefill_resident(tokens.data() + t0, n, logits);
  }
  if (offload_ && opt_.pin_per_layer > 0 && !cache_->pinned()) cache_->pin_hot(opt_.pin_per_layer);
  return read_logits();
}

LayerProgram::Keep GpuEngine::keep_rows(int il, bool logits) const {
  using Keep = LayerProgram::Keep;
  static const bool all = vk::env_off("VKMOE_LAST_LAYER_ROWS");
  return all || il + 1 < c_.n_layer ? Keep::All : logits ? Keep::Last : Keep::None;
}

// ---- resident schedule: one command buffer per ubatch (or decoded token) ----

// `r` ends as the recorder holding the last layers. With `submit_early`, the
// layers before it are submitted in chunks of 1, 2, 4, 8, ... layers as they
// are recorded, so that the GPU starts while the host records the rest (with
// one submission a pp512 run took 4-8 ms longer than its GPU time; PERF.md run 31).
void GpuEngine::record_resident(vk::Recorder*& r, uint32_t pos0, uint32_t n, bool submit_early, bool logits) {
  record_embed(*r, n);
  // A decoded token's layers may chain (LayerProgram::FusedDecode), not while
  // profiling nor where the fused blocks take the attention. Its chain
  // counters and fused blocks' counters start at zero.
  const bool chain = n == 1 && !profiling_ && !prog_->folds_attention(pos0);
  if (n == 1)
    r->fill(act_->counters, Activations::kChainReady * 4,
            (Activations::moe_fused_counters_end(c_.n_layer) - Activations::kChainReady) * 4, 0);
  r->barrier();
  mark(*r, "start");
  using AttnIn = LayerProgram::AttnIn;
  AttnIn in = AttnIn::X;
  int next_cut = 1;
  bool qkv_chained = false;
  uint32_t chained_wgs = 0;
  if (n == 1) chained_waits_ = 0;
  for (int il = 0; il < c_.n_layer; ++il) {
    // A ubatch's output projection may write the FFN norm of a MoE layer too
    // (VKMOE_PROMPT_FFN_NORM=0: apart).
    static const bool fold_ffn_norm = !vk::env_off("VKMOE_PROMPT_FFN_NORM");
    bool ffn_normed = false;
    const bool moe = m_.layers()[il].spec.moe;
    // A decoded token's MoE block in one dispatch, with what else it takes.
    LayerProgram::FusedDecode fused =
        n == 1 && moe ? prog_->fused_decode(il, chain, pos0, in == AttnIn::Qkv) : LayerProgram::FusedDecode{};
    fused.qkv_chained = qkv_chained;
    fused.att_wgs = chained_wgs;
    n = prog_->attention(*r, il, pos0, n, in, keep_rows(il, logits), moe && fold_ffn_norm ? &ffn_normed : nullptr,
                         &fused);
    chained_wgs = fused.att_wgs;
    chained_waits_ += (fused.qkv_waited ? 1 : 0) + (fused.att_chained ? 1 : 0);
    qkv_chained = false;
    in = AttnIn::X;
    if (n == 0) return;  // nothing reads this ubatch's last hidden states
    if (moe) {
      const bool last = il + 1 == c_.n_layer;
      // A ubatch's combine writes the next layer's attention norm (not the
      // output norm: the head reads one row); VKMOE_PROMPT_COMBINE_NORM=0: apart.
      static const bool prompt_fold = !vk::env_off("VKMOE_PROMPT_COMBINE_NORM");
      const GpuTensor* next_norm = last ? &w_.output_norm : &w_.layers[il + 1].attn_norm;
      if (n > 1 && (last || !prompt_fold)) next_norm = nullptr;
      const bool normed = prog_->moe_resident(*r, il, n, next_norm, ffn_normed, &fused);
      in = fused.next_qkv ? AttnIn::Qkv : normed ? AttnIn::Normed : AttnIn::X;
      qkv_chained = fused.chain_out;
    } else {
      prog_->dense_ffn(*r, il, n);
    }
    if (submit_early && il + 1 == next_cut && il + 1 < c_.n_layer) {
      r->submit();
      r = &next_recorder();
      r->barrier();  // the next layer reads what the submitted ones wrote
      next_cut = 2 * next_cut + 1;
    }
  }
  prog_->output(*r, n - 1, in == AttnIn::Normed);  // the last layer's combine may have written the output norm
  record_logits_readback(*r);
}

void GpuEngine::prefill_resident(const int32_t* tokens, uint32_t n, bool logits) {
  using clock = std::chrono::steady_clock;
  const clock::time_point t0 = clock::now();
  drop_prepared();
  embed(tokens, n);
  const clock::time_point t1 = clock::now();
  vk::Recorder* r = &next_recorder();
  const bool profile = prof_ != nullptr;
  if (profile) begin_profile(*r);
  // VKMOE_CHUNKED_SUBMIT=0: one submission per ubatch (A/B measurements).
  static const bool chunked = !vk::env_off("VKMOE_CHUNKED_SUBMIT");
  record_resident(r, uint32_t(pos_), n, chunked, logits);
  profiling_ = false;
  const clock::time_point t2 = clock::now();
  r->submit().wait();
  pos_ += int(n);
  if (profile) {
    collect_profile(/*prompt=*/true, n);
    auto us = [](clock::time_point a, clock::time_point b) {
      return std::chrono::duration<double, std::micro>(b - a).count();
    };
    if (prof_each_)
      std::fprintf(stderr, "host time of the ubatch: embedding %.0f us, recording %.0f us, then waiting %.0f us\n",
                   us(t0, t1), us(t1, t2), us(t2, clock::now()));
  }
}

void GpuEngine::decode_resident(int32_t token) {
  embed(&token, 1);
  const bool profile = prof_ != nullptr;
  vk::Recorder* r = nullptr;
  if (prepared_ && prepared_pos_ == pos_) {
    r = prepared_;  // recorded while the GPU ran the previous token
    prepared_ = nullptr;
  } else {
    drop_prepared();
    r = &next_recorder();
    if (profile) begin_profile(*r);
    record_resident(r, uint32_t(pos_), 1, false);
    profiling_ = false;
  }
  vk::SyncPoint done = r->submit();
  ++pos_;
  // Decoding goes one token at a time: record the next one (whose position
  // is known) while the GPU works; only its embedding is written later.
  if (!profile && pos_ < n_ctx_) {
    prepared_ = &next_recorder();
    record_resident(prepared_, uint32_t(pos_), 1, false);
    prepared_pos_ = pos_;
  }
  done.wait();
  if (profile) collect_profile(/*prompt=*/false, 1);
  if (clocks_) clocks_->collect();
}

// ---- profiling (VKMOE_PROFILE=1: GPU time per step of each decoded token and prompt ubatch) ----

void GpuEngine::begin_profile(vk::Recorder& r) {
  r.reset_timestamps(*prof_, 0, prof_->count());
  prof_labels_.clear();
  profiling_ = true;
}

void GpuEngine::mark(vk::Recorder& r, const char* label) {
  if (!profiling_ || prof_labels_.size() >= prof_->count()) return;
  r.timestamp(*prof_, static_cast<uint32_t>(prof_labels_.size()));
  prof_labels_.push_back(label);
}

void GpuEngine::collect_profile(bool prompt, uint32_t n_tokens) {
  if (prof_labels_.empty()) return;
  StepTimes& st = prompt ? prof_prompt_ : prof_decode_;
  std::vector<double> ns = prof_->read_ns(0, static_cast<uint32_t>(prof_labels_.size()));
  if (prof_each_ && prompt)
    std::fprintf(stderr, "GPU time of a %u-token ubatch: %.1f us\n", n_tokens, (ns.back() - ns[0]) / 1e3);
  for (size_t i = 1; i < ns.size(); ++i) {
    auto it = std::find_if(st.ns.begin(), st.ns.end(), [&](auto& p) { return p.first == prof_labels_[i]; });
    if (it == st.ns.end()) it = st.ns.insert(st.ns.end(), {prof_labels_[i], 0.0});
    it->second += ns[i] - ns[i - 1];
  }
  ++st.passes;
  st.tokens += n_tokens;
}

namespace {

// "GPU time per <unit> (...): T us" and one line per step.
void report_steps(std::ostream& o, const char* title, const std::vector<std::pair<std::string, double>>& ns,
                  uint64_t passes) {
  double total = 0;
  for (auto& [k, v] : ns) total += v;
  o << title << total / passes / 1e3 << " us\n";
  for (auto& [k, v] : ns) {
    char line[128];
    std::snprintf(line, sizeof line, "  %-22s %9.1f us %5.1f%%\n", k.c_str(), v / passes / 1e3, 100 * v / total);
    o << line;
  }
}

}  // namespace

std::string GpuEngine::describe() const {
  std::ostringstream o;
  const auto& d = ctx_->info();
  o << "vulkan: " << d.name << " (" << d.vendor << ", " << d.driver_name << "), transfer queue "
    << (ctx_->has_separate_transfer_queue() ? "separate" : "shared with compute") << ", experts "
    << plan_mode_name(c_.is_moe() ? plan_.mode : PlanMode::Resident);
  if (offload_)
    o << " (" << plan_.expert_slots_per_layer << " slots/layer of " << c_.n_expert
      << (opt_.predict_prefetch ? ", predictive prefetch" : "")
      << (opt_.pin_per_layer ? ", " + std::to_string(opt_.pin_per_layer) + " pinned" : "") << ", "
      << staging_slots_ << " prefill staging slots)";
  o << ", KV " << vk::kv_type_name(kv_type_) << ", ubatch " << n_ubatch_ << ", VRAM "
    << format_bytes(ctx_->allocated_bytes(MemoryKind::Device));
  return o.str();
}

std::string GpuEngine::stats_report() const {
  std::ostringstream o;
  if (prof_prompt_.passes > 0) {
    const std::string title = "GPU time per prompt ubatch (" + std::to_string(prof_prompt_.passes) + " ubatches, " +
                              std::to_string(prof_prompt_.tokens / prof_prompt_.passes) + " tokens on average): ";
    report_steps(o, title.c_str(), prof_prompt_.ns, prof_prompt_.passes);
  }
  if (prof_decode_.passes > 0) {
    const std::string title = "GPU time per decoded token (" + std::to_string(prof_decode_.passes) + " tokens): ";
    report_steps(o, title.c_str(), prof_decode_.ns, prof_decode_.passes);
  }
  if (clocks_) o << clocks_->report();
  if (chained_waits_ > 0)
    o << "chained decode layers: " << chained_waits_
      << " dispatches a token wait for the one before by a counter instead of a barrier\n";
  if (!offload_) return o.str() + "expert statistics: all experts resident in VRAM (no cache, no transfers)\n";
  const PrefillStats& p = prefill_stats_;
  if (p.layer_passes > 0) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "prompt processing: %llu ubatches; per ubatch and layer on average %.1f experts from VRAM slots, "
                  "%.1f uploaded once (%.1f MiB), %.1f on the CPU (%.2f ms); upload rate %.1f GB/s\n",
                  (unsigned long long)p.ubatches, double(p.cached) / p.layer_passes,
                  double(p.uploaded) / p.layer_passes, p.bytes_uploaded / double(p.layer_passes) / (1 << 20),
                  double(p.on_cpu) / p.layer_passes, 1e3 * p.cpu_seconds / p.layer_passes,
                  split_costs_.upload_bytes_per_s / 1e9);
    o << line;
  }
  return o.str() + stats_.report();
}

std::unique_ptr<Engine> make_gpu_engine(const Model& m, const EngineOptions& o) {
  return std::make_unique<GpuEngine>(m, o);
}

}  // namespace vkmoe
