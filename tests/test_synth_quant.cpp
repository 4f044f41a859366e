// vkmoe synth quantization presets: the uniform types and llama.cpp-style
// mixes put the expected ggml type on each tensor, and the files load.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "tools/synth_model.h"

namespace vkmoe {
namespace {

GgmlType type_of(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.tensor(name);
  if (!t) throw Error("no tensor " + name);
  return t->type;
}

std::unique_ptr<GgufFile> synth_file(const std::string& spec) {
  SynthSpec s;
  s.n_layer = 8;  // use_more_bits layers: 0, 3, 6, 7
  s.n_vocab = 512;
  apply_synth_overrides(s, spec);
  auto bytes = synth_model_bytes(s);
  Model::from_gguf(GgufFile::from_memory(bytes, spec));  // loads
  return GgufFile::from_memory(std::move(bytes), spec);
}

}  // namespace

TEST(SynthQuant, UniformTypes) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL,
                     GgmlType::Q3_K}) {
    const auto f = synth_file(std::string("quant=") + type_name(t));
    SCOPED_TRACE(type_name(t));
    for (const char* name : {"token_embd.weight", "output.weight", "blk.0.attn_v.weight", "blk.1.attn_q.weight",
                             "blk.3.ffn_down_exps.weight", "blk.2.ffn_up_exps.weight"})
      EXPECT_EQ(type_of(*f, name), t) << name;
    EXPECT_EQ(type_of(*f, "blk.0.ffn_gate_inp.weight"), GgmlType::F32);
    EXPECT_EQ(type_of(*f, "blk.0.attn_norm.weight"), GgmlType::F32);
  }
}

TEST(SynthQuant, LlamaCppMixes) {
  {
    const auto f = synth_file("quant=Q2_K");
    EXPECT_EQ(type_of(*f, "blk.1.ffn_up_exps.weight"), GgmlType::Q2_K);
    EXPECT_EQ(type_of(*f, "blk.1.attn_q.weight"), GgmlType::Q2_K);
    EXPECT_EQ(type_of(*f, "blk.1.attn_v.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type_of(*f, "blk.1.ffn_down_exps.weight"), GgmlType::Q3_K);
    EXPECT_EQ(type_of(*f, "blk.0.ffn_down_exps.weight"), GgmlType::Q4_K);  // more bits in layer 0
    EXPECT_EQ(type_of(*f, "output.weight"), GgmlType::Q6_K);
  }
  {
    const auto f = synth_file("quant=Q3_K_M");
    EXPECT_EQ(type_of(*f, "blk.1.ffn_gate_exps.weight"), GgmlType::Q3_K);
    EXPECT_EQ(type_of(*f, "blk.1.attn_v.weight"), GgmlType::Q4_K);
    EXPECT_EQ(type_of(*f, "blk.3.attn_v.weight"), GgmlType::Q5_K);
    EXPECT_EQ(type_of(*f, "output.weight"), GgmlType::Q6_K);
  }
  {
    const auto f = synth_file("quant=IQ4_XS");
    EXPECT_EQ(type_of(*f, "blk.4.ffn_down_exps.weight"), GgmlType::IQ4_XS);
    EXPECT_EQ(type_of(*f, "token_embd.weight"), GgmlType::IQ4_XS);
    EXPECT_EQ(type_of(*f, "output.weight"), GgmlType::Q6_K);
  }
  for (const char* q : {"quant=MXFP4", "quant=MXFP4_MOE"}) {
    const auto f = synth_file(q);
    for (const char* e : {"blk.0.ffn_gate_exps.weight", "blk.3.ffn_up_exps.weight", "blk.7.ffn_down_exps.weight"})
      EXPECT_EQ(type_of(*f, e), GgmlType::MXFP4) << q << " " << e;
    EXPECT_EQ(type_of(*f, "blk.0.attn_q.weight"), GgmlType::Q8_0);
    EXPECT_EQ(type_of(*f, "blk.0.attn_v.weight"), GgmlType::Q8_0);
    EXPECT_EQ(type_of(*f, "output.weight"), GgmlType::Q8_0);
    EXPECT_EQ(type_of(*f, "token_embd.weight"), GgmlType::Q8_0);
  }
}

// Rows that are not whole 256-element super-blocks fall back to IQ4_NL (the
// low-bit K types), Q8_0 (others), F16 (not whole 32-element blocks).
TEST(SynthQuant, FallbacksAndErrors) {
  const auto f = synth_file("quant=Q2_K,n_ff_exp=96");
  EXPECT_EQ(type_of(*f, "blk.1.ffn_down_exps.weight"), GgmlType::IQ4_NL);  // rows of 96
  EXPECT_EQ(type_of(*f, "blk.1.ffn_up_exps.weight"), GgmlType::Q2_K);      // rows of 256
  const auto g = synth_file("quant=Q4_K,n_ff_exp=96");
  EXPECT_EQ(type_of(*g, "blk.1.ffn_down_exps.weight"), GgmlType::Q8_0);
  SynthSpec s;
  try {
    apply_synth_overrides(s, "quant=Q7_K");
    synth_model_bytes(s);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown quantization 'Q7_K'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MXFP4"), std::string::npos) << e.what();
  }
}

}  // namespace vkmoe
