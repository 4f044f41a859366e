#include "engine/forward/cpu_forward.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/ffn_act.h"
#include "cpu/moe_route.h"
#include "cpu/quant.h"
#include "cpu/rope.h"
#include "cpu/simd_kernels.h"
#include "cpu/thread_pool.h"
#include "engine/forward/attention_ref.h"
#include "engine/forward/non_finite.h"

namespace vkmoe {

std::vector<float> to_f32(const Weight& w) {
  if (!w) return {};
  std::vector<float> out(static_cast<size_t>(w.t->nelements()));
  dequantize_row(w.type(), w.t->data, out.data(), w.t->nelements());
  return out;
}

void rms_norm(const float* x, const float* w, float* y, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) y[i] = x[i] * scale * (w ? w[i] : 1.f);
}

CpuForward::CpuForward(const Model& model, int n_ctx, Kernels kernels, int n_threads, ThreadPlacement placement)
    : model_(model), c_(model.config()), n_ctx_(n_ctx), kernels_(kernels) {
  if (n_ctx <= 0) throw Error("context size must be positive");
  if (kernels_ == Kernels::Simd) pool_ = std::make_unique<ThreadPool>(n_threads, placement);
  k_cache_.assign(size_t(c_.n_layer) * n_ctx * c_.kv_dim(), 0.f);
  v_cache_.assign(size_t(c_.n_layer) * n_ctx * c_.v_dim(), 0.f);
  for (const auto& l : model.layers()) {
    lf_.push_back({to_f32(l.attn_norm), to_f32(l.ffn_norm), to_f32(l.q_norm), to_f32(l.k_norm),
                   to_f32(l.bq), to_f32(l.bk), to_f32(l.bv), to_f32(l.shexp_gate), to_f32(l.exp_probs_b),
                   to_f32(l.bo), to_f32(l.router_b), to_f32(l.attn_sinks), to_f32(l.q_a_norm),
                   to_f32(l.kv_a_norm)});
  }
  output_norm_ = to_f32(model.output_norm);
  if (c_.is_mla()) {
    mla_qh_.resize(size_t(c_.n_head) * c_.mla.head_k);
    mla_qa_.resize(c_.mla.q_lora);
    mla_kva_.resize(c_.mla.kv_lora + c_.n_rot);
  }
}

CpuForward::~CpuForward() = default;

void CpuForward::matvec(const Weight& w, const float* x, float* y, int expert) const {
  const int64_t n = w.in(), rows = w.out();
  const uint8_t* base = expert >= 0 ? w.expert(expert) : w.t->data;
  const size_t rb = w.row_bytes();
  if (kernels_ == Kernels::Scalar) {
    for (int64_t r = 0; r < rows; ++r) y[r] = dot_row_f32(w.type(), base + r * rb, x, n);
    return;
  }
  // f32 activations: the same arithmetic as the reference and the GPU path.
  const int64_t grain = std::max<int64_t>(1, rows / (8 * pool_->size()));
  pool_->parallel_for((rows + grain - 1) / grain, [&](int64_t b, int64_t e) {
    const int64_t r0 = b * grain, r1 = std::min(rows, e * grain);
    matvec_rows_f32(w.type(), base, x, y + r0, r0, r1, n);
  });
}

namespace {

// Row e of a {width, n_expert} bias table, as floats.
std::vector<float> bias_row(const Weight& b, int e, int width) {
  std::vector<float> v(width);
  dequantize_row(b.type(), b.row(e), v.data(), width);
  return v;
}

}  // namespace

void CpuForward::swiglu_ffn(const Weight& gate, const Weight& up, const Weight& down, int expert,
                            const float* x, float* out, int n_ff, FfnAct act, const LayerWeights* biases) const {
  std::vector<float> g(n_ff), u(n_ff);
  matvec(gate, x, g.data(), expert);
  matvec(up, x, u.data(), expert);
  if (biases) {
    const std::vector<float> gb = bias_row(biases->gate_exps_b, expert, n_ff);
    const std::vector<float> ub = bias_row(biases->up_exps_b, expert, n_ff);
    for (int i = 0; i < n_ff; ++i) g[i] += gb[i], u[i] += ub[i];
  }
  const GluAct a = act == FfnAct::OaiSwiGLU ? GluAct::OaiSwiGLU : GluAct::SiLU;
  for (int i = 0; i < n_ff; ++i) g[i] = glu(a, g[i], u[i]);
  matvec(down, g.data(), out, expert);
  if (biases) {
    const int E = static_cast<int>(down.out());
    const std::vector<float> db = bias_row(biases->down_exps_b, expert, E);
    for (int i = 0; i < E; ++i) out[i] += db[i];
  }
}

void CpuForward::ffn_moe(int il, const float* x, float* out) {
  const auto& l = model_.layers()[il];
  const int E = c_.n_embd, K = c_.n_expert_used;
  std::vector<float> logits(c_.n_expert);
  matvec(l.router, x, logits.data());
  if (l.spec.router_bias)
    for (int e = 0; e < c_.n_expert; ++e) logits[e] += lf_[il].router_b[e];
  Route& r = routes_[il];
  r.experts.resize(K);
  r.weights.resize(K);
  const float* bias = l.spec.probs_bias ? lf_[il].exp_probs_b.data() : nullptr;
  float margin = 0;
  route_topk(logits.data(), bias, c_.n_expert, K, c_.router, r.experts.data(), r.weights.data(), &margin);
  min_route_margin_ = std::min(min_route_margin_, margin);
  std::fill(out, out + E, 0.f);
  std::vector<float> y(E);
  for (int j = 0; j < K; ++j) {
    swiglu_ffn(l.gate_exps, l.up_exps, l.down_exps, r.experts[j], x, y.data(), c_.n_ff_exp, l.spec.act,
               l.spec.expert_bias ? &l : nullptr);
    for (int i = 0; i < E; ++i) out[i] += r.weights[j] * y[i];
  }
  if (l.spec.shared != SharedExpert::None) {
    swiglu_ffn(l.gate_shexp, l.up_shexp, l.down_shexp, -1, x, y.data(), c_.n_ff_shexp, l.spec.act);
    float gate = 1.f;
    if (l.spec.shared == SharedExpert::Gated) {
      double g = 0;
      for (int i = 0; i < E; ++i) g += double(lf_[il].shexp_gate[i]) * x[i];
      gate = static_cast<float>(1.0 / (1.0 + std::exp(-g)));
    }
    for (int i = 0; i < E; ++i) out[i] += gate * y[i];
  }
}

void CpuForward::truncate(int n_keep) {
  if (n_keep < 0 || n_keep > pos_) throw Error("truncate: " + std::to_string(n_keep) + " is outside the context");
  pos_ = n_keep;
}

void CpuForward::check_finite(const float* x, size_t n, uint32_t site) {
  if ((first_non_finite_ == 0 || site < first_non_finite_) && !all_finite(x, n)) first_non_finite_ = site;
}

void CpuForward::project_gqa(int il, const float* xn, int p, float* qt, float* kt, float* vt) {
  const auto& l = model_.layers()[il];
  const auto& lf = lf_[il];
  const int Q = c_.q_dim(), KV = c_.kv_dim(), D = c_.head_dim;
  const RopeParams rp = c_.rope();
  matvec(l.wq, xn, qt);
  matvec(l.wk, xn, kt);
  matvec(l.wv, xn, vt);
  if (l.spec.qkv_bias) {
    for (int i = 0; i < Q; ++i) qt[i] += lf.bq[i];
    for (int i = 0; i < KV; ++i) kt[i] += lf.bk[i], vt[i] += lf.bv[i];
  }
  if (l.spec.qk_norm == QkNorm::PerHead) {
    for (int h = 0; h < c_.n_head; ++h) rms_norm(qt + h * D, lf.q_norm.data(), qt + h * D, D, c_.norm_eps);
    for (int h = 0; h < c_.n_head_kv; ++h) rms_norm(kt + h * D, lf.k_norm.data(), kt + h * D, D, c_.norm_eps);
  } else if (l.spec.qk_norm == QkNorm::Whole) {  // olmoe
    rms_norm(qt, lf.q_norm.data(), qt, Q, c_.norm_eps);
    rms_norm(kt, lf.k_norm.data(), kt, KV, c_.norm_eps);
  }
  for (int h = 0; h < c_.n_head; ++h) rope(qt + h * D, D, p, rp);
  for (int h = 0; h < c_.n_head_kv; ++h) rope(kt + h * D, D, p, rp);
}

// Absorbed latent attention (as llama.cpp runs deepseek2): a query head is
// [its rotated rope part | attn_k_b . its no-rope part], the cached row
// [the rotated shared rope key | the normalized latent], so q . k is the
// model's score, and the latent doubles as the value.
void CpuForward::project_mla(int il, const float* xn, int p, float* qt, float* kt) {
  const auto& l = model_.layers()[il];
  const auto& lf = lf_[il];
  const ModelConfig::Mla& m = c_.mla;
  const int R = c_.n_rot, D = c_.head_dim, nope = m.head_k - R;
  const RopeParams rp = c_.rope();
  float *qh = mla_qh_.data(), *qa = mla_qa_.data(), *kva = mla_kva_.data();
  if (m.q_lora > 0) {
    matvec(l.wq_a, xn, qa);
    rms_norm(qa, lf.q_a_norm.data(), qa, m.q_lora, c_.norm_eps);
    matvec(l.wq_b, qa, qh);
  } else {
    matvec(l.wq, xn, qh);
  }
  for (int h = 0; h < c_.n_head; ++h) {
    const float* src = &qh[size_t(h) * m.head_k];
    float* dst = qt + size_t(h) * D;
    std::copy(src + nope, src + m.head_k, dst);
    matvec(l.wk_b, src, dst + R, h);
    rope(dst, D, p, rp);
  }
  matvec(l.wkv_a, xn, kva);
  std::copy(kva + m.kv_lora, kva + m.kv_lora + R, kt);
  rms_norm(kva, lf.kv_a_norm.data(), kt + R, m.kv_lora, c_.norm_eps);
  rope(kt, D, p, rp);
}

void CpuForward::expand_mla(int il, const float* att, float* out) const {
  const auto& l = model_.layers()[il];
  for (int h = 0; h < c_.n_head; ++h)
    matvec(l.wv_b, att + size_t(h) * c_.head_dim + c_.n_rot, out + size_t(h) * c_.mla.head_v, h);
}

std::vector<float> CpuForward::eval(const std::vector<int32_t>& tokens) {
  const int T = static_cast<int>(tokens.size());
  if (T == 0) throw Error("eval: no tokens");
  if (pos_ + T > n_ctx_)
    throw Error("context is full (" + std::to_string(n_ctx_) + " tokens); raise --ctx");
  const int E = c_.n_embd, Q = c_.q_dim(), KV = c_.kv_dim();
  routes_.assign(c_.n_layer, {});
  min_route_margin_ = std::numeric_limits<float>::infinity();

  std::vector<float> x(size_t(T) * E);
  for (int t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c_.n_vocab)
      throw Error("token id " + std::to_string(tokens[t]) + " is outside the vocabulary");
    dequantize_row(model_.tok_embd.type(), model_.tok_embd.row(tokens[t]), &x[size_t(t) * E], E);
  }
  check_finite(x.data(), x.size(), non_finite_site::layer_input(0));
  std::vector<float> xn(E), q(size_t(T) * Q), att(Q), ao(c_.attn_out_dim()), o(E), f(E), scores(n_ctx_);
  for (int il = 0; il < c_.n_layer; ++il) {
    const auto& l = model_.layers()[il];
    const auto& lf = lf_[il];
    float* kc = &k_cache_[size_t(il) * n_ctx_ * KV];
    float* vc = l.spec.mla ? kc : &v_cache_[size_t(il) * n_ctx_ * KV];
    for (int t = 0; t < T; ++t) {
      const int p = pos_ + t;
      rms_norm(&x[size_t(t) * E], lf.attn_norm.data(), xn.data(), E, c_.norm_eps);
      if (l.spec.mla)
        project_mla(il, xn.data(), p, &q[size_t(t) * Q], kc + size_t(p) * KV);
      else
        project_gqa(il, xn.data(), p, &q[size_t(t) * Q], kc + size_t(p) * KV, vc + size_t(p) * KV);
    }
    AttentionRefShape as;
    as.head_dim = c_.head_dim;
    as.n_head = c_.n_head;
    as.n_head_kv = c_.n_head_kv;
    as.scale = c_.attn_scale();
    as.window = l.spec.window;
    as.sinks = l.spec.sinks ? lf.attn_sinks.data() : nullptr;
    for (int t = 0; t < T; ++t) {
      attend_ref(&q[size_t(t) * Q], kc, vc, KV, pos_ + t, as, att.data(), scores);
      float* xt = &x[size_t(t) * E];
      if (l.spec.mla) expand_mla(il, att.data(), ao.data());
      matvec(l.wo, l.spec.mla ? ao.data() : att.data(), o.data());
      for (int i = 0; i < E; ++i) xt[i] += o[i];
      if (l.spec.o_bias)
        for (int i = 0; i < E; ++i) xt[i] += lf.bo[i];
      check_finite(xt, E, non_finite_site::after_attention(il));
      rms_norm(xt, lf.ffn_norm.data(), xn.data(), E, c_.norm_eps);
      if (l.spec.moe)
        ffn_moe(il, xn.data(), f.data());
      else
        swiglu_ffn(l.ffn_gate, l.ffn_up, l.ffn_down, -1, xn.data(), f.data(), c_.n_ff, l.spec.act);
      for (int i = 0; i < E; ++i) xt[i] += f[i];
      check_finite(xt, E, non_finite_site::layer_input(il + 1));
    }
  }
  pos_ += T;
  rms_norm(&x[size_t(T - 1) * E], output_norm_.data(), xn.data(), E, c_.norm_eps);
  std::vector<float> logits(c_.n_vocab);
  matvec(model_.output, xn.data(), logits.data());
  return logits;
}

}  // namespace vkmoe
