// vkmoe against llama.cpp on the new tensor types: for each case of
// tests/golden/cases.txt the synthetic model is rebuilt in memory with the
// same `synth --set` spec (deterministic for a fixed seed) and evaluated by the
// scalar reference and the SIMD CPU backend; the logits of every position are
// compared to llama.cpp's CPU logits (tests/golden/NAME.f32, written by
// scripts/make_golden.sh). llama.cpp multiplies quantized weights by 8-bit
// quantized activations and keeps an F16 KV cache, vkmoe by f32 activations,
// so the logits differ by ~1% (measured below); a wrong dequantizer gives
// differences of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/forward/cpu_forward.h"
#include "engine/forward/engine_select.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "tools/synth_model.h"

namespace vkmoe {
namespace {

namespace fs = std::filesystem;

struct GoldenCase {
  std::string name, spec;
};

fs::path golden_dir() { return fs::path(__FILE__).parent_path() / "golden"; }

// Cases and tokens from cases.txt.
std::vector<GoldenCase> read_cases(std::vector<int32_t>& tokens) {
  std::ifstream in(golden_dir() / "cases.txt");
  if (!in) throw Error("cannot read " + (golden_dir() / "cases.txt").string());
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    GoldenCase c;
    ls >> c.name >> c.spec;
    if (c.name == "tokens") {
      std::istringstream ts(c.spec);
      std::string tok;
      while (std::getline(ts, tok, ',')) tokens.push_back(std::stoi(tok));
    } else {
      cases.push_back(c);
    }
  }
  return cases;
}

std::vector<float> read_f32(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("cannot read " + p.string());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

struct Agreement {
  double rel_l2 = 0;   // ||a - b|| / ||b|| over all positions
  double max_abs = 0;  // max |a - b| / max |b|
  int top1_same = 0;
};

Agreement compare(const std::vector<float>& got, const std::vector<float>& gold, int n_tok, int n_vocab) {
  Agreement a;
  double num = 0, den = 0, gmax = 0, dmax = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    num += double(got[i] - gold[i]) * (got[i] - gold[i]);
    den += double(gold[i]) * gold[i];
    gmax = std::max(gmax, double(std::fabs(gold[i])));
    dmax = std::max(dmax, double(std::fabs(got[i] - gold[i])));
  }
  a.rel_l2 = std::sqrt(num / den);
  a.max_abs = dmax / gmax;
  for (int t = 0; t < n_tok; ++t) {
    const float* g = gold.data() + size_t(t) * n_vocab;
    const float* o = got.data() + size_t(t) * n_vocab;
    a.top1_same += std::max_element(g, g + n_vocab) - g == std::max_element(o, o + n_vocab) - o;
  }
  return a;
}

// Logits of every position, one token at a time through the KV cache.
std::vector<float> all_logits(const Model& m, const std::vector<int32_t>& tokens, CpuForward::Kernels k) {
  CpuForward f(m, 64, k, 2);
  std::vector<float> out;
  for (int32_t t : tokens) {
    const auto l = f.decode(t);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// A golden case's synthetic model, rebuilt with synth's code, and llama.cpp's
// logits for it (n_tokens x n_vocab).
struct LoadedCase {
  std::unique_ptr<Model> model;
  std::vector<float> gold;
  int n_vocab = 0;
};

LoadedCase load_case(const GoldenCase& c) {
  LoadedCase l;
  SynthSpec s;
  apply_synth_overrides(s, c.spec);
  l.model = Model::from_gguf(GgufFile::from_memory(synth_model_bytes(s), "synth:" + c.spec));
  l.n_vocab = l.model->config().n_vocab;
  l.gold = read_f32(golden_dir() / (c.name + ".f32"));
  return l;
}

// The bounds every backend must meet against llama.cpp: quantized weights
// (llama.cpp also quantizes the activations), or F32 weights, where only its
// f16 KV cache differs (measured rel L2 3e-4 .. 5e-4 on the glm4moe cases).
void expect_agreement(const Agreement& a, int n_tok, const GoldenCase& c) {
  const bool f32 = c.spec.find("quant=F32") != std::string::npos;
  EXPECT_LT(a.rel_l2, f32 ? 2e-3 : 2.5e-2);
  EXPECT_LT(a.max_abs, f32 ? 3e-3 : 3e-2);
  EXPECT_GE(a.top1_same, f32 ? n_tok : n_tok - 1);
}

}  // namespace

// Measured (ref and cpu backends alike): rel L2 0.0105 (Q4_0) .. 0.0162 (Q2_K
// mix, Q4_K, Q6_K), max-abs / max|logit| 0.0098 .. 0.019, top-1 8/8 except
// IQ4_NL 7/8 (a near tie). Broken dequantizers seen: MXFP4 with the full
// (not halved) E8M0 scale 0.131, Q3_K scale bits misplaced 1.35.
TEST(GoldenLogits, MatchLlamaCppOnEveryType) {
  std::vector<int32_t> tokens;
  const auto cases = read_cases(tokens);
  ASSERT_GE(cases.size(), 10u);
  ASSERT_EQ(tokens.size(), 8u);
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.spec);
    const LoadedCase l = load_case(c);
    ASSERT_EQ(l.gold.size(), tokens.size() * l.n_vocab);
    for (auto k : {CpuForward::Kernels::Scalar, CpuForward::Kernels::Simd}) {
      const auto got = all_logits(*l.model, tokens, k);
      const Agreement a = compare(got, l.gold, static_cast<int>(tokens.size()), l.n_vocab);
      std::printf("%-11s %s rel_l2 %.5f max_abs %.5f top1 %d/%zu\n", c.name.c_str(),
                  k == CpuForward::Kernels::Scalar ? "ref" : "cpu", a.rel_l2, a.max_abs, a.top1_same, tokens.size());
      expect_agreement(a, static_cast<int>(tokens.size()), c);
    }
  }
}

// The GPU backend (default options, f32 KV) on the same cases and bounds:
// every position decoded one token at a time (matvecs), and the whole prompt
// as one batch (GEMMs; its last position, which is all eval returns).
TEST(GoldenLogits, GpuMatchesLlamaCpp) {
  std::vector<int32_t> tokens;
  const auto cases = read_cases(tokens);
  ASSERT_GE(cases.size(), 10u);
  const int n_tok = static_cast<int>(tokens.size());
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.spec);
    const LoadedCase l = load_case(c);
    ASSERT_EQ(l.gold.size(), tokens.size() * l.n_vocab);
    const int n_vocab = l.n_vocab;
    const std::vector<float>& gold = l.gold;
    EngineOptions o;
    o.backend = "gpu";
    o.n_ctx = 64;
    o.kv_type = "f32";
    auto gpu = make_engine(*l.model, o);
    std::vector<float> got;
    for (int32_t t : tokens) {
      const auto l = gpu->eval({t});
      got.insert(got.end(), l.begin(), l.end());
    }
    const Agreement a = compare(got, gold, n_tok, n_vocab);
    gpu->reset();
    const auto last = gpu->eval(tokens);
    const std::vector<float> gold_last(gold.end() - n_vocab, gold.end());
    const Agreement b = compare(last, gold_last, 1, n_vocab);
    std::printf("%-11s gpu rel_l2 %.5f max_abs %.5f top1 %d/%d; batched last rel_l2 %.5f max_abs %.5f\n",
                c.name.c_str(), a.rel_l2, a.max_abs, a.top1_same, n_tok, b.rel_l2, b.max_abs);
    expect_agreement(a, n_tok, c);
    expect_agreement(b, 1, c);
  }
}

}  // namespace vkmoe
