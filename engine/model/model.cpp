#include "engine/model/model.h"

#include <cstring>
#include <limits>

namespace vkmoe {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Qwen3: return "qwen3";
    case Arch::Qwen3Moe: return "qwen3moe";
    case Arch::Olmoe: return "olmoe";
    case Arch::Qwen2Moe: return "qwen2moe";
  }
  return "?";
}

const float* Weight::f32() const {
  if (t->type != GgmlType::F32)
    throw Error("tensor '" + t->name + "' is " + type_name(t->type) + ", expected F32");
  return reinterpret_cast<const float*>(t->data);
}

std::unique_ptr<Model> Model::load(const std::string& path) {
  return from_gguf(GgufFile::open(path));
}

namespace {

// Every dimension and every product of dimensions the engine forms (in int
// or uint32 arithmetic) stays within this.
constexpr int64_t kMaxDim = int64_t{1} << 30;

struct Loader {
  const GgufFile& f;
  std::string a;  // architecture prefix

  [[noreturn]] void fail(const std::string& what) const { throw Error(f.path() + ": " + what); }

  int req_int(const std::string& key) const {
    std::string k = a + "." + key;
    if (!f.has(k)) fail("missing hyper-parameter '" + k + "'");
    int64_t v = f.get_int(k);
    if (v <= 0 || v > kMaxDim) fail("hyper-parameter '" + k + "' = " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  }
  int opt_int(const std::string& key, int fallback) const {
    std::string k = a + "." + key;
    return f.has(k) ? req_int(key) : fallback;
  }
  // x * y of hyper-parameters x and y (named by their keys), checked in 64 bits.
  int product(const std::string& kx, int x, const std::string& ky, int y) const {
    const int64_t p = int64_t{x} * y;
    if (p > kMaxDim)
      fail("hyper-parameters '" + a + "." + kx + "' (" + std::to_string(x) + ") x '" + a + "." + ky + "' (" +
           std::to_string(y) + ") = " + std::to_string(p) + " is out of range");
    return static_cast<int>(p);
  }
  // A float hyper-parameter that must be positive and finite as a float.
  float positive_float(const std::string& key, double fallback) const {
    const std::string k = a + "." + key;
    const double v = f.get_float_or(k, fallback);
    if (!(v > 0 && v <= std::numeric_limits<float>::max()))
      fail("hyper-parameter '" + k + "' = " + std::to_string(v) + " must be a positive finite number");
    return static_cast<float>(v);
  }

  // Fetches a tensor and checks its shape (ne of 1..3 dims; trailing 1s ignored).
  Weight get(const std::string& name, std::vector<int64_t> ne, bool required = true) const {
    const GgufTensor* t = f.tensor(name);
    if (!t) {
      if (required) fail("missing tensor '" + name + "'");
      return {};
    }
    std::vector<int64_t> have = t->ne;
    while (have.size() > 1 && have.back() == 1) have.pop_back();
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    if (have != ne) {
      auto fmt = [](const std::vector<int64_t>& v) {
        std::string s = "[";
        for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
        return s + "]";
      };
      fail("tensor '" + name + "' has shape " + fmt(t->ne) + ", expected " + fmt(ne));
    }
    if (!type_traits(t->type).supported)
      fail("tensor '" + name + "' has type " + type_name(t->type) +
           ", which vkmoe does not support (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4)");
    return Weight{t};
  }
};

}  // namespace

std::unique_ptr<Model> Model::from_gguf(std::unique_ptr<GgufFile> file) {
  auto m = std::unique_ptr<Model>(new Model());
  m->file_ = std::move(file);
  const GgufFile& f = *m->file_;
  std::string an = f.get_str_or("general.architecture", "");
  if (an.empty()) throw Error(f.path() + ": missing 'general.architecture'; not a model file?");
  ModelConfig& c = m->cfg_;
  if (an == "llama") c.arch = Arch::Llama;
  else if (an == "qwen3") c.arch = Arch::Qwen3;
  else if (an == "qwen3moe") c.arch = Arch::Qwen3Moe;
  else if (an == "olmoe") c.arch = Arch::Olmoe;
  else if (an == "qwen2moe") c.arch = Arch::Qwen2Moe;
  else
    throw Error(f.path() + ": unsupported architecture '" + printable(an) +
                "' (supported: llama, qwen3, qwen3moe, olmoe, qwen2moe)");
  Loader L{f, an};

  c.n_layer = L.req_int("block_count");
  c.n_embd = L.req_int("embedding_length");
  c.n_head = L.req_int("attention.head_count");
  c.n_head_kv = L.opt_int("attention.head_count_kv", c.n_head);
  if (c.n_head % c.n_head_kv != 0) L.fail("head_count is not a multiple of head_count_kv");
  c.head_dim = L.opt_int("attention.key_length", c.n_embd / c.n_head);
  if (c.head_dim <= 0) L.fail("head dimension embedding_length / head_count is 0");
  if (L.opt_int("attention.value_length", c.head_dim) != c.head_dim)
    L.fail("attention.value_length != key_length is not supported");
  if (L.opt_int("rope.dimension_count", c.head_dim) != c.head_dim)
    L.fail("partial rotary embeddings (rope.dimension_count != head dim) are not supported");
  if (c.head_dim % 2) L.fail("odd head dimension");
  L.product("attention.head_count", c.n_head, "attention.key_length", c.head_dim);
  L.product("attention.head_count_kv", c.n_head_kv, "attention.key_length", c.head_dim);
  c.n_ctx_train = L.opt_int("context_length", 4096);
  c.rope_theta = L.positive_float("rope.freq_base", 10000.0);
  c.norm_eps = L.positive_float("attention.layer_norm_rms_epsilon", 1e-6);
  if (f.has(an + ".rope.scaling.type") && f.get_str(an + ".rope.scaling.type") != "none")
    L.fail("rope scaling '" + printable(f.get_str(an + ".rope.scaling.type")) + "' is not supported");
  c.rope_neox = c.arch != Arch::Llama;
  c.n_expert = L.opt_int("expert_count", 0);
  bool moe = c.n_expert > 0;
  bool needs_moe = c.arch == Arch::Qwen3Moe || c.arch == Arch::Olmoe || c.arch == Arch::Qwen2Moe;
  if (needs_moe && !moe) L.fail("missing hyper-parameter '" + an + ".expert_count'");
  if (moe) {
    c.n_expert_used = L.req_int("expert_used_count");
    if (c.n_expert_used > c.n_expert) L.fail("expert_used_count > expert_count");
    // Mixtral and OLMoE store the expert width as feed_forward_length.
    c.n_ff_exp = (c.arch == Arch::Llama || c.arch == Arch::Olmoe)
                     ? L.opt_int("expert_feed_forward_length", L.opt_int("feed_forward_length", 0))
                     : L.req_int("expert_feed_forward_length");
    if (c.n_ff_exp <= 0) L.fail("missing expert feed-forward width");
    L.product("expert_used_count", c.n_expert_used, "expert_feed_forward_length", c.n_ff_exp);
    L.product("expert_count", c.n_expert, "block_count", c.n_layer);
    bool default_norm = c.arch == Arch::Llama || c.arch == Arch::Qwen3Moe;
    c.norm_topk_prob = f.get_bool_or(an + ".expert_weights_norm", default_norm);
    if (c.arch == Arch::Qwen2Moe)
      c.n_ff_shexp = L.opt_int("expert_shared_feed_forward_length", L.opt_int("feed_forward_length", 0));
  } else {
    c.n_ff = L.req_int("feed_forward_length");
  }

  const int E = c.n_embd;
  const GgufTensor* te = f.tensor("token_embd.weight");
  if (!te || te->ne.size() < 2) L.fail("missing or malformed tensor 'token_embd.weight'");
  if (te->ne[1] <= 0 || te->ne[1] > (1 << 24)) L.fail("vocabulary size out of range");
  c.n_vocab = static_cast<int>(te->ne[1]);
  m->tok_embd = L.get("token_embd.weight", {E, c.n_vocab});
  m->output_norm = L.get("output_norm.weight", {E});
  m->output = L.get("output.weight", {E, c.n_vocab}, false);
  if (!m->output) m->output = m->tok_embd;

  const int Q = c.q_dim(), KV = c.kv_dim();
  for (int il = 0; il < c.n_layer; ++il) {
    std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights l;
    l.attn_norm = L.get(p + "attn_norm.weight", {E});
    l.wq = L.get(p + "attn_q.weight", {E, Q});
    l.wk = L.get(p + "attn_k.weight", {E, KV});
    l.wv = L.get(p + "attn_v.weight", {E, KV});
    l.wo = L.get(p + "attn_output.weight", {Q, E});
    bool biases = c.arch == Arch::Qwen2Moe;
    l.bq = L.get(p + "attn_q.bias", {Q}, biases);
    l.bk = L.get(p + "attn_k.bias", {KV}, biases);
    l.bv = L.get(p + "attn_v.bias", {KV}, biases);
    if (c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe) {
      l.q_norm = L.get(p + "attn_q_norm.weight", {c.head_dim});
      l.k_norm = L.get(p + "attn_k_norm.weight", {c.head_dim});
    } else if (c.arch == Arch::Olmoe) {
      l.q_norm = L.get(p + "attn_q_norm.weight", {Q});
      l.k_norm = L.get(p + "attn_k_norm.weight", {KV});
    }
    l.ffn_norm = L.get(p + "ffn_norm.weight", {E});
    if (moe) {
      if (!f.tensor(p + "ffn_gate_exps.weight") && f.tensor(p + "ffn_gate.0.weight"))
        L.fail("per-expert tensors (old Mixtral GGUF layout) are not supported; re-convert with a current llama.cpp");
      const int F = c.n_ff_exp, N = c.n_expert;
      l.router = L.get(p + "ffn_gate_inp.weight", {E, N});
      l.gate_exps = L.get(p + "ffn_gate_exps.weight", {E, F, N});
      l.up_exps = L.get(p + "ffn_up_exps.weight", {E, F, N});
      l.down_exps = L.get(p + "ffn_down_exps.weight", {F, E, N});
      if (c.arch == Arch::Qwen2Moe) {
        const int S = c.n_ff_shexp;
        l.shexp_gate = L.get(p + "ffn_gate_inp_shexp.weight", {E});
        l.gate_shexp = L.get(p + "ffn_gate_shexp.weight", {E, S});
        l.up_shexp = L.get(p + "ffn_up_shexp.weight", {E, S});
        l.down_shexp = L.get(p + "ffn_down_shexp.weight", {S, E});
      }
    } else {
      l.ffn_gate = L.get(p + "ffn_gate.weight", {E, c.n_ff});
      l.ffn_up = L.get(p + "ffn_up.weight", {E, c.n_ff});
      l.ffn_down = L.get(p + "ffn_down.weight", {c.n_ff, E});
    }
    m->layers_.push_back(l);
  }
  return m;
}

}  // namespace vkmoe
