// The offload schedule: per layer the host waits once, for the router. The
// GPU's attention and router run first (pass A); the host routes, finds the
// experts in VRAM slots, and sends the GPU its experts (pass B) while the CPU
// computes the rest; their output joins the residual at the next layer's A.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "base/clock.h"
#include "cpu/expert_batch.h"
#include "cpu/moe_route.h"
#include "cpu/thread_pool.h"
#include "engine/forward/gpu_engine.h"
#include "engine/vulkan/vk_moe.h"

namespace vkmoe {

// Expert e's row of layer il's bias table `which` (0 gate, 1 up, 2 down) as floats.
const float* GpuEngine::expert_bias(int il, int which, int e) const {
  const LayerWeights& lw = m_.layers()[il];
  const Weight& b = which == 0 ? lw.gate_exps_b : which == 1 ? lw.up_exps_b : lw.down_exps_b;
  return host_biases_[il].experts[which].data() + int64_t(e) * b.in();
}

ExpertView GpuEngine::expert_view(int il, int e) const {
  const LayerWeights& lw = m_.layers()[il];
  ExpertView v{lw.gate_exps.type(), lw.up_exps.type(), lw.down_exps.type(), lw.gate_exps.expert(e),
               lw.up_exps.expert(e), lw.down_exps.expert(e), c_.n_embd, c_.n_ff_exp};
  if (lw.spec.expert_bias) {
    v.gate_b = expert_bias(il, 0, e);
    v.up_b = expert_bias(il, 1, e);
    v.down_b = expert_bias(il, 2, e);
  }
  v.act = lw.spec.act == FfnAct::OaiSwiGLU ? GluAct::OaiSwiGLU : GluAct::SiLU;
  return v;
}

// One timed CPU pass of a layer-0 expert over a few tokens seeds the CPU cost.
void GpuEngine::calibrate_cpu_experts() {
  const int n = 8, E = c_.n_embd;
  std::vector<float> x(size_t(n) * E), out(size_t(n) * E, 0.f), w(n, 1.f / n);
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  for (float& v : x) v = d(rng);
  std::vector<int32_t> toks(n);
  for (int i = 0; i < n; ++i) toks[i] = i;
  int il = 0;
  while (il < c_.n_layer && !m_.layers()[il].spec.moe) ++il;
  if (il == c_.n_layer) return;
  ExpertBatch b{expert_view(il, 0), toks.data(), w.data(), n};
  const auto t0 = std::chrono::steady_clock::now();
  expert_ffn_batched(&b, 1, x.data(), E, out.data(), E, *pool_);
  const double s = seconds_since(t0);
  const LayerWeights& lw = m_.layers()[il];
  const uint64_t bytes = lw.routed_expert_bytes();
  split_costs_.cpu_s_per_token_byte = s / (double(bytes) * std::max(n, SplitCosts::kCpuMinTokens));
}

// ---- decode: one token ----

void GpuEngine::record_offload_a(vk::Recorder& r, int il) {
  const Activations& a = *act_;
  const uint32_t E = c_.n_embd, N = c_.n_expert;
  if (il == 0)
    r.copy(in_x_, 0, a.x, 0, uint64_t(E) * 4);
  else
    ops_->add_rows(r, Rows(cpu_out_, E), Rows(a.x, E), E, 1);  // the previous layer's CPU experts
  r.barrier();
  prog_->attention(r, il, uint32_t(pos_), 1, LayerProgram::AttnIn::X);
  if (!m_.layers()[il].spec.moe) return;
  prog_->ffn_norm(r, il, 1);
  prog_->router(r, il, 1);
  const bool predict = predicts(il);
  if (predict) {  // layer il+1's router applied to this layer's hidden state
    ops_->rms_norm(r, Rows(a.x, E), &w_.layers[il + 1].ffn_norm, Rows(a.so, E), E, 1, c_.norm_eps);
    r.barrier();
    prog_->router_of(r, il + 1, Rows(a.so, E), 1, /*row0=*/1);
  }
  r.barrier();
  r.copy(a.rlog, 0, readback_, rb_rlog_, uint64_t(N) * 4);
  r.copy(a.xn, 0, readback_, rb_xn_, uint64_t(E) * 4);
  if (predict) r.copy(a.rlog, uint64_t(N) * 4, readback_, rb_plog_, uint64_t(N) * 4);
}

void GpuEngine::record_offload_b(vk::Recorder& r, int il) {
  if (!m_.layers()[il].spec.moe) return prog_->dense_ffn(r, il, 1);
  if (cache_->slots() > 0) {
    prog_->experts_decode(r, il, {&cache_->gate_pool(il), &cache_->up_pool(il), &cache_->down_pool(il),
                                  uint32_t(cache_->slots())},
                          host_ids_, &host_eids_);
    // Items computed on the CPU have weight 0 here (their stale, finite outputs drop out).
    prog_->combine_decode(r, host_wts_[0]);
  }
  prog_->shared_expert(r, il, 1);
}

void GpuEngine::record_offload_end(vk::Recorder& r, uint32_t n) {
  const uint32_t E = c_.n_embd;
  ops_->add_rows(r, Rows(cpu_out_, E), Rows(act_->x, E), E, n);
  r.barrier();
  prog_->output(r, n - 1, false);
  record_logits_readback(r);
}

// While the GPU runs a layer's attention the host has already recorded that
// layer's experts and the next layer's attention; only slot ids, weights and
// the CPU experts' output (host-visible buffers) are filled in after routing.
void GpuEngine::decode_offload(int32_t token) {
  drop_prepared();
  embed(&token, 1);
  const int L = c_.n_layer;
  auto record_next_a = [&](int il) {
    vk::Recorder* r = &next_recorder();
    if (il < L)
      record_offload_a(*r, il);
    else
      record_offload_end(*r, 1);
    return r;
  };
  vk::Recorder* a = record_next_a(0);
  vk::SyncPoint routed = a->submit();
  vk::Recorder* b = &next_recorder();
  record_offload_b(*b, 0);
  a = record_next_a(1);
  routed.wait();
  for (int il = 0; il < L; ++il) {
    const bool predict = predicts(il);
    std::vector<vk::SyncPoint> waits;
    std::vector<ExpertView> cold;
    std::vector<float> cold_w;
    std::vector<int> cold_ids;
    if (m_.layers()[il].spec.moe) route_offload(il, waits, cold, cold_w, cold_ids);
    b->submit(waits);  // the GPU works on the hits while the host computes the misses
    float* cpu_out = cpu_out_.as<float>();
    if (cold.empty()) {
      std::fill(cpu_out, cpu_out + c_.n_embd, 0.f);
    } else {
      const float* xn = reinterpret_cast<const float*>(readback_.data() + rb_xn_);
      moe_ffn_cpu(cold.data(), cold_w.data(), int(cold.size()), xn, cpu_out, *pool_,
                  opt_.cpu_q8 ? CpuActivations::Q8 : CpuActivations::F32);
    }
    cache_maintenance(il, predict);
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
  route_topk(rl, probs_bias(il), N, K, c_.router, ids.data(), w.data());
  if (il > 0 && predicts(il - 1)) stats_.record_routing(il, predicted_[il], ids);
  stats_.record_route(il, ids);
  prev_route_[il] = ids;
  cache_->drain();
  int32_t* slot_ids = host_ids_.as<int32_t>();
  int32_t* expert_ids = host_eids_.as<int32_t>();
  float* slot_w = host_wts_[0].as<float>();
  int hits = 0;
  for (int j = 0; j < K; ++j) {
    std::optional<int> slot = cache_->lookup(il, ids[j], waits);
    slot_ids[j] = slot ? *slot : -1;
    expert_ids[j] = slot ? ids[j] : -1;
    slot_w[j] = slot ? w[j] : 0.f;
    if (slot) {
      ++hits;
    } else {
      cold.push_back(expert_view(il, ids[j]));
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
  for (auto [l, e] : pending_admit_) cache_->admit(l, e);
  pending_admit_.clear();
  if (!predict) return;
  std::vector<int> ids(c_.n_expert_used);
  std::vector<float> w(c_.n_expert_used);
  route_topk(reinterpret_cast<const float*>(readback_.data() + rb_plog_), probs_bias(il + 1), c_.n_expert,
             c_.n_expert_used, c_.router, ids.data(), w.data());
  predicted_[il + 1] = ids;
  if (plan_.mode != PlanMode::ExpertCache) return;
  std::vector<int> want = ids;
  for (int e : prev_route_[il + 1])
    if (std::find(want.begin(), want.end(), e) == want.end()) want.push_back(e);
  for (int e : want) cache_->admit(il + 1, e);
}

// ---- prompt processing: a ubatch of n tokens ----

void GpuEngine::prefill_offload(const int32_t* tokens, uint32_t n, bool logits) {
  drop_prepared();
  embed(tokens, n);
  const Activations& a = *act_;
  const uint32_t E = c_.n_embd, N = c_.n_expert, K = c_.n_expert_used;
  const int L = c_.n_layer;
  std::vector<int32_t> ids(size_t(n) * K);
  std::vector<float> wts(size_t(n) * K);
  float* cpu_out = cpu_out_.as<float>();
  std::fill(cpu_out, cpu_out + size_t(n) * E, 0.f);
  ++prefill_stats_.ubatches;
  uint32_t rows = n;  // past the attention: fewer in the last layer (keep_rows)
  for (int il = 0; il < L; ++il) {
    // A: attention and router; the host reads the router logits and xn.
    vk::Recorder& ra = next_recorder();
    if (il == 0)
      record_embed(ra, n);
    else
      ops_->add_rows(ra, Rows(cpu_out_, E), Rows(a.x, E), E, n);
    ra.barrier();
    rows = prog_->attention(ra, il, uint32_t(pos_), n, LayerProgram::AttnIn::X, keep_rows(il, logits));
    if (rows == 0) {  // the keys and values were all this layer had to store
      ra.submit().wait();
      break;
    }
    const bool moe = m_.layers()[il].spec.moe;
    if (moe) {
      prog_->ffn_norm(ra, il, rows);
      prog_->router(ra, il, rows);
      ra.barrier();
      ra.copy(a.rlog, 0, readback_, rb_rlog_, uint64_t(rows) * N * 4);
      ra.copy(a.xn, 0, readback_, rb_xn_, uint64_t(rows) * E * 4);
    }
    ra.submit().wait();
    std::fill(cpu_out, cpu_out + size_t(rows) * E, 0.f);
    if (!moe) {
      vk::Recorder& rb = next_recorder();
      prog_->dense_ffn(rb, il, rows);
      rb.submit();
      continue;
    }

    // Route every token; gather each expert's tokens.
    const float* rl = reinterpret_cast<const float*>(readback_.data() + rb_rlog_);
    for (uint32_t t = 0; t < rows; ++t)
      route_topk(rl + size_t(t) * N, probs_bias(il), int(N), int(K), c_.router,
                 ids.data() + t * K, wts.data() + t * K);
    std::vector<std::vector<int32_t>> tokens_of(N);
    std::vector<std::vector<float>> weights_of(N);
    for (uint32_t t = 0; t < rows; ++t)
      for (uint32_t j = 0; j < K; ++j) {
        tokens_of[ids[t * K + j]].push_back(int32_t(t));
        weights_of[ids[t * K + j]].push_back(wts[t * K + j]);
      }

    // Where each active expert runs: its VRAM slot, a staging slot, or the CPU.
    const int h = il & 1;
    cache_->drain();
    std::vector<vk::SyncPoint> waits;
    std::vector<int32_t> cache_group(N, -1), stage_group(N, -1);
    std::vector<ExpertDemand> misses;
    const LayerWeights& lw = m_.layers()[il];
    const uint64_t expert_bytes = lw.routed_expert_bytes();
    int cached = 0;
    for (uint32_t e = 0; e < N; ++e) {
      if (tokens_of[e].empty()) continue;
      if (std::optional<int> slot = cache_->lookup(il, int(e), waits)) {
        cache_group[e] = *slot;
        ++cached;
      } else {
        misses.push_back({int(e), int(tokens_of[e].size()), expert_bytes});
      }
    }
    const std::vector<bool> upload =
        host_experts_ ? split_experts(misses, split_costs_, staging_slots_) : std::vector<bool>(misses.size(), false);
    std::vector<ExpertBatch> cpu_batches;
    std::vector<ExpertDemand> cpu_demands;
    int staged = 0;
    vk::Recorder* copies = nullptr;
    for (size_t i = 0; i < misses.size(); ++i) {
      const int e = misses[i].expert;
      if (upload[i]) {
        if (!copies) {
          if (!staging_copies_) staging_copies_ = std::make_unique<vk::Recorder>(*ctx_, &ctx_->transfer_queue());
          copies = staging_copies_.get();
          copies->begin();  // the previous layer's copies are complete: its B pass waited for them
        }
        host_experts_->record_copy(*copies, il, e, staging_[h].gate, staging_[h].up, staging_[h].down, staged);
        stage_group[e] = staged++;
      } else {
        cpu_batches.push_back({expert_view(il, e), tokens_of[e].data(), weights_of[e].data(),
                               int(tokens_of[e].size())});
        cpu_demands.push_back(misses[i]);
      }
    }
    if (copies) waits.push_back(copies->submit());

    // B: the GPU's experts (VRAM slots, then staging) and the shared expert.
    std::memcpy(host_wts_[h].as<float>(), wts.data(), wts.size() * 4);
    vk::Recorder& rb = next_recorder();
    // One grouped pass per weight pool, its table built here from the groups of each expert.
    // The expert of each group (slot) goes along for the per-expert biases.
    auto run_pool = [&](const ExpertBuffers& pool, const std::vector<int32_t>& group_of, int t) {
      const vk::Buffer& table = host_table_[h][t];
      vk::build_moe_table(ids.data(), MoeTableLayout::make(rows, K, pool.count), group_of.data(), N, table.as<uint32_t>());
      int32_t* expert_of = host_group_expert_[h][t].as<int32_t>();
      std::fill(expert_of, expert_of + pool.count, -1);
      for (uint32_t e = 0; e < N; ++e)
        if (group_of[e] >= 0) expert_of[group_of[e]] = int32_t(e);
      prog_->experts_grouped(rb, il, pool, table, host_wts_[h], rows, &host_group_expert_[h][t]);
    };
    if (cached > 0)
      run_pool({&cache_->gate_pool(il), &cache_->up_pool(il), &cache_->down_pool(il), uint32_t(cache_->slots())},
               cache_group, 0);
    if (staged > 0)
      run_pool({&staging_[h].gate, &staging_[h].up, &staging_[h].down, uint32_t(staging_slots_)}, stage_group, 1);
    // Expert-cache mode keeps the most used uploaded experts: a device copy from staging.
    std::vector<std::pair<int, int>> kept;  // (cache slot, expert)
    if (plan_.mode == PlanMode::ExpertCache && staged > 0) {
      std::vector<int> order;
      for (uint32_t e = 0; e < N; ++e)
        if (stage_group[e] >= 0) order.push_back(int(e));
      std::stable_sort(order.begin(), order.end(),
                       [&](int x, int y) { return tokens_of[x].size() > tokens_of[y].size(); });
      const int keep = std::min<int>(int(order.size()), std::max(1, cache_->slots() / 2));
      for (int i = 0; i < keep; ++i) {
        std::optional<int> slot = cache_->reserve(il, order[i]);
        if (!slot) continue;
        for (auto [wt, src, dst] : {std::tuple{&lw.gate_exps, &staging_[h].gate, &cache_->gate_pool(il)},
                                    {&lw.up_exps, &staging_[h].up, &cache_->up_pool(il)},
                                    {&lw.down_exps, &staging_[h].down, &cache_->down_pool(il)}})
          rb.copy(*src, wt->expert_bytes() * stage_group[order[i]], *dst, wt->expert_bytes() * *slot,
                  wt->expert_bytes());
        kept.push_back({*slot, order[i]});
      }
      if (!kept.empty()) rb.barrier();
    }
    prog_->shared_expert(rb, il, rows);
    const vk::SyncPoint b_done = rb.submit(waits);
    for (auto [slot, e] : kept) cache_->filled(il, slot, b_done);

    // Meanwhile the CPU runs its experts over xn, weights read once per expert.
    if (!cpu_batches.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      const float* xn = reinterpret_cast<const float*>(readback_.data() + rb_xn_);
      expert_ffn_batched(cpu_batches.data(), int(cpu_batches.size()), xn, E, cpu_out, E, *pool_,
                         opt_.cpu_q8 ? CpuActivations::Q8 : CpuActivations::F32);
      const double s = seconds_since(t0);
      split_costs_.observe_cpu(cpu_demands, s);
      prefill_stats_.cpu_seconds += s;
    }
    ++prefill_stats_.layer_passes;
    prefill_stats_.cached += cached;
    prefill_stats_.uploaded += staged;
    prefill_stats_.on_cpu += cpu_batches.size();
    prefill_stats_.bytes_uploaded += uint64_t(staged) * expert_bytes;
    stats_.record_cache(il, cached, misses.size());
    stats_.record_compute(il, cached + staged, cpu_batches.size());
    if (staged > 0) stats_.record_upload(il, uint64_t(staged) * expert_bytes);
  }
  if (rows > 0) {
    vk::Recorder& re = next_recorder();
    record_offload_end(re, rows);
    re.submit().wait();
  }
  pos_ += int(n);
  stats_.add_tokens(n);
}

}  // namespace vkmoe
