// CPU forward pass: loader checks and invariants of the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/forward/cpu_forward.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "tests/test_util.h"
#include "tools/synth_model.h"

using namespace vkmoe;

namespace {

using test::max_rel_diff;

std::unique_ptr<Model> synth(const std::string& overrides) {
  return test::synth(overrides, test::test_seed());
}

std::vector<int32_t> random_tokens(int n, int n_vocab) {
  std::mt19937 rng(uint32_t(test::test_seed()));
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % n_vocab);
  return t;
}

}  // namespace

class ForwardArch : public ::testing::TestWithParam<std::string> {};

// Incremental decode through the KV cache equals one batched recompute of the
// whole sequence, for every architecture (tolerance: float summation order).
TEST_P(ForwardArch, IncrementalDecodeEqualsFullRecompute) {
  auto m = synth(GetParam());
  const auto tokens = random_tokens(7, m->config().n_vocab);
  CpuForward inc(*m, 64), full(*m, 64);
  std::vector<float> last;
  for (int32_t t : tokens) last = inc.decode(t);
  std::vector<float> ref = full.eval(tokens);
  EXPECT_LT(max_rel_diff(last, ref), 1e-4);
  for (float v : last) ASSERT_TRUE(std::isfinite(v));
  // Split batches agree too.
  full.reset();
  full.eval({tokens.begin(), tokens.begin() + 3});
  std::vector<float> split = full.eval({tokens.begin() + 3, tokens.end()});
  EXPECT_LT(max_rel_diff(split, ref), 1e-4);
  EXPECT_EQ(full.pos(), 7);
}

// reset() really clears the context, and the context changes the logits.
TEST_P(ForwardArch, ResetRestartsContext) {
  auto m = synth(GetParam());
  CpuForward f(*m, 16);
  auto a = f.decode(5);
  auto b = f.decode(9);  // token 9 after token 5
  f.reset();
  EXPECT_EQ(f.decode(5), a);
  f.reset();
  auto d = f.decode(9);  // token 9 alone
  EXPECT_GT(max_rel_diff(b, d), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Archs, ForwardArch,
                         ::testing::Values("arch=qwen3moe", "arch=olmoe", "arch=qwen2moe", "arch=glm4moe,n_layer=3,n_layer_dense_lead=1,n_rot=32,expert_weights_scale=2.5", "arch=gpt-oss,n_layer=4,n_swa=3,yarn_factor=32,n_ctx_orig=64,quant=MXFP4_MOE", "arch=glm4moe,qk_norm=1,n_ff_shexp=256,quant=Q8_0",
                                           "arch=llama,n_expert=4,n_expert_used=2",  // Mixtral
                                           "arch=llama,n_expert=0", "arch=qwen3", "arch=qwen3moe,quant=Q8_0",
                                           "arch=qwen3moe,quant=Q5_K_M", "arch=olmoe,quant=BF16",
                                           "arch=qwen2moe,quant=F16", "arch=qwen3moe,quant=Q6_K,tied_output=1"));

TEST(ForwardCpu, SimdKernelsTrackScalarReference) {
  auto m = synth("arch=qwen3moe,quant=Q4_K_M");
  const auto tokens = random_tokens(5, m->config().n_vocab);
  CpuForward ref(*m, 32, CpuForward::Kernels::Scalar), simd(*m, 32, CpuForward::Kernels::Simd, 2);
  auto a = ref.eval(tokens), b = simd.eval(tokens);
  // Both use f32 activations: only float summation order differs.
  EXPECT_LT(max_rel_diff(b, a), 1e-4);
}

TEST(ForwardCpu, ContextOverflowIsAnError) {
  auto m = synth("arch=qwen3moe");
  CpuForward f(*m, 4);
  f.eval({1, 2, 3});
  EXPECT_THROW(f.eval({4, 5}), Error);
  EXPECT_THROW(f.eval({m->config().n_vocab}), Error);
}

TEST(ModelLoad, ErrorsAreClear) {
  auto expect_error = [](std::vector<uint8_t> bytes, const std::string& words) {
    try {
      Model::from_gguf(GgufFile::from_memory(std::move(bytes), "m.gguf"));
      FAIL() << "no error, expected: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  GgufWriter w;
  w.add_str("general.architecture", "mamba");
  expect_error(w.to_bytes(), "unsupported architecture 'mamba'");
  GgufWriter w2;
  w2.add_str("general.architecture", "qwen3moe");
  expect_error(w2.to_bytes(), "missing hyper-parameter 'qwen3moe.block_count'");
  // A complete model minus one tensor.
  SynthSpec s;
  s.n_vocab = 512;
  expect_error(test::rewrite_gguf(synth_model_bytes(s), {"blk.1.ffn_up_exps.weight"}),
               "missing tensor 'blk.1.ffn_up_exps.weight'");
}

