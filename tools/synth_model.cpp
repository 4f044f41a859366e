#include "tools/synth_model.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "engine/model/arch/arch.h"
#include "engine/model/gguf.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/rope_keys.h"
#include "engine/model/tokenizer.h"
#include "tools/synth_vocab.h"

namespace vkmoe {

SynthSpec SynthSpec::qwen3_30b_a3b() {
  SynthSpec s;
  s.arch = "qwen3moe";
  s.n_layer = 48;
  s.n_embd = 2048;
  s.n_head = 32;
  s.n_head_kv = 4;
  s.head_dim = 128;
  s.n_ff = 6144;
  s.n_expert = 128;
  s.n_expert_used = 8;
  s.n_ff_exp = 768;
  s.n_vocab = 151936;
  s.n_ctx = 40960;
  s.quant = "Q4_K_M";
  s.fast = true;
  return s;
}

SynthSpec SynthSpec::preset(const std::string& name) {
  if (name == "qwen3-30b-a3b") return qwen3_30b_a3b();
  SynthSpec s;
  s.fast = true;
  s.quant = "Q4_K_M";
  if (name == "glm-4.5-air") {  // 46 layers (the file's next-token-prediction layer left out)
    s.arch = "glm4moe";
    s.n_layer = 46;
    s.n_embd = 4096;
    s.n_head = 96;
    s.n_head_kv = 8;
    s.head_dim = 128;
    s.n_rot = 64;
    s.n_ff = 10944;
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_exp = 1408;
    s.n_ff_shexp = 1408;
    s.n_layer_dense_lead = 1;
    s.n_vocab = 151552;
    s.n_ctx = 131072;
    return s;
  }
  if (name == "gpt-oss-20b" || name == "gpt-oss-120b") {
    const bool big = name == "gpt-oss-120b";
    s.arch = "gpt-oss";
    s.quant = "MXFP4_MOE";
    s.n_layer = big ? 36 : 24;
    s.n_embd = 2880;
    s.n_head = 64;
    s.n_head_kv = 8;
    s.head_dim = 64;
    s.n_expert = big ? 128 : 32;
    s.n_expert_used = 4;
    s.n_ff_exp = 2880;
    s.n_vocab = 201088;
    s.n_ctx = 131072;
    s.rope_theta = 150000.f;
    s.n_swa = 128;
    s.yarn_factor = 32.f;
    s.n_ctx_orig = 4096;
    return s;
  }
  if (name == "deepseek-v2-lite" || name == "deepseek-v3") {
    const bool v3 = name == "deepseek-v3";
    s.arch = "deepseek2";
    s.quant = v3 ? "Q2_K" : "Q4_K_M";
    s.n_layer = v3 ? 61 : 27;
    s.n_embd = v3 ? 7168 : 2048;
    s.n_head = v3 ? 128 : 16;
    s.q_lora = v3 ? 1536 : 0;
    s.kv_lora = 512;
    s.n_rot = 64;
    s.head_k_mla = 192;
    s.head_v_mla = 128;
    s.n_ff = v3 ? 18432 : 10944;
    s.n_layer_dense_lead = v3 ? 3 : 1;
    s.n_expert = v3 ? 256 : 64;
    s.n_expert_used = v3 ? 8 : 6;
    s.n_ff_exp = v3 ? 2048 : 1408;
    s.n_ff_shexp = v3 ? 2048 : 2816;
    s.sigmoid_router = v3;
    s.expert_weights_scale = v3 ? 2.5f : 1.f;
    s.n_group = v3 ? 8 : 1;
    s.topk_group = v3 ? 4 : 1;
    s.n_vocab = v3 ? 129280 : 102400;
    s.n_ctx = 163840;
    s.rope_theta = 10000.f;
    s.yarn_factor = 40.f;
    s.n_ctx_orig = 4096;
    s.yarn_log_mul = v3 ? 0.1f : 0.0707f;
    return s;
  }
  throw Error("unknown preset '" + name +
              "' (qwen3-30b-a3b, glm-4.5-air, gpt-oss-20b, gpt-oss-120b, deepseek-v2-lite, deepseek-v3)");
}

void apply_synth_overrides(SynthSpec& s, const std::string& overrides) {
  std::stringstream ss(overrides);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos) throw Error("synth option '" + item + "' is not key=value");
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto num = [&]() {
      try {
        size_t used = 0;
        long long x = std::stoll(v, &used);
        if (used != v.size() || x < 0 || x > (1 << 30)) throw 0;
        return static_cast<int>(x);
      } catch (...) {
        throw Error("synth option '" + k + "' needs a non-negative integer, got '" + v + "'");
      }
    };
    auto fnum = [&]() {
      try {
        size_t used = 0;
        const float x = std::stof(v, &used);
        if (used != v.size() || !(x > 0 && x < 1e6f)) throw 0;
        return x;
      } catch (...) {
        throw Error("synth option '" + k + "' needs a positive number, got '" + v + "'");
      }
    };
    if (k == "arch") s.arch = v;
    else if (k == "quant") s.quant = v;
    else if (k == "vec_type") s.vec_type = v;
    else if (k == "n_layer") s.n_layer = num();
    else if (k == "n_embd") s.n_embd = num();
    else if (k == "n_head") s.n_head = num();
    else if (k == "n_head_kv") s.n_head_kv = num();
    else if (k == "head_dim") s.head_dim = num();
    else if (k == "n_ff") s.n_ff = num();
    else if (k == "n_expert") s.n_expert = num();
    else if (k == "n_expert_used") s.n_expert_used = num();
    else if (k == "n_ff_exp") s.n_ff_exp = num();
    else if (k == "n_ff_shexp") s.n_ff_shexp = num();
    else if (k == "n_rot") s.n_rot = num();
    else if (k == "n_layer_dense_lead") s.n_layer_dense_lead = num();
    else if (k == "qk_norm") s.qk_norm = num() != 0;
    else if (k == "expert_weights_scale") s.expert_weights_scale = fnum();
    else if (k == "n_swa") s.n_swa = num();
    else if (k == "q_lora") s.q_lora = num();
    else if (k == "kv_lora") s.kv_lora = num();
    else if (k == "head_k_mla") s.head_k_mla = num();
    else if (k == "head_v_mla") s.head_v_mla = num();
    else if (k == "sigmoid_router") s.sigmoid_router = num() != 0;
    else if (k == "n_group") s.n_group = num();
    else if (k == "topk_group") s.topk_group = num();
    else if (k == "yarn_log_mul") s.yarn_log_mul = fnum();
    else if (k == "router_skew") s.router_skew = fnum();
    else if (k == "branch_scale") s.branch_scale = fnum();
    else if (k == "yarn_factor") s.yarn_factor = fnum();
    else if (k == "n_ctx_orig") s.n_ctx_orig = num();
    else if (k == "n_vocab") s.n_vocab = num();
    else if (k == "n_ctx") s.n_ctx = num();
    else if (k == "seed") s.seed = num();
    else if (k == "fast") s.fast = num() != 0;
    else if (k == "tied_output") s.tied_output = num() != 0;
    else throw Error("unknown synth option '" + k + "'");
  }
}

namespace {

const ArchDef& synth_arch(const SynthSpec& s) {
  const ArchDef* a = find_arch(s.arch);
  if (!a) throw Error("synth: unknown arch '" + s.arch + "' (" + arch_names() + ")");
  return *a;
}

// The configuration the file will load as; routed experts only where the
// architecture's layers have them (n_expert 0 makes llama dense).
ModelConfig synth_config(const SynthSpec& s) {
  ModelConfig c;
  c.arch = s.arch;
  c.n_layer = s.n_layer;
  c.n_embd = s.n_embd;
  c.n_head = s.n_head;
  c.n_head_kv = s.n_head_kv;
  c.head_dim = s.head_dim;
  c.n_rot = s.n_rot ? s.n_rot : s.head_dim;
  c.n_layer_dense_lead = s.n_layer_dense_lead;
  c.qk_norm = s.qk_norm ? QkNorm::PerHead : QkNorm::None;
  c.router.scale = s.expert_weights_scale;
  c.n_swa = s.n_swa;
  c.n_ff = s.n_ff;
  c.n_expert = s.n_expert;
  c.n_expert_used = s.n_expert_used;
  c.n_ff_exp = s.n_ff_exp;
  c.n_ff_shexp = s.n_ff_shexp;
  c.n_ctx_train = s.n_ctx;
  c.rope_theta = s.rope_theta;
  const ArchDef& a = synth_arch(s);
  if (a.layer(c, 0).mla) {  // unset sizes default to a small latent attention
    if (!s.n_rot) c.n_rot = s.head_dim / 2;
    c.mla = {s.q_lora, s.kv_lora ? s.kv_lora : 2 * s.head_dim, s.head_k_mla ? s.head_k_mla : s.head_dim,
             s.head_v_mla ? s.head_v_mla : s.head_dim};
    c.head_dim = c.mla.kv_lora + c.n_rot;
    c.n_head_kv = 1;
    c.yarn_log_mul = s.yarn_log_mul;
    c.router.gating = s.sigmoid_router ? Gating::Sigmoid : Gating::Softmax;
    c.router.normalize = c.probs_bias = s.sigmoid_router;
    c.router.n_group = s.n_group;
    c.router.topk_group = s.topk_group;
  }
  bool moe = false, shared = false;
  for (int il = 0; il < c.n_layer; ++il) {
    const LayerSpec l = a.layer(c, il);
    moe |= l.moe;
    shared |= l.shared != SharedExpert::None;
  }
  if (!moe) c.n_expert = c.n_expert_used = c.n_ff_exp = 0;
  if (!shared) c.n_ff_shexp = 0;
  return c;
}

}  // namespace

std::string describe(const SynthSpec& s) {
  const ModelConfig c = synth_config(s);
  std::ostringstream o;
  o << s.arch << " " << s.quant << ": " << s.n_layer << " layers, embd " << s.n_embd;
  if (c.is_mla())
    o << ", latent attention " << s.n_head << " heads (k " << c.mla.head_k << ", v " << c.mla.head_v << "), cache "
      << c.mla.kv_lora << "+" << c.n_rot;
  else
    o << ", heads " << s.n_head << "/" << s.n_head_kv << "x" << s.head_dim;
  if (!c.is_moe())
    o << ", ff " << s.n_ff;
  else
    o << ", experts " << s.n_expert_used << "/" << s.n_expert << " x ff " << s.n_ff_exp;
  if (c.n_ff_shexp) o << ", shared ff " << s.n_ff_shexp;
  o << ", vocab " << s.n_vocab;
  return o.str();
}

namespace {

// Quantization presets. A type name gives a uniform file; the llama.cpp
// mixes (named like its ftypes) give each tensor kind its own type:
struct QuantMix {
  const char* name;
  GgmlType base;         // most matrices
  GgmlType output;       // output.weight
  GgmlType attn_v;       // attn_v (every layer)
  GgmlType ffn_down;     // ffn_down / _exps / _shexp (every layer)
  GgmlType more_bits;    // attn_v / ffn_down in use_more_bits() layers
  GgmlType experts;      // ffn_{gate,up,down}_exps when set apart (MXFP4_MOE), else base
};
// Simplified from llama.cpp's llama_tensor_get_type.
const QuantMix kMixes[] = {
    {"Q4_K_M", GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K},
    {"Q5_K_M", GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_K},
    {"Q2_K", GgmlType::Q2_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q2_K},
    {"Q3_K_M", GgmlType::Q3_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q3_K},
    {"IQ4_XS", GgmlType::IQ4_XS, GgmlType::Q6_K, GgmlType::IQ4_XS, GgmlType::IQ4_XS, GgmlType::IQ4_XS,
     GgmlType::IQ4_XS},
    // gpt-oss style: MXFP4 routed experts, Q8_0 for every other matrix.
    {"MXFP4_MOE", GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::MXFP4},
};
const GgmlType kUniform[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q4_0,
                             GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q3_K,   GgmlType::Q4_K,
                             GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL};
const char* const kQuantHelp =
    "mixes Q4_K_M, Q5_K_M, Q3_K_M, Q2_K, IQ4_XS, MXFP4 (= MXFP4_MOE); uniform F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
    "Q5_0, Q5_1, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL";

// The mix for preset q (a uniform type is a mix of one type).
QuantMix quant_mix(const std::string& q) {
  const std::string name = q == "MXFP4" ? "MXFP4_MOE" : q;
  for (const QuantMix& m : kMixes)
    if (name == m.name) return m;
  for (GgmlType t : kUniform)
    if (name == type_name(t)) return {type_name(t), t, t, t, t, t, t};
  throw Error("unknown quantization '" + q + "' (" + kQuantHelp + ")");
}

GgmlType base_type(const std::string& q) { return quant_mix(q).base; }

struct TensorDesc {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type;
  float stddev;  // of the random weights
  float mean;    // norms center on 1
  float row_log_sd = 0;  // F32 only: rows scaled by exp(N(0, row_log_sd^2)), one draw per row
};

// The matrices whose products are added to the residual stream.
bool writes_residual(const std::string& name) {
  for (const char* n : {"attn_output.weight", "ffn_down.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight"})
    if (name == n) return true;
  return false;
}

std::vector<TensorDesc> tensor_list(const SynthSpec& s, const ModelConfig& c) {
  std::vector<TensorDesc> out;
  const int64_t E = s.n_embd;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, int layer, float stddev, float mean = 0) {
    out.push_back({name, ne, synth_tensor_type(s, name, ne[0], layer), stddev, mean});
  };
  auto w = [](int64_t in) { return 1.0f / std::sqrt(float(in)); };
  add("token_embd.weight", {E, s.n_vocab}, -1, 1.0f);
  const ArchDef& arch = synth_arch(s);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    for (const LayerTensorSlot& t : layer_tensors(c, arch.layer(c, il))) {
      switch (t.kind) {
        case TensorKind::Norm: add(p + t.name, t.ne, il, 0.1f, 1.f); break;
        case TensorKind::Bias: add(p + t.name, t.ne, il, 0.1f); break;
        case TensorKind::Router:
          add(p + t.name, t.ne, il, 2 * w(E));
          out.back().row_log_sd = s.router_skew;
          break;
        case TensorKind::SharedGate:
        case TensorKind::Matrix:
        case TensorKind::HeadMatrices:
        case TensorKind::Experts:
          add(p + t.name, t.ne, il, w(t.ne[0]) * (writes_residual(t.name) ? s.branch_scale : 1.f));
          break;
      }
    }
  }
  add("output_norm.weight", {E}, -1, 0.1f, 1.f);
  if (!s.tied_output) add("output.weight", {E, s.n_vocab}, -1, w(E));
  return out;
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Elements per generation unit: one quant block, or 256 floats.
int64_t unit_elems(GgmlType t) {
  int bs = type_traits(t).block_size;
  return bs > 1 ? bs : 256;
}

void fill_random(const TensorDesc& d, uint64_t seed, uint8_t* dst) {
  const int64_t n0 = d.ne[0];
  int64_t rows = 1;
  for (size_t i = 1; i < d.ne.size(); ++i) rows *= d.ne[i];
  std::mt19937_64 rng(seed ^ name_hash(d.name));
  std::normal_distribution<float> nd(d.mean, d.stddev);
  std::vector<float> row(n0);
  const size_t rb = row_bytes(d.type, n0);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    quantize_row(d.type, row.data(), dst + r * rb, n0);
  }
}

// Big tensors: random choice among a pool of pre-quantized random units.
void fill_fast(const TensorDesc& d, uint64_t seed, uint8_t* dst, size_t nbytes) {
  const int64_t ue = unit_elems(d.type);
  if (d.ne[0] % ue != 0 || d.ne.size() == 1) return fill_random(d, seed, dst);
  const size_t ub = row_bytes(d.type, ue);
  const int kPool = 4096;
  std::mt19937_64 rng(seed ^ name_hash(d.name));
  std::normal_distribution<float> nd(d.mean, d.stddev);
  std::vector<float> tmp(ue);
  std::vector<uint8_t> pool(kPool * ub);
  for (int i = 0; i < kPool; ++i) {
    for (auto& v : tmp) v = nd(rng);
    quantize_row(d.type, tmp.data(), pool.data() + i * ub, ue);
  }
  uint64_t x = rng() | 1;
  for (size_t off = 0; off + ub <= nbytes; off += ub) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(dst + off, pool.data() + (x % kPool) * ub, ub);
  }
}

// Router skew: a router row of larger norm gives its expert logits of larger
// spread, so it enters the top-k more often (skewed popularity), as trained
// routers do; the scale draws are per row, fixed by the seed.
void scale_rows(const TensorDesc& d, uint64_t seed, uint8_t* dst, size_t nbytes) {
  if (d.row_log_sd <= 0 || d.type != GgmlType::F32) return;
  const size_t n0 = size_t(d.ne[0]), rows = nbytes / (n0 * sizeof(float));
  std::mt19937_64 rng(seed ^ name_hash(d.name) ^ 0x5ca1e5ull);
  std::normal_distribution<float> nd(0.f, d.row_log_sd);
  float* f = reinterpret_cast<float*>(dst);
  for (size_t r = 0; r < rows; ++r) {
    const float k = std::exp(nd(rng));
    for (size_t i = 0; i < n0; ++i) f[r * n0 + i] *= k;
  }
}

GgufWriter build_writer(const SynthSpec& s) {
  base_type(s.quant);
  if (s.vec_type != "F32" && s.vec_type != "F16" && s.vec_type != "BF16" && s.vec_type != "Q8_0")
    throw Error("synth vec_type '" + s.vec_type + "' is not one of F32, F16, BF16, Q8_0");
  const ModelConfig c = synth_config(s);
  if (s.n_layer <= 0 || s.n_embd <= 0 || s.n_head <= 0 || c.n_head_kv <= 0 || c.head_dim <= 0 ||
      s.n_head % c.n_head_kv != 0 || c.head_dim % 2 != 0)
    throw Error("synth: inconsistent attention shape");
  if (c.is_mla() && (c.n_rot <= 0 || c.mla.head_k <= c.n_rot || c.mla.head_v <= 0))
    throw Error("synth: latent attention needs 0 < n_rot < head_k_mla and head_v_mla > 0");
  if (c.is_moe() && (s.n_expert <= 0 || s.n_expert_used <= 0 || s.n_expert_used > s.n_expert))
    throw Error("synth: need 0 < n_expert_used <= n_expert");
  const std::string& a = s.arch;
  GgufWriter w;
  w.add_str("general.architecture", a);
  w.add_str("general.name", "vkmoe-synth-" + a);
  w.add_u32(a + ".block_count", s.n_layer);
  w.add_u32(a + ".context_length", s.n_ctx);
  w.add_u32(a + ".embedding_length", s.n_embd);
  synth_arch(s).write(c, w);
  w.add_u32(a + ".attention.head_count", s.n_head);
  w.add_u32(a + ".attention.head_count_kv", c.n_head_kv);
  w.add_u32(a + ".attention.key_length", c.head_dim);
  w.add_u32(a + ".attention.value_length", c.is_mla() ? c.mla.kv_lora : c.head_dim);
  w.add_u32(a + ".rope.dimension_count", c.n_rot);
  w.add_f32(a + ".rope.freq_base", s.rope_theta);
  w.add_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  if (s.yarn_factor > 0) write_yarn(c, s.yarn_factor, s.n_ctx_orig, w);
  if (c.is_moe()) {
    w.add_u32(a + ".expert_count", s.n_expert);
    w.add_u32(a + ".expert_used_count", s.n_expert_used);
  }
  add_synth_tokenizer(w, a == "llama" ? TokenizerKind::Spm : TokenizerKind::Bpe, s.n_vocab);
  for (const auto& d : tensor_list(s, c)) {
    uint64_t seed = s.seed;
    bool fast = s.fast;
    w.add_tensor_lazy(d.name, d.ne, d.type, [d, seed, fast](uint8_t* dst, size_t nbytes) {
      if (fast)
        fill_fast(d, seed, dst, nbytes);
      else
        fill_random(d, seed, dst);
      scale_rows(d, seed, dst, nbytes);
    });
  }
  return w;
}

}  // namespace

GgmlType synth_tensor_type(const SynthSpec& s, const std::string& name, int64_t n0, int layer) {
  auto ends = [&](const char* suf) {
    size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  // Routers stay F32, and by default vectors and biases too, as llama.cpp's
  // quantizer leaves them.
  if (ends("_norm.weight") || ends(".bias") || ends("attn_sinks.weight")) return base_type(s.vec_type);
  if (ends("ffn_gate_inp.weight") || ends("ffn_gate_inp_shexp.weight")) return GgmlType::F32;
  const QuantMix mix = quant_mix(s.quant);
  GgmlType t = mix.base;
  if (name == "output.weight") t = mix.output;
  // llama.cpp's use_more_bits(): first and last eighth, and every third layer.
  const int n = s.n_layer;
  const bool more = layer >= 0 && (layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2);
  if (ends("attn_v.weight")) t = more ? mix.more_bits : mix.attn_v;
  if (ends("ffn_down.weight") || ends("ffn_down_exps.weight") || ends("ffn_down_shexp.weight"))
    t = more ? mix.more_bits : mix.ffn_down;
  if (ends("_exps.weight")) {
    if (mix.experts != mix.base) t = mix.experts;  // MXFP4_MOE: every routed expert matrix
  }
  // Rows that do not fit the block size fall back like llama.cpp does (the
  // low-bit 256-element types to IQ4_NL, the others to Q8_0), else F16.
  const int bs = type_traits(t).block_size;
  if (n0 % bs != 0) {
    const bool low = t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::IQ4_XS;
    t = n0 % QK8_0 != 0 ? GgmlType::F16 : low ? GgmlType::IQ4_NL : GgmlType::Q8_0;
  }
  return t;
}

std::vector<uint8_t> synth_model_bytes(const SynthSpec& s) { return build_writer(s).to_bytes(); }

void write_synth_model(const SynthSpec& s, const std::string& path) { build_writer(s).write(path); }

std::vector<uint8_t> synth_model_header(const SynthSpec& s) { return build_writer(s).header(); }

}  // namespace vkmoe
