#include "engine/model/model.h"

#include <cstring>

#include "engine/model/arch/arch.h"
#include "engine/model/hparams.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/rope_keys.h"

namespace vkmoe {

const float* Weight::f32() const {
  if (t->type != GgmlType::F32)
    throw Error("tensor '" + t->name + "' is " + type_name(t->type) + ", expected F32");
  return reinterpret_cast<const float*>(t->data);
}

std::unique_ptr<Model> Model::load(const std::string& path) {
  return from_gguf(GgufFile::open(path));
}

namespace {

// Fetches a tensor and checks its shape (ne of 1..3 dims; trailing 1s ignored) and type.
Weight get_tensor(const Hparams& h, const std::string& name, std::vector<int64_t> ne, bool required = true) {
  const GgufTensor* t = h.file().tensor(name);
  if (!t) {
    if (required) h.fail("missing tensor '" + name + "'");
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
    h.fail("tensor '" + name + "' has shape " + fmt(t->ne) + ", expected " + fmt(ne));
  }
  if (!type_traits(t->type).supported)
    h.fail("tensor '" + name + "' has type " + type_name(t->type) +
           ", which vkmoe does not support (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, "
           "Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4)");
  return Weight{t};
}

// The hyper-parameters every architecture has.
void read_common(const Hparams& h, ModelConfig& c) {
  c.n_layer = h.req_int("block_count");
  c.n_embd = h.req_int("embedding_length");
  c.n_head = h.req_int("attention.head_count");
  c.n_head_kv = h.opt_int("attention.head_count_kv", c.n_head);
  if (c.n_head % c.n_head_kv != 0) h.fail("head_count is not a multiple of head_count_kv");
  c.head_dim = h.opt_int("attention.key_length", c.n_embd / c.n_head);
  if (c.head_dim <= 0) h.fail("head dimension embedding_length / head_count is 0");
  c.n_rot = h.opt_int("rope.dimension_count", c.head_dim);
  if (c.n_rot > c.head_dim || c.n_rot % 2) h.fail("rope.dimension_count must be even and at most the head dimension");
  if (c.head_dim % 2) h.fail("odd head dimension");
  h.product("attention.head_count", c.n_head, "attention.key_length", c.head_dim);
  h.product("attention.head_count_kv", c.n_head_kv, "attention.key_length", c.head_dim);
  c.n_ctx_train = h.opt_int("context_length", 4096);
  c.rope_theta = h.positive_float("rope.freq_base", 10000.0);
  c.norm_eps = h.positive_float("attention.layer_norm_rms_epsilon", 1e-6);
  read_rope_scaling(h, c);
  c.n_expert = h.opt_int("expert_count", 0);
  if (c.is_moe()) {
    c.n_expert_used = h.req_int("expert_used_count");
    if (c.n_expert_used > c.n_expert) h.fail("expert_used_count > expert_count");
  }
}

}  // namespace

std::unique_ptr<Model> Model::from_gguf(std::unique_ptr<GgufFile> file) { return from_gguf(std::move(file), {}); }

std::unique_ptr<Model> Model::from_gguf(std::unique_ptr<GgufFile> file, const SpecPatch& patch) {
  auto m = std::unique_ptr<Model>(new Model());
  m->file_ = std::move(file);
  const GgufFile& f = *m->file_;
  std::string an = f.get_str_or("general.architecture", "");
  if (an.empty()) throw Error(f.path() + ": missing 'general.architecture'; not a model file?");
  const ArchDef* arch = find_arch(an);
  if (!arch)
    throw Error(f.path() + ": unsupported architecture '" + printable(an) + "' (supported: " + arch_names() + ")");
  ModelConfig& c = m->cfg_;
  c.arch = an;
  const Hparams L(f, an);
  read_common(L, c);
  arch->configure(L, c);
  if (c.yarn_log_mul != 0 && c.kq_scale == 0)  // the architectures that use it set kq_scale from it
    L.fail("rope.scaling.yarn_log_multiplier is not supported for " + an);
  const int value_length = L.opt_int("attention.value_length", c.head_dim);
  if (c.is_mla() ? value_length != c.mla.kv_lora : value_length != c.head_dim)
    L.fail("attention.value_length " + std::to_string(value_length) + " is not supported with key_length " +
           std::to_string(c.head_dim));

  bool any_moe = false, any_dense = false;
  for (int il = 0; il < c.n_layer; ++il) (arch->layer(c, il).moe ? any_moe : any_dense) = true;
  if (any_moe) {
    if (!c.is_moe()) L.fail("missing hyper-parameter '" + an + ".expert_count'");
    if (c.n_ff_exp <= 0) L.fail("missing expert feed-forward width");
    L.product("expert_used_count", c.n_expert_used, "expert_feed_forward_length", c.n_ff_exp);
    L.product("expert_count", c.n_expert, "block_count", c.n_layer);
  }
  if (any_dense && c.n_ff <= 0) L.fail("missing hyper-parameter '" + an + ".feed_forward_length'");

  const int E = c.n_embd;
  const GgufTensor* te = f.tensor("token_embd.weight");
  if (!te || te->ne.size() < 2) L.fail("missing or malformed tensor 'token_embd.weight'");
  if (te->ne[1] <= 0 || te->ne[1] > (1 << 24)) L.fail("vocabulary size out of range");
  c.n_vocab = static_cast<int>(te->ne[1]);
  m->tok_embd = get_tensor(L, "token_embd.weight", {E, c.n_vocab});
  m->output_norm = get_tensor(L, "output_norm.weight", {E});
  m->output = get_tensor(L, "output.weight", {E, c.n_vocab}, false);
  if (!m->output) m->output = m->tok_embd;

  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LayerWeights l;
    l.spec = arch->layer(c, il);
    if (patch) patch(il, l.spec);
    if (l.spec.moe && !f.tensor(p + "ffn_gate_exps.weight") && f.tensor(p + "ffn_gate.0.weight"))
      L.fail("per-expert tensors (old Mixtral GGUF layout) are not supported; re-convert with a current llama.cpp");
    for (const LayerTensorSlot& t : layer_tensors(c, l.spec)) l.*t.member = get_tensor(L, p + t.name, t.ne);
    m->layers_.push_back(l);
  }
  return m;
}

}  // namespace vkmoe
