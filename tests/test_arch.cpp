// Architecture files (engine/model/arch/): every one round-trips through
// synth and the loader into the layer program its file declares; the
// hyper-parameters they share (router, RoPE scaling) load as llama.cpp
// derives them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include "engine/forward/cpu_forward.h"
#include "engine/model/arch/arch.h"
#include "tests/test_util.h"

namespace vkmoe {
namespace {

std::vector<std::string> all_arch_names() {
  std::vector<std::string> out;
  std::stringstream ss(arch_names());
  for (std::string n; std::getline(ss, n, ',');) out.push_back(n.substr(n.find_first_not_of(' ')));
  return out;
}

SynthSpec small(const std::string& overrides) {
  SynthSpec s;
  s.n_layer = 3;
  s.n_vocab = 512;
  apply_synth_overrides(s, overrides);
  return s;
}

std::unique_ptr<Model> load(const std::vector<uint8_t>& bytes) {
  return Model::from_gguf(GgufFile::from_memory(bytes, "arch test"));
}

TEST(Arch, EveryArchitectureSynthesizesLoadsAndRuns) {
  const auto names = all_arch_names();
  ASSERT_GE(names.size(), 7u);
  for (const std::string& a : names) {
    SCOPED_TRACE(a);
    const SynthSpec s = small("arch=" + a + ",quant=Q8_0");
    auto m = load(synth_model_bytes(s));
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.arch, a);
    EXPECT_EQ(c.n_layer, 3);
    EXPECT_EQ(c.n_embd, s.n_embd);
    ASSERT_EQ(m->layers().size(), 3u);
    const ArchDef* def = find_arch(a);
    ASSERT_NE(def, nullptr);
    for (int il = 0; il < 3; ++il) {
      const LayerSpec want = def->layer(c, il);
      const LayerSpec& got = m->layers()[il].spec;
      EXPECT_EQ(got.moe, want.moe);
      EXPECT_EQ(got.qk_norm, want.qk_norm);
      EXPECT_EQ(got.shared, want.shared);
      EXPECT_EQ(got.window, want.window);
      EXPECT_EQ(bool(m->layers()[il].gate_exps), got.moe);
    }
    CpuForward f(*m, 16);
    const auto logits = f.eval({1, 2, 3});
    ASSERT_EQ(logits.size(), 512u);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
  EXPECT_EQ(find_arch("mamba"), nullptr);
  SynthSpec bad;
  bad.arch = "mamba";
  try {
    synth_model_bytes(bad);
    FAIL() << "unknown arch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("glm4moe"), std::string::npos) << e.what();
  }
}

TEST(Arch, Glm4MoeReadsItsLayerProgram) {
  auto m = load(synth_model_bytes(
      small("arch=glm4moe,n_layer=4,n_layer_dense_lead=2,n_rot=32,n_ff_shexp=512,expert_weights_scale=2.5")));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.n_rot, 32);
  EXPECT_EQ(c.n_layer_dense_lead, 2);
  EXPECT_EQ(c.n_ff_shexp, 512);  // 2 shared experts of n_ff_exp 256
  EXPECT_EQ(c.router.gating, Gating::Sigmoid);
  EXPECT_TRUE(c.router.normalize);
  EXPECT_FLOAT_EQ(c.router.scale, 2.5f);
  for (int il = 0; il < 4; ++il) {
    const LayerSpec& s = m->layers()[il].spec;
    EXPECT_EQ(s.moe, il >= 2);
    EXPECT_EQ(s.probs_bias, il >= 2);
    EXPECT_EQ(s.shared, il >= 2 ? SharedExpert::Plain : SharedExpert::None);
    EXPECT_TRUE(s.qkv_bias);
    EXPECT_EQ(s.qk_norm, QkNorm::None);
    EXPECT_TRUE(bool(m->layers()[il].ffn_gate) != s.moe);
  }
}

// A glm4moe file's trailing next-token-prediction layers are left out: a
// 3-block file declaring one of them computes what the 2-layer file does.
TEST(Arch, Glm4MoeSkipsNextTokenPredictionLayers) {
  const std::string spec = "arch=glm4moe,n_layer_dense_lead=1,quant=F32,seed=5";
  SynthSpec three = small(spec), two = small(spec);
  two.n_layer = 2;
  const auto with_mtp = test::rewrite_gguf(synth_model_bytes(three), {"glm4moe.block_count"}, [](GgufWriter& w) {
    w.add_u32("glm4moe.block_count", 3);
    w.add_u32("glm4moe.nextn_predict_layers", 1);
  });
  auto a = load(with_mtp), b = load(synth_model_bytes(two));
  EXPECT_EQ(a->config().n_layer, 2);
  CpuForward fa(*a, 16), fb(*b, 16);
  EXPECT_EQ(fa.eval({7, 8, 9}), fb.eval({7, 8, 9}));
  const auto all_mtp = test::rewrite_gguf(synth_model_bytes(three), {}, [](GgufWriter& w) {
    w.add_u32("glm4moe.nextn_predict_layers", 3);
  });
  EXPECT_THROW(load(all_mtp), Error);
}

TEST(Arch, GptOssReadsItsLayerProgram) {
  auto m = load(synth_model_bytes(small("arch=gpt-oss,n_layer=4,n_swa=16,yarn_factor=32,n_ctx_orig=256")));
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.router.gating, Gating::SoftmaxWeight);
  EXPECT_FALSE(c.router.normalize);
  for (int il = 0; il < 4; ++il) {
    const LayerSpec& s = m->layers()[il].spec;
    EXPECT_EQ(s.window, il % 2 == 0 ? 16u : 0u) << il;  // even layers slide
    EXPECT_TRUE(s.sinks && s.o_bias && s.qkv_bias && s.router_bias && s.expert_bias);
    EXPECT_EQ(s.act, FfnAct::OaiSwiGLU);
    EXPECT_TRUE(m->layers()[il].attn_sinks && m->layers()[il].down_exps_b);
  }
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.f / 32);
  EXPECT_EQ(c.yarn_ext_factor, 1.f);
  EXPECT_EQ(c.n_ctx_orig_yarn, 256);
  // mscale(32) / (1 + 0.1 ln 32): the two cancel (ggml applies the first inside its rope).
  EXPECT_NEAR(c.yarn_attn_factor, 1.0, 1e-6);
}

TEST(Arch, Deepseek2ReadsItsLayerProgram) {
  const std::string spec =
      "arch=deepseek2,n_layer=4,n_layer_dense_lead=1,q_lora=96,kv_lora=64,n_rot=16,head_k_mla=48,head_v_mla=40,"
      "n_ff_shexp=512,sigmoid_router=1,n_group=4,topk_group=2,expert_weights_scale=2.5,yarn_factor=40,"
      "n_ctx_orig=256,yarn_log_mul=0.0707";
  const auto bytes = synth_model_bytes(small(spec));
  auto m = load(bytes);
  const ModelConfig& c = m->config();
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.mla.q_lora, 96);
  EXPECT_EQ(c.mla.kv_lora, 64);
  EXPECT_EQ(c.head_dim, 64 + 16);  // the cached row: rope part, then the latent
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.v_dim(), 0);
  EXPECT_EQ(c.attn_out_dim(), c.n_head * 40);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_EQ(c.router.gating, Gating::Sigmoid);
  EXPECT_EQ(c.router.n_group, 4);
  EXPECT_EQ(c.router.topk_group, 2);
  EXPECT_FLOAT_EQ(c.router.scale, 2.5f);
  // llama.cpp: rope magnitude attn_factor (1; ggml's own 1 + 0.1 ln 40 cancelled), logits
  // scaled by mscale^2 / sqrt(head_k) with mscale = 1 + 0.0707 ln 40.
  const double ln40 = std::log(40.0), mscale = 1 + 0.0707 * ln40;
  EXPECT_NEAR(c.yarn_attn_factor * (1 + 0.1 * ln40), 1.0, 1e-6);
  EXPECT_NEAR(c.kq_scale, mscale * mscale / std::sqrt(48.0), 1e-5);
  for (int il = 0; il < 4; ++il) {
    const LayerWeights& l = m->layers()[il];
    EXPECT_TRUE(l.spec.mla);
    EXPECT_EQ(l.spec.moe, il >= 1);
    EXPECT_EQ(l.spec.probs_bias, il >= 1);  // the file has exp_probs_b
    EXPECT_EQ(l.spec.shared, il >= 1 ? SharedExpert::Plain : SharedExpert::None);
    EXPECT_TRUE(l.wq_a && l.wq_b && l.q_a_norm && !l.wq && l.wkv_a && l.wk_b && l.wv_b && !l.wk && !l.wv);
  }
  // A trailing next-token-prediction layer (DeepSeek-V3's) is not part of the trunk.
  auto mtp = load(test::rewrite_gguf(bytes, {"deepseek2.block_count"}, [](GgufWriter& w) {
    w.add_u32("deepseek2.block_count", 5);
    w.add_u32("deepseek2.nextn_predict_layers", 1);
  }));
  EXPECT_EQ(mtp->config().n_layer, 4);
  // Without the q bottleneck and with softmax routing (DeepSeek-V2-Lite): attn_q, no selection bias.
  auto lite = load(synth_model_bytes(small("arch=deepseek2,n_layer_dense_lead=1")));
  EXPECT_EQ(lite->config().router.gating, Gating::Softmax);
  EXPECT_TRUE(lite->layers()[1].wq && !lite->layers()[1].wq_a && !lite->layers()[1].spec.probs_bias);
  // Old files with the unsplit attn_kv_b, and shapes latent attention cannot have, are refused.
  auto refused = [&](const std::set<std::string>& drop, const std::function<void(GgufWriter&)>& add,
                     const std::string& why) {
    try {
      load(test::rewrite_gguf(bytes, drop, add));
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({"deepseek2.attention.key_length_mla"}, [](GgufWriter&) {}, "re-convert");
  refused({"deepseek2.attention.head_count_kv"}, [](GgufWriter& w) { w.add_u32("deepseek2.attention.head_count_kv", 4); },
          "head_count_kv must be 1");
  refused({"deepseek2.attention.value_length"}, [](GgufWriter& w) { w.add_u32("deepseek2.attention.value_length", 80); },
          "value_length");
  // Only deepseek2 reads the YaRN log multiplier; elsewhere it is refused rather than ignored.
  const auto qwen = synth_model_bytes(small("arch=qwen3moe,yarn_factor=4"));
  EXPECT_THROW(load(test::rewrite_gguf(qwen, {}, [](GgufWriter& w) {
                 w.add_f32("qwen3moe.rope.scaling.yarn_log_multiplier", 0.1f);
               })),
               Error);
}

// rope.scaling.* as llama.cpp reads them.
TEST(Arch, RopeScalingKeys) {
  const auto base = synth_model_bytes(small("arch=qwen3moe"));
  auto with = [&](const std::function<void(GgufWriter&)>& add) { return load(test::rewrite_gguf(base, {}, add)); };
  EXPECT_EQ(load(base)->config().rope_freq_scale, 1.f);
  auto linear = with([](GgufWriter& w) { w.add_f32("qwen3moe.rope.scaling.factor", 4); });  // type defaults to linear
  EXPECT_FLOAT_EQ(linear->config().rope_freq_scale, 0.25f);
  EXPECT_EQ(linear->config().yarn_ext_factor, 0.f);
  auto none = with([](GgufWriter& w) {
    w.add_str("qwen3moe.rope.scaling.type", "none");
    w.add_f32("qwen3moe.rope.scaling.factor", 4);
  });
  EXPECT_EQ(none->config().rope_freq_scale, 1.f);
  auto yarn = with([](GgufWriter& w) {
    w.add_str("qwen3moe.rope.scaling.type", "yarn");
    w.add_f32("qwen3moe.rope.scaling.factor", 4);
    w.add_f32("qwen3moe.rope.scaling.attn_factor", 0.5f);
    w.add_f32("qwen3moe.rope.scaling.yarn_beta_fast", 16);
  });
  const ModelConfig& y = yarn->config();
  EXPECT_EQ(y.yarn_ext_factor, 1.f);
  EXPECT_EQ(y.yarn_beta_fast, 16.f);
  EXPECT_EQ(y.yarn_beta_slow, 1.f);
  EXPECT_EQ(y.n_ctx_orig_yarn, y.n_ctx_train);
  const float f = 4, mscale = 0.1f * std::log(f) + 1.0f;
  EXPECT_NEAR(y.yarn_attn_factor, mscale / (1.0f + 0.1f * std::log(f)) * 0.5f, 1e-7);
  try {
    with([](GgufWriter& w) { w.add_str("qwen3moe.rope.scaling.type", "longrope"); });
    FAIL() << "longrope accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'longrope' is not supported"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vkmoe
