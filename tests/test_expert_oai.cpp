// gpt-oss's expert FFN: per-expert gate/up/down biases and the clamped SwiGLU
// variant (OaiSwiGLU), on every expert path:
// - the CPU kernels of the offload modes (moe_ffn_cpu, expert_ffn_batched; f32
//   and Q8 activations) against a scalar double reference written here from
//   ggml's definition;
// - the GPU's swiglu variant and bias-row shader against the CPU;
// - whole models: GPU logits (resident, a small expert cache, cpu-moe; a
//   batched prompt then decode) against CpuForward, on a synthetic qwen3moe
//   model whose layers are given expert biases and OaiSwiGLU (Model::from_gguf
//   with a spec patch, the bias tensors added to the file).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "cpu/expert_batch.h"
#include "cpu/expert_ffn.h"
#include "cpu/ffn_act.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "engine/forward/cpu_forward.h"
#include "engine/forward/engine_select.h"
#include "engine/forward/gpu_ops.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/offload/plan_model.h"
#include "tests/simd_test_util.h"
#include "tests/test_util.h"
#include "tests/vk_test_env.h"
#include "tools/synth_model.h"

using namespace vkmoe;
using namespace vkmoe::test;

namespace {

// ggml's swiglu_oai (alpha 1.702, limit 7) in double.
double oai_ref(double g, double u) {
  const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
  return x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
}
double silu_ref(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

// ---- CPU kernels ----

constexpr int kEmbd = 256, kFf = 256;

struct BiasedExpert {
  RandomExpert w;
  std::vector<float> gate_b, up_b, down_b;
  ExpertView view(GluAct act, bool biases) const {
    ExpertView v = w.view(kEmbd, kFf);
    if (biases) {
      v.gate_b = gate_b.data();
      v.up_b = up_b.data();
      v.down_b = down_b.data();
    }
    v.act = act;
    return v;
  }
};

// Biases large enough that the clamps of OaiSwiGLU are active on many rows.
BiasedExpert make_biased(std::mt19937& rng, GgmlType g, GgmlType u, GgmlType d) {
  BiasedExpert e{make_expert(rng, g, u, d, kEmbd, kFf), gaussian(rng, kFf, 5.f), gaussian(rng, kFf, 5.f),
                 gaussian(rng, kEmbd, 4.f)};
  return e;
}

// out = sum_k w_k * (down(act(gate x + gb, up x + ub)) + db), in double on the dequantized weights.
std::vector<double> expert_ref(const std::vector<const BiasedExpert*>& es, const std::vector<float>& w,
                               const float* x, GluAct act, bool biases) {
  std::vector<double> out(kEmbd, 0.0), h(kFf);
  for (size_t k = 0; k < es.size(); ++k) {
    const BiasedExpert& e = *es[k];
    for (int r = 0; r < kFf; ++r) {
      double g = biases ? e.gate_b[r] : 0.0, u = biases ? e.up_b[r] : 0.0;
      for (int c = 0; c < kEmbd; ++c) {
        g += double(e.w.gate_f[size_t(r) * kEmbd + c]) * x[c];
        u += double(e.w.up_f[size_t(r) * kEmbd + c]) * x[c];
      }
      h[r] = act == GluAct::OaiSwiGLU ? oai_ref(g, u) : silu_ref(g, u);
    }
    for (int r = 0; r < kEmbd; ++r) {
      double y = biases ? e.down_b[r] : 0.0;
      for (int c = 0; c < kFf; ++c) y += double(e.w.down_f[size_t(r) * kFf + c]) * h[c];
      out[r] += w[k] * y;
    }
  }
  return out;
}

// max |a - b| / max |b|
double rel_err(const float* a, const std::vector<double>& b) {
  double mx = 0, scale = 1e-9;
  for (size_t i = 0; i < b.size(); ++i) {
    mx = std::max(mx, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return mx / scale;
}

// Relative L2 error.
double rel_l2(const float* a, const std::vector<double>& b) {
  double e = 0, s = 0;
  for (size_t i = 0; i < b.size(); ++i) e += (a[i] - b[i]) * (a[i] - b[i]), s += b[i] * b[i];
  return std::sqrt(e / std::max(s, 1e-30));
}

const GgmlType kTypes[4][3] = {{GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0},
                               {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K},
                               {GgmlType::F32, GgmlType::F16, GgmlType::BF16},
                               {GgmlType::MXFP4, GgmlType::Q5_0, GgmlType::IQ4_NL}};

}  // namespace

// Exact values of ggml's swiglu_oai, and the SiLU default.
TEST(ExpertFfnOai, ActivationMatchesGgml) {
  for (double g : {-30.0, -7.5, -3.0, -0.4, 0.0, 0.7, 6.9, 7.0, 7.2, 40.0})
    for (double u : {-20.0, -7.0, -1.0, 0.0, 0.3, 6.5, 8.0, 100.0}) {
      EXPECT_NEAR(glu(GluAct::OaiSwiGLU, float(g), float(u)), oai_ref(g, u), 1e-5 * (1 + std::fabs(oai_ref(g, u))))
          << g << " " << u;
      EXPECT_NEAR(glu(GluAct::SiLU, float(g), float(u)), silu_ref(g, u), 1e-5 * (1 + std::fabs(silu_ref(g, u))));
    }
  // Clamped: g above 7 acts as 7, u outside [-7, 7] as the bound.
  EXPECT_EQ(glu(GluAct::OaiSwiGLU, 9.f, 12.f), glu(GluAct::OaiSwiGLU, 7.f, 7.f));
  EXPECT_EQ(glu(GluAct::OaiSwiGLU, 2.f, -12.f), glu(GluAct::OaiSwiGLU, 2.f, -7.f));
  EXPECT_NE(glu(GluAct::OaiSwiGLU, -9.f, 1.f), glu(GluAct::OaiSwiGLU, -7.f, 1.f));  // no lower clamp on g
}

// moe_ffn_cpu (decode's cold experts) with biases and either activation vs
// the double reference: f32 activations within float rounding, Q8 within
// its quantization error (4% relative L2, as the existing Q8 test).
TEST(ExpertFfnOai, MoeFfnCpuMatchesReference) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<BiasedExpert> es;
  for (const auto& t : kTypes) es.push_back(make_biased(rng, t[0], t[1], t[2]));
  const std::vector<float> w = {0.4f, 0.3f, 0.2f, 0.1f};
  const auto x = gaussian(rng, kEmbd);
  ThreadPool pool(3);
  std::vector<const BiasedExpert*> ptrs;
  for (const auto& e : es) ptrs.push_back(&e);
  for (GluAct act : {GluAct::SiLU, GluAct::OaiSwiGLU})
    for (bool biases : {false, true}) {
      SCOPED_TRACE(std::string(act == GluAct::OaiSwiGLU ? "oai" : "silu") + (biases ? " biased" : ""));
      std::vector<ExpertView> views;
      for (const auto& e : es) views.push_back(e.view(act, biases));
      const auto ref = expert_ref(ptrs, w, x.data(), act, biases);
      std::vector<float> out(kEmbd);
      moe_ffn_cpu(views.data(), w.data(), int(views.size()), x.data(), out.data(), pool, CpuActivations::F32);
      EXPECT_LT(rel_err(out.data(), ref), 2e-5);
      moe_ffn_cpu(views.data(), w.data(), int(views.size()), x.data(), out.data(), pool, CpuActivations::Q8);
      EXPECT_LT(rel_l2(out.data(), ref), 0.04);
      // The biases and the activation matter at this scale.
      if (biases && act == GluAct::OaiSwiGLU) {
        EXPECT_GT(rel_l2(out.data(), expert_ref(ptrs, w, x.data(), act, false)), 0.2);
        EXPECT_GT(rel_l2(out.data(), expert_ref(ptrs, w, x.data(), GluAct::SiLU, true)), 0.2);
      }
    }
}

// expert_ffn_batched (prompt processing's CPU experts): several experts, each
// with its tokens and weights, into a non-zero output, vs the double reference
// token by token; f32 and Q8 activations.
TEST(ExpertFfnOai, BatchedMatchesReference) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<BiasedExpert> es;
  for (const auto& t : kTypes) es.push_back(make_biased(rng, t[0], t[1], t[2]));
  constexpr int kTokens = 9;
  const auto x = gaussian(rng, int64_t{kTokens} * kEmbd);
  const auto base = gaussian(rng, int64_t{kTokens} * kEmbd, 0.1f);
  // Expert b takes tokens {b, b+1, ..., } (every token meets one to four experts).
  std::vector<std::vector<int32_t>> toks(es.size());
  std::vector<std::vector<float>> wts(es.size());
  std::uniform_real_distribution<float> wd(0.05f, 0.5f);
  for (size_t b = 0; b < es.size(); ++b)
    for (int t = int(b); t < kTokens; t += int(b) + 1) toks[b].push_back(t), wts[b].push_back(wd(rng));
  ThreadPool pool(3);
  for (GluAct act : {GluAct::SiLU, GluAct::OaiSwiGLU}) {
    SCOPED_TRACE(act == GluAct::OaiSwiGLU ? "oai" : "silu");
    std::vector<ExpertBatch> batches;
    for (size_t b = 0; b < es.size(); ++b)
      batches.push_back({es[b].view(act, true), toks[b].data(), wts[b].data(), int(toks[b].size())});
    for (CpuActivations ca : {CpuActivations::F32, CpuActivations::Q8}) {
      std::vector<float> out = base;
      expert_ffn_batched(batches.data(), int(batches.size()), x.data(), kEmbd, out.data(), kEmbd, pool, ca);
      for (int t = 0; t < kTokens; ++t) {
        std::vector<const BiasedExpert*> used;
        std::vector<float> w;
        for (size_t b = 0; b < es.size(); ++b)
          for (size_t i = 0; i < toks[b].size(); ++i)
            if (toks[b][i] == t) used.push_back(&es[b]), w.push_back(wts[b][i]);
        auto ref = expert_ref(used, w, x.data() + int64_t{t} * kEmbd, act, true);
        for (int r = 0; r < kEmbd; ++r) ref[r] += base[int64_t{t} * kEmbd + r];
        const float* o = out.data() + int64_t{t} * kEmbd;
        if (ca == CpuActivations::F32)
          EXPECT_LT(rel_err(o, ref), 2e-5) << "token " << t;
        else
          EXPECT_LT(rel_l2(o, ref), 0.04) << "token " << t << " (Q8)";
      }
    }
  }
}

// ---- GPU building blocks ----

namespace {

struct GpuOpsEnv : VkEnv {
  vk::Buffer scratch = ctx->create_buffer(1 << 16, vk::MemoryKind::Device, "gemm scratch");
  vk::Buffer flag = buf(std::vector<uint32_t>{0xffffffffu});
  vk::Buffer counters = buf(std::vector<uint32_t>(4, 0));
  GpuOps ops{*ctx, scratch, flag, counters};
};

}  // namespace

// GpuOps::swiglu with either activation vs cpu/ffn_act.h, on values that
// cross the clamps.
TEST(ShaderOai, SwigluVariantMatchesCpu) {
  GpuOpsEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n = 3000;
  const auto g = e.randn(n, 8.f), u = e.randn(n, 8.f);
  for (FfnAct act : {FfnAct::SiLU, FfnAct::OaiSwiGLU}) {
    vk::Buffer bg = e.buf(g), bu = e.buf(u);
    e.record([&](vk::Recorder& r) { e.ops.swiglu(r, bg, bu, n, act); });
    const auto got = e.read(bg, n);
    const GluAct a = act == FfnAct::OaiSwiGLU ? GluAct::OaiSwiGLU : GluAct::SiLU;
    for (uint32_t i = 0; i < n; ++i) {
      const double want = a == GluAct::OaiSwiGLU ? oai_ref(g[i], u[i]) : silu_ref(g[i], u[i]);
      ASSERT_NEAR(got[i], want, 2e-5 * (1 + std::fabs(want))) << "element " << i << " g " << g[i] << " u " << u[i];
    }
  }
}

// GpuOps::bias_rows: one id per row (decode; -1 skipped), and a MoE table's
// tile words (one id per 32 rows) mapped group -> expert (offload), with
// unmapped groups and -1 tiles skipped.
TEST(ShaderOai, BiasRowsByIdsTableAndMap) {
  GpuOpsEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t width = 300, n_bias = 5, stride = 310;
  const auto bias = e.randn(size_t(n_bias) * width);
  vk::Buffer bb = e.buf(bias);
  {  // decode: ids {3, -1, 0, 4}
    const std::vector<int32_t> ids = {3, -1, 0, 4};
    const uint32_t rows = 4;
    const auto y = e.randn(size_t(rows) * stride);
    vk::Buffer bi = e.buf(ids), by = e.buf(y);
    GpuOps::BiasRows a;
    a.bias = &bb, a.width = width, a.n_bias = n_bias, a.ids = &bi, a.y = &by, a.y_stride = stride, a.rows = rows;
    e.record([&](vk::Recorder& r) { e.ops.bias_rows(r, a); });
    const auto got = e.read(by, size_t(rows) * stride);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t i = 0; i < stride; ++i) {
        const float want = y[r * stride + i] + (ids[r] >= 0 && i < width ? bias[ids[r] * width + i] : 0.f);
        ASSERT_EQ(got[r * stride + i], want) << "row " << r << " col " << i;
      }
  }
  {  // grouped: words [0..3] unrelated, tiles at word 4: groups {2, 0, -1, 1, 3}; map {4, -1, 1, 0}
    const std::vector<int32_t> words = {99, 99, 99, 99, 2, 0, -1, 1, 3};
    const std::vector<int32_t> map = {4, -1, 1, 0};
    const uint32_t rows = 5 * 32;
    const auto y = e.randn(size_t(rows) * width);
    vk::Buffer bw = e.buf(words), bm = e.buf(map), by = e.buf(y), by2 = e.buf(y);
    GpuOps::BiasRows a;
    a.bias = &bb, a.width = width, a.n_bias = n_bias, a.ids = &bw, a.id_off = 4, a.rows_per_id = 32;
    a.y = &by, a.y_stride = width, a.rows = rows;
    GpuOps::BiasRows mapped = a;
    mapped.map = &bm;
    mapped.y = &by2;
    e.record([&](vk::Recorder& r) {
      e.ops.bias_rows(r, a);
      e.ops.bias_rows(r, mapped);
    });
    const auto got = e.read(by, size_t(rows) * width), got_m = e.read(by2, size_t(rows) * width);
    for (uint32_t r = 0; r < rows; ++r) {
      const int32_t g = words[4 + r / 32], ex = g >= 0 ? map[g] : -1;
      for (uint32_t i = 0; i < width; ++i) {
        const float y0 = y[r * width + i];
        ASSERT_EQ(got[r * width + i], g >= 0 ? y0 + bias[g * width + i] : y0) << "row " << r;
        ASSERT_EQ(got_m[r * width + i], ex >= 0 ? y0 + bias[ex * width + i] : y0) << "mapped row " << r;
      }
    }
  }
}

// ---- whole models ----

namespace {

// A synthetic qwen3moe model whose MoE layers have per-expert biases (of
// bias_type) and `act`: the bias tensors are added to the file and the
// layers' specs patched before the tensors are read.
std::unique_ptr<Model> biased_moe_model(const std::string& overrides, uint64_t seed, FfnAct act, bool biases,
                                        GgmlType bias_type = GgmlType::F32) {
  SynthSpec s;
  s.n_layer = 2;
  s.n_vocab = 512;
  s.seed = seed;
  apply_synth_overrides(s, overrides);
  std::vector<uint8_t> bytes = synth_model_bytes(s);
  if (biases) {
    std::mt19937 rng{uint32_t(seed * 7 + 1)};
    bytes = rewrite_gguf(bytes, {}, [&](GgufWriter& w) {
      for (int il = 0; il < s.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        for (auto [name, width, sd] : {std::tuple{"ffn_gate_exps.bias", s.n_ff_exp, 4.f},
                                       {"ffn_up_exps.bias", s.n_ff_exp, 4.f},
                                       {"ffn_down_exps.bias", s.n_embd, 0.5f}}) {
          const auto v = gaussian(rng, int64_t(width) * s.n_expert, sd);
          std::vector<uint8_t> data(row_bytes(bias_type, width) * s.n_expert);
          for (int e = 0; e < s.n_expert; ++e)
            quantize_row(bias_type, v.data() + int64_t(e) * width, data.data() + e * row_bytes(bias_type, width),
                         width);
          w.add_tensor(p + name, {width, s.n_expert}, bias_type, std::move(data));
        }
      }
    });
  }
  return Model::from_gguf(GgufFile::from_memory(std::move(bytes), "synth-oai:" + overrides),
                          [&](int, LayerSpec& spec) {
                            if (!spec.moe) return;
                            spec.expert_bias = biases;
                            spec.act = act;
                          });
}

}  // namespace

// The reference's logits move when the biases or the activation change (so the
// GPU comparison below cannot pass with either dropped), and its SIMD kernels
// agree with the scalar ones.
TEST(ForwardOaiExperts, BiasesAndActivationChangeLogits) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<int32_t> prompt = {5, 77, 301, 12};
  auto full = biased_moe_model("arch=qwen3moe", seed, FfnAct::OaiSwiGLU, true);
  ASSERT_TRUE(full->layers()[0].spec.expert_bias);
  ASSERT_TRUE(bool(full->layers()[1].down_exps_b));
  auto no_bias = biased_moe_model("arch=qwen3moe", seed, FfnAct::OaiSwiGLU, false);
  auto silu = biased_moe_model("arch=qwen3moe", seed, FfnAct::SiLU, true);
  CpuForward a(*full, 16), b(*no_bias, 16), c(*silu, 16), simd(*full, 16, CpuForward::Kernels::Simd, 2);
  const auto la = a.eval(prompt), lb = b.eval(prompt), lc = c.eval(prompt), ls = simd.eval(prompt);
  EXPECT_GT(max_rel_diff(lb, la), 0.05);
  EXPECT_GT(max_rel_diff(lc, la), 0.05);
  EXPECT_LT(max_rel_diff(ls, la), 1e-4);
}

struct OaiCase {
  const char* overrides;
  GgmlType bias_type;
};

class GpuForwardOaiExperts : public ::testing::TestWithParam<OaiCase> {};

// GPU logits match CpuForward for a batched prompt (expert grouping, GEMMs)
// then decoded tokens (matvecs) then a second batched chunk, experts resident, in a 3-slot cache (misses
// staged or run on the CPU) and all on the CPU. Tolerance as GpuForwardTypes.
TEST_P(GpuForwardOaiExperts, LogitsMatchCpuReference) {
  const OaiCase oc = GetParam();
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE(std::string(oc.overrides) + " seed " + std::to_string(seed));
  auto m = biased_moe_model(oc.overrides, seed, FfnAct::OaiSwiGLU, true, oc.bias_type);
  std::mt19937 rng{uint32_t(seed)};
  std::vector<int32_t> prompt(7);
  for (auto& t : prompt) t = int32_t(rng() % 512);
  const double tol = 2e-3;
  for (PlanMode mode : {PlanMode::Resident, PlanMode::ExpertCache, PlanMode::CpuMoe}) {
    EngineOptions o;
    o.n_ctx = 32;
    o.backend = "gpu";
    o.kv_type = "f32";
    o.gemm = "tiled";
    o.mode = mode;
    o.threads = 2;
    if (mode == PlanMode::ExpertCache)
      o.vram_budget = budget_for_slots(*m, o.n_ctx, std::max(3, m->config().n_expert_used + 1));
    auto gpu = make_engine(*m, o);
    SCOPED_TRACE(gpu->describe());
    CpuForward ref(*m, 32);
    auto g = gpu->eval(prompt);
    auto r = ref.eval(prompt);
    if (!routes_clear_of_ties(ref, "prompt")) continue;
    const double dp = max_rel_diff(g, r);
    EXPECT_LT(dp, tol) << "prompt";
    double dd = 0;
    bool tie = false;
    for (int i = 0; i < 4; ++i) {
      const int32_t t = argmax(r);
      g = gpu->eval({t});
      r = ref.eval({t});
      tie = !routes_clear_of_ties(ref, "token " + std::to_string(i));
      if (tie) break;
      dd = std::max(dd, max_rel_diff(g, r));
      ASSERT_LT(dd, tol) << "token " << i;
    }
    if (tie) continue;
    // A second batched chunk, now with experts in the cache's slots.
    std::vector<int32_t> more(5);
    for (auto& t : more) t = int32_t(rng() % 512);
    g = gpu->eval(more);
    r = ref.eval(more);
    if (!routes_clear_of_ties(ref, "second chunk")) continue;
    const double d2 = max_rel_diff(g, r);
    EXPECT_LT(d2, tol) << "second chunk";
    std::printf("%s %s: prompt %.2e decode %.2e chunk %.2e\n", oc.overrides, gpu->describe().c_str(), dp, dd, d2);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuForwardOaiExperts,
                         ::testing::Values(OaiCase{"arch=qwen3moe,quant=Q8_0", GgmlType::F32},
                                           OaiCase{"arch=qwen3moe,n_expert=16,n_expert_used=4", GgmlType::F32},
                                           OaiCase{"arch=qwen3moe", GgmlType::F16}),
                         [](const ::testing::TestParamInfo<OaiCase>& i) {
                           return std::string(i.index == 0 ? "Q8_0" : i.index == 1 ? "Q4_K_M_16x4" : "Q4_K_M_F16bias");
                         });
