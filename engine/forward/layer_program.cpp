#include "engine/forward/layer_program.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/forward/non_finite.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/vk_moe.h"

namespace vkmoe {
namespace {

struct AxpyPush {
  uint32_t n, items, x_off, a_off, y_off, mode;
  float scale;
};
struct CombineNormPush {
  uint32_t n, items;
  float eps;
  uint32_t check;
};

uint32_t div_up(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

LayerProgram::LayerProgram(const Model& m, const GpuModel& g, Activations& a, const GpuOps& ops, vk::KvType kv,
                           Mark mark)
    : m_(m), c_(m.config()), g_(g), a_(a), ops_(ops), kv_(kv), mark_(std::move(mark)) {}

bool LayerProgram::qkv_take_f16_rows(int il, uint32_t n) const {
  const GpuLayer& g = g_.layers[il];
  return !m_.layers()[il].spec.mla && c_.n_embd % 4 == 0 && ops_.takes_f16_rows(g.wq.type, n) &&
         ops_.takes_f16_rows(g.wk.type, n) && ops_.takes_f16_rows(g.wv.type, n);
}

std::vector<vk::GemmSplitSum> LayerProgram::project_gqa(vk::Recorder& r, int il, uint32_t n, bool f16_rows,
                                                        bool leave_kv_sums) const {
  const GpuLayer& g = g_.layers[il];
  const LayerSpec& spec = m_.layers()[il].spec;
  const uint32_t E = c_.n_embd, Q = c_.q_dim(), KV = c_.kv_dim();
  const Rows xn = f16_rows ? Rows(a_.xh, E).halfs() : Rows(a_.xn, E);
  const Rows q(a_.q, Q), k(a_.k, KV), v(a_.v, KV);
  // k and v split their long rows (few outputs) in halves of their own; their
  // partial products run beside q's, their sums after one barrier
  // (VKMOE_QKV_TOGETHER=0: k's and v's each after a barrier of its own, then q).
  static const bool together = !vk::env_off("VKMOE_QKV_TOGETHER");
  std::vector<vk::GemmSplitSum> sums;
  std::vector<vk::GemmSplitSum>* later = together ? &sums : nullptr;
  if (together) ops_.linear(r, g.wq, xn, q, n);
  ops_.linear(r, g.wk, xn, k, n, false, SplitK::kHalfA, later);
  ops_.linear(r, g.wv, xn, v, n, false, SplitK::kHalfB, later);
  if (!together) ops_.linear(r, g.wq, xn, q, n);
  r.barrier();
  // k's and v's sums may be left to the rope/store kernel, which adds the
  // planes itself: both alike, rows KV long, nothing between them.
  auto leavable = [&](const vk::GemmSplitSum& s) {
    return s.planes_are_rows() && s.nrows == KV && s.splits == sums[0].splits && s.plane == sums[0].plane;
  };
  if (leave_kv_sums && !spec.qkv_bias && spec.qk_norm != QkNorm::Whole && sums.size() == 2 &&
      sums[0].y.buffer == a_.k.handle() && sums[1].y.buffer == a_.v.handle() && leavable(sums[0]) &&
      leavable(sums[1])) {
    mark_(r, "q/k/v");
    return sums;
  }
  if (!sums.empty()) {
    vk::record_gemm_split_sums(r, sums);
    r.barrier();
  }
  mark_(r, "q/k/v");
  if (spec.qkv_bias) {
    ops_.add_rows(r, Rows(g.bq.buf, 0), q, Q, n);
    ops_.add_rows(r, Rows(g.bk.buf, 0), k, KV, n);
    ops_.add_rows(r, Rows(g.bv.buf, 0), v, KV, n);
    r.barrier();
  }
  if (spec.qk_norm == QkNorm::Whole) {
    ops_.rms_norm(r, q, &g.q_norm, q, Q, n, c_.norm_eps);
    ops_.rms_norm(r, k, &g.k_norm, k, KV, n, c_.norm_eps);
    r.barrier();
  }
  return {};
}

uint32_t LayerProgram::attention(vk::Recorder& r, int il, uint32_t pos0, uint32_t n, AttnIn in, Keep keep,
                                 bool* ffn_normed, FusedDecode* fused) const {
  const bool leave_out_proj = fused && fused->out_proj;
  const GpuLayer& g = g_.layers[il];
  const LayerSpec& spec = m_.layers()[il].spec;
  const uint32_t E = c_.n_embd, Q = c_.q_dim(), KV = c_.kv_dim(), D = c_.head_dim;
  const Rows x(a_.x, E), xn(a_.xn, E);
  // The q/k/v products' input rows in f16 too, where they take them (written by the norm here).
  // A ubatch's combine that wrote xn (normed) wrote them too.
  if (in == AttnIn::Qkv && (n != 1 || spec.mla)) throw Error("internal error: q/k/v rows given to this layer");
  const bool f16_rows = qkv_take_f16_rows(il, n);
  if (in == AttnIn::X) {
    ops_.rms_norm(r, x, &g.attn_norm, xn, E, n, c_.norm_eps, non_finite_site::layer_input(il),
                  f16_rows ? &a_.xh : nullptr);
    r.barrier();
    mark_(r, "attn norm");
  }
  // q and the cache rows k (and v); latent attention stores no values: its
  // attention reads the values from the key cache.
  // VKMOE_ROPE_SUMS_KV=0: k's and v's split-K sums get their own dispatches.
  static const bool rope_sums_kv = !vk::env_off("VKMOE_ROPE_SUMS_KV");
  std::vector<vk::GemmSplitSum> kv_sums;
  if (spec.mla)
    project_mla(r, il, n);
  else if (in != AttnIn::Qkv)
    kv_sums = project_gqa(r, il, n, f16_rows, rope_sums_kv);
  // One token whose fused block takes the attention itself (step A).
  if (fused && fused->att_pos1 != 0) {
    if (in != AttnIn::Qkv || n != 1) throw Error("internal error: the fused block's attention without its q/k/v");
    fused->att_splits = 1;
    return n;
  }
  const bool per_head = spec.qk_norm == QkNorm::PerHead;
  const vk::Buffer& v_cache = spec.mla ? g.k_cache : g.v_cache;
  vk::RopeStoreArgs rs;
  rs.q = a_.q;
  rs.k = a_.k;
  if (!spec.mla) {
    rs.v = a_.v;
    rs.v_cache = g.v_cache;
  }
  rs.q_norm = per_head ? vk::BufferRange(g.q_norm.buf) : vk::BufferRange(a_.q);
  rs.k_norm = per_head ? vk::BufferRange(g.k_norm.buf) : vk::BufferRange(a_.q);
  rs.k_cache = g.k_cache;
  rs.q_stride = Q;
  rs.kv_stride = KV;
  rs.n_tokens = n;
  rs.pos0 = pos0;
  rs.head_dim = D;
  rs.n_head = c_.n_head;
  rs.n_head_kv = c_.n_head_kv;
  rs.rope = c_.rope();
  rs.norm = per_head;
  rs.eps = c_.norm_eps;
  rs.kv_type = kv_;
  if (!kv_sums.empty()) {  // the partial planes of k and v (project_gqa)
    rs.k = kv_sums[0].partials;
    rs.v = kv_sums[1].partials;
    rs.kv_splits = kv_sums[0].splits;
    rs.kv_plane = kv_sums[0].plane;
  }
  vk::AttentionArgs at;
  at.q = a_.q;
  at.k_cache = g.k_cache;
  at.v_cache = v_cache;
  at.o = a_.att;
  at.q_stride = Q;
  at.o_stride = Q;
  at.n_tokens = n;
  at.pos0 = pos0;
  at.head_dim = D;
  at.n_head = c_.n_head;
  at.n_head_kv = c_.n_head_kv;
  at.scale = c_.attn_scale();
  at.kv_type = kv_;
  at.scratch = a_.attn_scratch;
  at.counters = a_.counters;
  at.counter_index = Activations::kAttentionCounters;
  if (spec.sinks) at.sinks = g.attn_sinks.buf;
  at.window = spec.window;
  // One token: the attention kernel norms, rotates and stores itself where it can.
  const bool qkv_chained = in == AttnIn::Qkv && fused && fused->qkv_chained;
  if (vk::attention_folds_rope_store(ops_.ctx(), at, rs)) {
    at.rope = &rs;
    if (qkv_chained) {  // the block before raised the counter to il + 1 (chain_out)
      at.wait_counter = Activations::kChainReady + 1;
      at.wait_value = uint32_t(il) + 1;
      at.poll_loads = fused->poll_loads;
    }
    if (clocks_) {
      at.clocks = clocks_->attention();
      at.clock_base = DecodeClocks::attention_base(il);
    }
  } else {
    if (qkv_chained) r.barrier();
    vk::record_rope_store(r, rs);
    r.barrier();
    mark_(r, "qk-norm/rope/kv store");
  }
  if (keep == Keep::None) return 0;
  if (keep == Keep::Last && n > 1) {
    // The last row's query and residual go to row 0; one query over the cache from there on.
    r.copy(a_.q, uint64_t(n - 1) * Q * 4, a_.q, 0, uint64_t(Q) * 4);
    r.copy(a_.x, uint64_t(n - 1) * E * 4, a_.x, 0, uint64_t(E) * 4);
    r.barrier();
    at.pos0 = pos0 + n - 1;
    at.n_tokens = n = 1;
  }
  // The output projection's input rows in f16 where both kernels take them.
  at.o_f16 = !leave_out_proj && !spec.mla && ops_.takes_f16_rows(g.wo.type, n) &&
             vk::attention_uses_coopmat(ops_.ctx(), at);
  // One token whose output the fused block projects: its splits combined there.
  static const bool combine_in_block = !vk::env_off("VKMOE_FUSED_ATT_SPLITS");
  at.leave_splits = leave_out_proj && combine_in_block && n == 1 && !spec.sinks &&
                    vk::moe_fused_combines_att(ops_.ctx().info(), c_.attn_out_dim(), D, vk::kMaxAttentionSplits);
  // The block after it waits for its workgroups instead of a barrier.
  if (at.rope && leave_out_proj && fused->chain_att) {
    at.done_counter = Activations::kChainDone + 1;
    at.done_only_split = fused->chain_split;
  }
  const vk::AttentionRecord rec = vk::record_attention(r, at);
  if (fused) {
    fused->att_splits = rec.splits_left ? rec.splits : 1;
    fused->att_ml_off = rec.ml_off;
    fused->qkv_waited = rec.waited;
    // The next layer's attention (the same span) splits as this one did.
    if (fused->chain_split && rec.splits == 1) fused->chain_out = false;
    fused->att_chained = rec.counted_workgroups != 0;
    fused->att_wgs += rec.counted_workgroups;
  }
  if (!fused || !fused->att_chained) r.barrier();
  mark_(r, "attention");
  if (leave_out_proj) return n;
  if (spec.mla) expand_mla(r, il, n);
  const uint32_t O = c_.attn_out_dim();
  // A split product's sum may also write the FFN norm (no output bias between them).
  std::vector<vk::GemmSplitSum> sums;
  const bool fold = ffn_normed && n > 1 && !spec.o_bias && g.ffn_norm;
  ops_.linear(r, g.wo, Rows(spec.mla ? a_.ao : a_.att, O).halfs(at.o_f16), x, n, /*acc=*/true, SplitK::kHalfA,
              fold ? &sums : nullptr);
  r.barrier();
  if (!sums.empty()) {
    vk::GemmSplitSum& s = sums.front();
    if (sums.size() == 1 && s.norm_foldable()) {
      s.norm_w = g.ffn_norm.buf;
      s.xn = a_.xn;
      s.flags = a_.non_finite;
      s.eps = c_.norm_eps;
      s.check = non_finite_site::after_attention(il);
      *ffn_normed = true;
    }
    vk::record_gemm_split_sums(r, sums);
    r.barrier();
  }
  if (spec.o_bias) {
    ops_.add_rows(r, Rows(g.bo.buf, 0), x, E, n);
    r.barrier();
  }
  mark_(r, ffn_normed && *ffn_normed ? "out proj + ffn norm" : "out proj");
  return n;
}

void LayerProgram::ffn_norm(vk::Recorder& r, int il, uint32_t n) const {
  const uint32_t E = c_.n_embd;
  ops_.rms_norm(r, Rows(a_.x, E), &g_.layers[il].ffn_norm, Rows(a_.xn, E), E, n, c_.norm_eps,
                non_finite_site::after_attention(il));
  r.barrier();
  mark_(r, "ffn norm");
}

void LayerProgram::swiglu_ffn(vk::Recorder& r, const GpuTensor& gate, const GpuTensor& up, const GpuTensor& down,
                              uint32_t width, const vk::Buffer& out, uint32_t n, bool acc, FfnAct act) const {
  const Rows xn(a_.xn, c_.n_embd);
  ops_.linear(r, gate, xn, Rows(a_.g, width), n);
  ops_.linear(r, up, xn, Rows(a_.u, width), n);
  r.barrier();
  ops_.linear_glu(r, down, Rows(a_.g, width), Rows(a_.u, width), act, Rows(out, c_.n_embd), n, acc);
  r.barrier();
}

void LayerProgram::dense_ffn(vk::Recorder& r, int il, uint32_t n) const {
  const GpuLayer& g = g_.layers[il];
  ffn_norm(r, il, n);
  swiglu_ffn(r, g.ffn_gate, g.ffn_up, g.ffn_down, c_.n_ff, a_.x, n, /*acc=*/true, m_.layers()[il].spec.act);
  mark_(r, "dense ffn");
}

void LayerProgram::shared_expert(vk::Recorder& r, int il, uint32_t n) const {
  const GpuLayer& g = g_.layers[il];
  const SharedExpert kind = m_.layers()[il].spec.shared;
  if (kind == SharedExpert::None) return;
  const uint32_t E = c_.n_embd;
  const bool gated = kind == SharedExpert::Gated;
  if (gated) ops_.linear(r, g.shexp_gate, Rows(a_.xn, E), Rows(a_.gate1, 1), n);  // done by the FFN's first barrier
  swiglu_ffn(r, g.gate_shexp, g.up_shexp, g.down_shexp, c_.n_ff_shexp, a_.so, n, /*acc=*/false,
             m_.layers()[il].spec.act);
  ops_.add_rows(r, Rows(a_.so, E), Rows(a_.x, E), E, n,
                gated ? GpuOps::Scale::SigmoidOfRow : GpuOps::Scale::One, &a_.gate1);
  r.barrier();
  mark_(r, "shared expert");
}

void LayerProgram::router(vk::Recorder& r, int il, uint32_t n, uint32_t row0) const {
  router_of(r, il, Rows(a_.xn, c_.n_embd), n, row0);
}

void LayerProgram::router_of(vk::Recorder& r, int il, Rows x, uint32_t n, uint32_t row0,
                             std::vector<vk::GemmSplitSum>* sums_later) const {
  const uint32_t N = c_.n_expert;
  const Rows logits(a_.rlog, N, row0 * N);
  const bool bias = m_.layers()[il].spec.router_bias;
  ops_.linear(r, g_.layers[il].router, x, logits, n, false, SplitK::kHalfA,  // few outputs, long rows
              bias ? nullptr : sums_later);
  if (bias) {
    r.barrier();
    ops_.add_rows(r, Rows(g_.layers[il].router_b.buf, 0), logits, N, n);
  }
}

bool LayerProgram::moe_resident(vk::Recorder& r, int il, uint32_t n, const GpuTensor* next_norm, bool ffn_normed,
                                const FusedDecode* fused) const {
  const GpuLayer& g = g_.layers[il];
  const uint32_t E = c_.n_embd, K = c_.n_expert_used, N = c_.n_expert;
  vk::MoeTopkArgs tk;
  tk.logits = a_.rlog;
  tk.ids = a_.ids;
  tk.weights = a_.wts;
  tk.n_tokens = n;
  tk.n_expert = N;
  tk.k = K;
  tk.logit_stride = N;
  tk.router = c_.router;
  if (m_.layers()[il].spec.probs_bias) tk.bias = g.exp_probs_b.buf;
  if (fused && fused->block) {
    if (n != 1 || ffn_normed) throw Error("internal error: the fused MoE block takes one token from x");
    moe_fused_decode(r, il, next_norm, *fused);
    return next_norm != nullptr;
  }
  // One token without a router bias: the ffn norm, the router product and its
  // top-k in one dispatch (the norm's output xn also written there). Where the
  // fused kernel does not apply, three steps (it does not apply without the
  // norm either).
  const bool router_bias = m_.layers()[il].spec.router_bias;
  if (!router_bias && !ffn_normed &&
      ops_.router_topk(r, g.router, Rows(a_.x, E), tk, &g.ffn_norm, c_.norm_eps,
                       non_finite_site::after_attention(il), Rows(a_.xn, E))) {
    r.barrier();
    mark_(r, "ffn norm + router + top-k");
  } else {
    if (!ffn_normed) ffn_norm(r, il, n);
    // The top-k sums the router's split-K partials itself where it can
    // (VKMOE_TOPK_SUMS_ROUTER=0: the sum's own dispatch).
    static const bool topk_sums = !vk::env_off("VKMOE_TOPK_SUMS_ROUTER");
    std::vector<vk::GemmSplitSum> sums;
    router_of(r, il, Rows(a_.xn, E), n, 0, topk_sums ? &sums : nullptr);
    r.barrier();
    if (sums.size() == 1 && sums[0].planes_are_rows() && sums[0].nrows == N) {
      tk.logits = sums[0].partials;
      tk.splits = sums[0].splits;
      tk.split_plane = sums[0].plane;
    } else if (!sums.empty()) {
      vk::record_gemm_split_sums(r, sums);
      r.barrier();
    }
    mark_(r, "router");
    vk::record_moe_topk(r, tk);
    r.barrier();
    mark_(r, "top-k");
  }
  const ExpertBuffers w{&g.gate_exps.buf, &g.up_exps.buf, &g.down_exps.buf, N};
  if (n > 1) {
    vk::MoeGroupArgs gr;
    gr.ids = a_.ids;
    gr.table = a_.table;
    gr.layout = MoeTableLayout::make(n, K, N);
    gr.n_expert = N;
    vk::record_moe_group(r, gr);
    r.barrier();
    mark_(r, "group by expert");
    const bool fold_norm = next_norm && m_.layers()[il].spec.shared == SharedExpert::None && E % 4 == 0;
    experts_grouped(r, il, w, a_.table, a_.wts, n, nullptr, fold_norm ? next_norm : nullptr);
    if (fold_norm) return true;
    shared_expert(r, il, n);
    return false;
  }
  experts_decode(r, il, w, a_.ids);
  if (next_norm && m_.layers()[il].spec.shared == SharedExpert::None) {
    const auto& cp =
        ops_.ctx().pipeline("moe_combine_norm", 6, sizeof(CombineNormPush), {ops_.lone_row_workgroup(E)});
    r.dispatch(cp, {a_.eo, a_.wts, a_.x, next_norm->buf, a_.xn, a_.non_finite},
               CombineNormPush{E, K, c_.norm_eps, non_finite_site::layer_input(il + 1)}, 1);
    r.barrier();
    mark_(r, "combine + next norm");
    return true;
  }
  combine_decode(r, a_.wts);
  shared_expert(r, il, n);
  return false;
}

bool LayerProgram::token_folds_attention(uint32_t pos) {
  // Read per token (tests compare both ways in one process).
  if (vk::env_off("VKMOE_FUSED_ATTENTION")) return false;
  const char* most = std::getenv("VKMOE_FUSED_ATTENTION_MAX");
  return uint64_t(pos) + 1 <= (most ? uint64_t(std::max(0, std::atoi(most))) : 640u);
}

bool LayerProgram::folds_attention(uint32_t pos) const {
  if (!token_folds_attention(pos)) return false;
  bool qkv_before = false;  // the block before takes this layer's q/k/v
  for (int il = 0; il < c_.n_layer; ++il) {
    const FusedDecode f = fused_decode(il, false, pos);
    if (qkv_before && f.attention) return true;
    qkv_before = f.next_qkv;
  }
  return false;
}

LayerProgram::FusedDecode LayerProgram::fused_decode(int il, bool chain, uint32_t pos, bool qkv_in) const {
  static const bool enabled = !vk::env_off("VKMOE_MOE_FUSED");
  // Read per token, as the grid is (tests compare both ways in one process).
  const char* chain_env = std::getenv("VKMOE_CHAIN_LAYERS");
  const std::string chain_mode = chain && chain_env ? chain_env : chain ? "split" : "0";
  const char* poll_env = std::getenv("VKMOE_CHAIN_POLL");
  // On the H200 the q/k/v step saves 1.5-1.8% of GPU time a token; tokens per
  // second stayed within noise of the output projection alone (PERF.md run 37).
  const bool out_proj = !vk::env_off("VKMOE_FUSED_OUT_PROJ"), qkv = !vk::env_off("VKMOE_FUSED_QKV");
  const LayerWeights& lw = m_.layers()[il];
  const LayerSpec& spec = lw.spec;
  const GpuLayer& g = g_.layers[il];
  const vk::DeviceInfo& dev = ops_.ctx().info();
  const uint32_t E = c_.n_embd, F = c_.n_ff_exp, K = c_.n_expert_used;
  FusedDecode f;
  f.grid = vk::moe_fused_grid(dev);
  f.block = enabled && spec.moe && ops_.int8_x() && f.grid != 0 && uint32_t(il) < Activations::kMoeFusedLayers &&
            !spec.router_bias && !spec.probs_bias && !spec.expert_bias && spec.shared == SharedExpert::None &&
            g.router.type == GgmlType::F32 && lw.gate_exps.type() == lw.up_exps.type() &&
            vk::moe_fused_decode_supported(dev, lw.gate_exps.type(), lw.down_exps.type(), E, F, c_.n_expert, K,
                                           c_.router, lw.gate_exps.expert_bytes(), lw.down_exps.expert_bytes());
  if (!f.block) return f;
  f.out_proj = out_proj && !spec.mla && !spec.o_bias &&
               vk::moe_fused_takes_out_proj(dev, g.wo.type, E, F, K, uint32_t(c_.attn_out_dim()));
  if (qkv && il + 1 < c_.n_layer) {
    const LayerSpec& next = m_.layers()[il + 1].spec;
    const GpuLayer& ng = g_.layers[il + 1];
    f.next_qkv = !next.mla && !next.qkv_bias && next.qk_norm != QkNorm::Whole &&
                 vk::moe_fused_takes_qkv(ng.wq.type, ng.wk.type, ng.wv.type, E, c_.q_dim(), c_.kv_dim());
  }
  f.attention = f.out_proj && !spec.mla && !spec.sinks && spec.window == 0 && !spec.qkv_bias &&
                spec.qk_norm != QkNorm::Whole && kv_ == vk::KvType::F16 &&
                vk::moe_fused_takes_attention(dev, E, F, K, uint32_t(c_.attn_out_dim()), uint32_t(c_.head_dim),
                                              uint32_t(c_.n_head), uint32_t(c_.n_head_kv), c_.rope());
  f.att_pos1 = f.attention && qkv_in && token_folds_attention(pos) ? pos + 1 : 0;
  f.chain_qkv = chain_mode != "0" && chain_mode != "att";
  f.chain_att = chain_mode != "0" && chain_mode != "qkv";
  f.chain_split = chain_mode == "split";
  f.poll_loads = !poll_env || std::string(poll_env) != "atomics";
  f.chain_out = f.chain_qkv && f.next_qkv;
  return f;
}

void LayerProgram::add_fused_types(vk::MoeFusedTypeSets& t, int il, const FusedDecode& f) const {
  using S = vk::MoeFusedTypeSets;
  const LayerWeights& lw = m_.layers()[il];
  t.gate_up |= S::bit(lw.gate_exps.type());
  t.down |= S::bit(lw.down_exps.type());
  if (f.out_proj)
    t.wo |= S::bit(g_.layers[il].wo.type);
  else
    t.without_wo = true;
  if (f.next_qkv) {
    const GpuLayer& ng = g_.layers[il + 1];
    t.wq |= S::bit(ng.wq.type);
    t.wk |= S::bit(ng.wk.type);
    t.wv |= S::bit(ng.wv.type);
  } else {
    t.without_qkv = true;
  }
}

const std::optional<vk::MoeFusedTypeSets>& LayerProgram::fused_type_sets() const {
  if (fused_type_sets_) return *fused_type_sets_;
  std::optional<vk::MoeFusedTypeSets> sets;
  if (!vk::env_off("VKMOE_FUSED_ONE_PIPELINE")) {
    sets.emplace();
    for (int il = 0; il < c_.n_layer; ++il)
      if (const FusedDecode f = fused_decode(il); f.block) add_fused_types(*sets, il, f);
  }
  fused_type_sets_ = sets;
  return *fused_type_sets_;
}

void LayerProgram::moe_fused_decode(vk::Recorder& r, int il, const GpuTensor* next_norm,
                                    const FusedDecode& f) const {
  const LayerWeights& lw = m_.layers()[il];
  const GpuLayer& g = g_.layers[il];
  vk::MoeFusedDecodeArgs a;
  a.gate_up_type = lw.gate_exps.type();
  a.down_type = lw.down_exps.type();
  a.n_embd = c_.n_embd;
  a.n_ff = c_.n_ff_exp;
  a.n_expert = c_.n_expert;
  a.k = c_.n_expert_used;
  a.router = c_.router;
  a.glu_act = lw.spec.act == FfnAct::OaiSwiGLU ? 1u : 0u;
  a.eps = c_.norm_eps;
  a.check_in = non_finite_site::after_attention(il);
  a.check_out = non_finite_site::layer_input(il + 1);
  a.x = a_.x;
  a.ffn_norm = g.ffn_norm.buf;
  a.router_w = g.router.buf;
  a.gate = g.gate_exps.buf;
  a.up = g.up_exps.buf;
  a.down = g.down_exps.buf;
  a.gate_up_stride = lw.gate_exps.expert_bytes();
  a.down_stride = lw.down_exps.expert_bytes();
  a.logits = a_.rlog;
  a.h = a_.eg;
  a.ids = a_.ids;
  a.weights = a_.wts;
  a.counters = a_.counters;
  a.counter = Activations::moe_fused_counter(il);  // zeroed at the token's start (GpuEngine::record_resident)
  if (next_norm) {
    a.next_norm = next_norm->buf;
    a.xn = a_.xn;
  }
  a.flags = a_.non_finite;
  a.grid = f.grid;
  if (clocks_ && f.grid == clocks_->grid()) {
    a.clocks = clocks_->fused();
    a.clock_base = clocks_->fused_base(il);
  }
  if (f.out_proj)
    a.out_proj = vk::MoeFusedOutProj{g.wo.type,     g.wo.buf,     a_.att,    uint32_t(c_.attn_out_dim()),
                                     a_.attn_scratch, f.att_splits, f.att_ml_off, uint32_t(c_.head_dim)};
  if (f.attention) {
    const bool per_head = lw.spec.qk_norm == QkNorm::PerHead;
    vk::MoeFusedAttention at;
    at.q = a_.q;
    at.k = a_.k;
    at.v = a_.v;
    at.k_cache = g.k_cache;
    at.v_cache = g.v_cache;
    if (per_head) {
      at.q_norm = g.q_norm.buf;
      at.k_norm = g.k_norm.buf;
    }
    at.head_dim = uint32_t(c_.head_dim);
    at.n_head = uint32_t(c_.n_head);
    at.n_head_kv = uint32_t(c_.n_head_kv);
    at.rope = c_.rope();
    at.norm = per_head;
    at.scale = c_.attn_scale();
    at.pos1 = f.att_pos1;
    a.attention = at;
  }
  if (f.next_qkv) {
    if (!next_norm) throw Error("internal error: the fused block's q/k/v need the next layer's norm");
    const GpuLayer& ng = g_.layers[il + 1];
    a.next_qkv = vk::MoeFusedNextQkv{ng.wq.type, ng.wk.type, ng.wv.type, ng.wq.buf, ng.wk.buf, ng.wv.buf,
                                     a_.q, a_.k, a_.v, uint32_t(c_.q_dim()), uint32_t(c_.kv_dim())};
  }
  if (f.att_chained) {
    a.att_done = Activations::kChainDone + 1;
    a.att_wgs = f.att_wgs;
    a.poll_loads = f.poll_loads;
  }
  if (f.chain_out) {
    a.qkv_ready = Activations::kChainReady + 1;
    a.qkv_value = uint32_t(il) + 2;
  }
  if (const std::optional<vk::MoeFusedTypeSets>& sets = fused_type_sets()) {
    a.type_sets = *sets;
    // A step switched off after the sets were made (the env is read per
    // token) only adds this dispatch's types: another pipeline, not an error.
    add_fused_types(*a.type_sets, il, f);
  }
  vk::record_moe_fused_decode(r, a);
  if (!f.chain_out) r.barrier();
  if (f.att_pos1 != 0)
    mark_(r, f.next_qkv ? "attention + out proj + MoE block + next q/k/v (fused)"
             : next_norm ? "attention + out proj + MoE block + next norm (fused)"
                         : "attention + out proj + MoE block (fused)");
  else
    mark_(r, f.next_qkv   ? (f.out_proj ? "out proj + MoE block + next q/k/v (fused)" : "MoE block + next q/k/v (fused)")
             : f.out_proj ? (next_norm ? "out proj + MoE block + next norm (fused)" : "out proj + MoE block (fused)")
             : next_norm  ? "MoE block (fused) + next norm"
                          : "MoE block (fused)");
}

void LayerProgram::combine_decode(vk::Recorder& r, const vk::Buffer& wts) const {
  const uint32_t E = c_.n_embd, K = c_.n_expert_used;
  const auto& ap = ops_.ctx().pipeline("axpy", 3, sizeof(AxpyPush));
  r.dispatch(ap, {a_.eo, wts, a_.x}, AxpyPush{E, K, 0, 0, 0, /*weights*/ 1, 1.0f}, div_up(E, 256));
  r.barrier();
  mark_(r, "combine");
}

void LayerProgram::expert_biases(vk::Recorder& r, int il, bool down, const vk::Buffer& ids, uint32_t id_off,
                                 uint32_t rows_per_id, const vk::Buffer* map, uint32_t rows,
                                 uint32_t down_row_map) const {
  const GpuLayer& g = g_.layers[il];
  const uint32_t E = c_.n_embd, F = c_.n_ff_exp, N = c_.n_expert;
  GpuOps::BiasRows b;
  b.n_bias = N;
  b.ids = &ids;
  b.id_off = id_off;
  b.rows_per_id = rows_per_id;
  b.map = map;
  b.rows = rows;
  if (down) {
    b.bias = &g.down_exps_b.buf;
    b.width = b.y_stride = E;
    b.y = &a_.eo;
    b.y_row_map = down_row_map;
    ops_.bias_rows(r, b);
    return;
  }
  b.width = b.y_stride = F;
  b.bias = &g.gate_exps_b.buf;
  b.y = &a_.eg;
  ops_.bias_rows(r, b);
  b.bias = &g.up_exps_b.buf;
  b.y = &a_.eu;
  ops_.bias_rows(r, b);
}

void LayerProgram::experts_decode(vk::Recorder& r, int il, const ExpertBuffers& w, const vk::Buffer& ids,
                                  const vk::Buffer* expert_ids) const {
  const LayerWeights& lw = m_.layers()[il];
  const bool bias = lw.spec.expert_bias;
  const vk::Buffer& eids = expert_ids ? *expert_ids : ids;
  const uint32_t E = c_.n_embd, F = c_.n_ff_exp, K = c_.n_expert_used;
  auto ids_mv = [&](const Weight& wt, const vk::Buffer& wb, const vk::Buffer& x, uint32_t x_stride,
                    const vk::Buffer& y, uint32_t y_stride, const vk::Buffer* glu_up = nullptr) {
    vk::MatvecIdsArgs a;
    a.type = wt.type();
    a.ncols = static_cast<uint32_t>(wt.in());
    a.nrows = static_cast<uint32_t>(wt.out());
    a.w = wb;
    a.x = x;
    a.y = y;
    a.ids = ids;
    a.n_ids = K;
    a.n_experts = w.count;
    a.expert_stride = wt.expert_bytes();
    a.x_stride = x_stride;
    a.y_stride = y_stride;
    if (glu_up) {
      a.glu_up = *glu_up;
      a.glu_act = lw.spec.act == FfnAct::OaiSwiGLU ? 1u : 0u;
    }
    vk::record_matvec_ids(r, a, ops_.matvec_config(a.type, a.nrows, K, glu_up != nullptr));
  };
  ids_mv(lw.gate_exps, *w.gate, a_.xn, 0, a_.eg, F);
  ids_mv(lw.up_exps, *w.up, a_.xn, 0, a_.eu, F);
  r.barrier();
  mark_(r, "experts gate+up");
  if (bias) {
    // Biases go between the products and the activation.
    expert_biases(r, il, /*down=*/false, eids, 0, 1, nullptr, K);
    r.barrier();
    ops_.swiglu(r, a_.eg, a_.eu, uint64_t(K) * F, lw.spec.act);
    r.barrier();
    ids_mv(lw.down_exps, *w.down, a_.eg, F, a_.eo, E);
  } else {
    ids_mv(lw.down_exps, *w.down, a_.eg, F, a_.eo, E, &a_.eu);  // SwiGLU fused into the product's input
  }
  r.barrier();
  if (bias) {
    expert_biases(r, il, /*down=*/true, eids, 0, 1, nullptr, K);
    r.barrier();
  }
  mark_(r, "experts down");
}

bool experts_gate_up_in_one(const vk::Context& ctx, const vk::GemmConfig& gemm, const LayerWeights& lw) {
  static const bool off = vk::env_off("VKMOE_EXPERT_GLU");
  const Weight &g = lw.gate_exps, &u = lw.up_exps;
  return !off && !lw.spec.expert_bias && g.type() == u.type() && g.in() == u.in() && g.out() == u.out() &&
         g.expert_bytes() == u.expert_bytes() && vk::gemm_ids_glu_available(ctx, gemm, g.type());
}

void LayerProgram::experts_grouped(vk::Recorder& r, int il, const ExpertBuffers& w, const vk::Buffer& table,
                                   const vk::Buffer& wts, uint32_t n, const vk::Buffer* group_expert,
                                   const GpuTensor* next_norm) const {
  const LayerWeights& lw = m_.layers()[il];
  const bool bias = lw.spec.expert_bias;
  const uint32_t E = c_.n_embd, F = c_.n_ff_exp, K = c_.n_expert_used;
  const MoeTableLayout layout = MoeTableLayout::make(n, K, w.count);
  const uint32_t slots = layout.max_slots();
  // down: x rows by slot and y rows by routing pair (eo holds no padding slots);
  // else x gathered by token and y by slot. f16_rows: with glu_up, the product
  // writes f16 rows; without, it reads them.
  auto ids_mm = [&](const Weight& wt, const vk::Buffer& wb, const vk::Buffer& x, uint32_t x_stride,
                    const vk::Buffer& y, uint32_t y_stride, bool down, const vk::Buffer* glu_up = nullptr,
                    bool f16_rows = false) {
    vk::GemmIdsArgs a;
    a.type = wt.type();
    a.ncols = static_cast<uint32_t>(wt.in());
    a.nrows = static_cast<uint32_t>(wt.out());
    a.w = wb;
    a.x = x;
    a.x_stride = x_stride;
    a.y = y;
    a.y_stride = y_stride;
    a.table = table;
    a.layout = layout;
    a.expert_stride = wt.expert_bytes();
    a.n_experts = w.count;
    a.gather_x = !down;
    a.y_by_pair = down;
    a.scratch = ops_.gemm_scratch();
    if (glu_up) {
      a.glu_up = *glu_up;
      a.glu_act = lw.spec.act == FfnAct::OaiSwiGLU ? 1u : 0u;
      a.glu_y_f16 = f16_rows;
    } else {
      a.x_f16 = f16_rows;
    }
    vk::record_gemm_ids(r, a, ops_.gemm_for(a.type));
  };
  // Gate and up: one product with the activation, or two products and the activation pass.
  // The one product writes its rows in f16 where the down product takes them.
  const bool in_one = experts_gate_up_in_one(ops_.ctx(), ops_.gemm_for(lw.gate_exps.type()), lw);
  const bool f16_rows = in_one && F % 4 == 0 && ops_.takes_f16_rows(lw.down_exps.type(), n);
  ids_mm(lw.gate_exps, *w.gate, a_.xn, E, a_.eg, F, false, in_one ? w.up : nullptr, f16_rows);
  if (!in_one) ids_mm(lw.up_exps, *w.up, a_.xn, E, a_.eu, F, false);
  r.barrier();
  mark_(r, "experts gate+up");
  if (!in_one) {
    // Bias rows by the expert of each slot's tile (its group, mapped to the expert).
    if (bias) {
      expert_biases(r, il, /*down=*/false, table, layout.tile_expert_off, kMoeTileRows, group_expert, slots);
      r.barrier();
    }
    const GpuOps::MoeRows rows{&table, layout, F};
    ops_.swiglu(r, a_.eg, a_.eu, uint64_t(slots) * F, lw.spec.act, &rows);
    r.barrier();
  }
  ids_mm(lw.down_exps, *w.down, a_.eg, F, a_.eo, E, true, nullptr, f16_rows);
  r.barrier();
  if (bias) {
    expert_biases(r, il, /*down=*/true, table, layout.tile_expert_off, kMoeTileRows, group_expert, slots,
                  1 + layout.slot_pair_off);
    r.barrier();
  }
  mark_(r, "experts down");
  vk::MoeCombineArgs cb;
  cb.y = a_.eo;
  cb.weights = wts;
  cb.table = table;
  cb.x = a_.x;
  cb.layout = layout;
  cb.n = E;
  cb.y_stride = E;
  cb.x_stride = E;
  if (next_norm) {
    cb.norm_w = next_norm->buf;
    cb.xn = a_.xn;
    if (qkv_take_f16_rows(il + 1, n)) cb.xh = a_.xh;
    cb.flags = a_.non_finite;
    cb.eps = c_.norm_eps;
    cb.check = non_finite_site::layer_input(il + 1);
  }
  vk::record_moe_combine(r, cb);
  r.barrier();
  mark_(r, next_norm ? "combine + next norm" : "combine");
}

void LayerProgram::output(vk::Recorder& r, uint32_t last, bool normed) const {
  const uint32_t E = c_.n_embd;
  if (!normed) {
    ops_.rms_norm(r, Rows(a_.x, E, last * E), &g_.output_norm, Rows(a_.xn, E), E, 1, c_.norm_eps,
                  non_finite_site::layer_input(c_.n_layer));
    r.barrier();
  }
  ops_.linear(r, g_.output, Rows(a_.xn, E), Rows(a_.logits, c_.n_vocab), 1);
  r.barrier();
  mark_(r, "output head");
}

}  // namespace vkmoe
