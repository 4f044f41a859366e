// Regressions for hostile model files (issue 12): each file must be refused
// with a one-line Error naming what is wrong, never crash, hang or balloon.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>

#include "engine/forward/engine_select.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/model/tokenizer.h"
#include "engine/offload/plan_model.h"
#include "tests/test_util.h"
#include "tools/synth_model.h"

namespace vkmoe {
namespace {

std::vector<uint8_t> synth_bytes(const std::string& overrides) {
  SynthSpec s;
  s.n_vocab = 512;
  apply_synth_overrides(s, overrides);
  return synth_model_bytes(s);
}

// Loads bytes as a model; returns the Error message ("" when it loads).
std::string load_error(const std::vector<uint8_t>& bytes) {
  try {
    Model::from_gguf(GgufFile::from_memory(bytes, "m.gguf"));
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
}

// n_head * head_dim wrapped in int to 256 and matched the 256-wide tensors.
TEST(HostileInput, ShapeProductsAreCheckedIn64Bits) {
  const auto base = synth_bytes("arch=llama,n_expert=0,n_layer=1,n_embd=256,n_head=1,n_head_kv=1,head_dim=256,"
                                "quant=Q8_0");
  ASSERT_EQ(load_error(base), "");
  const auto bad = test::rewrite_gguf(base, {"llama.attention.head_count", "llama.attention.head_count_kv"},
                                      [](GgufWriter& w) {
                                        w.add_u32("llama.attention.head_count", 16777217);
                                        w.add_u32("llama.attention.head_count_kv", 16777217);
                                      });
  const std::string msg = load_error(bad);
  EXPECT_NE(msg.find("'llama.attention.head_count'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST(HostileInput, FloatHyperParametersMustBePositiveAndFinite) {
  const auto base = synth_bytes("n_layer=1");
  // 1e-50 is positive as a double and 0 as a float (a fuzzer found it).
  const double kBad[] = {std::nan(""), INFINITY, -INFINITY, 0.0, -1.0, 1e300, 1e-50};
  for (const char* key : {"qwen3moe.rope.freq_base", "qwen3moe.attention.layer_norm_rms_epsilon"})
    for (double v : kBad) {
      GgufValue x;
      x.type = GgufType::FLOAT64;  // 1e300 fits a double, not the float the engine uses
      x.f = v;
      const std::string msg =
          load_error(test::rewrite_gguf(base, {key}, [&](GgufWriter& w) { w.add_value(key, x); }));
      EXPECT_NE(msg.find(std::string("'") + key + "'"), std::string::npos) << v << ": " << msg;
    }
}

// "_exps.weight" outside "blk.N." made the planner die in std::stoi. The
// plan now lists what the model uses (as the upload does), so such tensors
// are neither experts nor trunk.
TEST(HostileInput, ExpertNamedTensorsOutsideBlocksAreNotPlanned) {
  const char* kStray[] = {"output_exps.weight", "blk.x.ffn_gate_exps.weight", "blk.99999999999.ffn_up_exps.weight"};
  const auto bytes = test::rewrite_gguf(synth_bytes(""), {}, [&](GgufWriter& w) {
    for (const char* name : kStray) w.add_tensor(name, {32}, GgmlType::F32, std::vector<uint8_t>(128));
  });
  const auto m = Model::from_gguf(GgufFile::from_memory(bytes));
  const PlanInput in = plan_input_for(*m, 1024, 8ull << 30);
  EXPECT_EQ(in.experts.tensors.size(), 3u * m->config().n_layer);
  for (const char* name : kStray) {
    auto named = [&](const auto& t) { return t.name == name; };
    EXPECT_FALSE(std::any_of(in.trunk.begin(), in.trunk.end(), named)) << name;
    EXPECT_FALSE(std::any_of(in.experts.tensors.begin(), in.experts.tensors.end(), named)) << name;
  }
  EXPECT_NO_THROW(format_plan(make_plan(in)));
}

TEST(HostileInputDeathTest, FifoIsRefusedWithoutBlocking) {
  const std::string path = test::temp_path("vkmoe_fifo");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  EXPECT_EXIT(
      {
        alarm(20);  // an open() that waits for a writer ends here
        try {
          GgufFile::open(path);
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(3);
        }
        std::_Exit(0);
      },
      testing::ExitedWithCode(3), "not a regular file");
  std::filesystem::remove(path);
}

TEST(HostileInputDeathTest, FileTruncatedWhileMappedEndsWithAMessage) {
  const std::string path = test::temp_path("vkmoe_truncated", ".gguf");
  SynthSpec s;
  s.n_vocab = 512;
  write_synth_model(s, path);
  EXPECT_EXIT(
      {
        const auto f = GgufFile::open(path);
        const GgufTensor& t = f->tensors().back();
        if (truncate(path.c_str(), 0) != 0) std::_Exit(2);
        volatile uint8_t sink = t.data[t.nbytes - 1];
        (void)sink;
        std::_Exit(0);
      },
      testing::ExitedWithCode(1), "error: model file .*vkmoe_truncated.* was truncated or changed while in use");
  std::filesystem::remove(path);
}

size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// A 16 MiB uint8 array used to cost 128 MiB (int64 per element), a million
// empty tokens 32 bytes each; parsed metadata and the vocabulary now stay
// within twice their bytes in the file.
TEST(HostileInput, LargeArraysAndVocabulariesStayCompact) {
  constexpr size_t kBytes = 16 << 20, kTokens = 1 << 20;
  std::vector<uint8_t> bytes;
  {
    GgufWriter w;
    w.add_arr("big", GgufArray::of_ints(GgufType::UINT8, std::vector<int64_t>(kBytes, 7)));
    w.add_str("tokenizer.ggml.model", "gpt2");
    w.add_arr_str("tokenizer.ggml.tokens", std::vector<std::string>(kTokens));
    w.add_arr_i32("tokenizer.ggml.token_type", std::vector<int32_t>(kTokens, kTokNormal));
    w.add_arr_str("tokenizer.ggml.merges", {});
    bytes = w.to_bytes();
  }
  const size_t file_bytes = bytes.size(), vocab_bytes = kTokens * (8 + 4);
  {  // the measurement means something only if malloc's statistics see allocations
    const size_t base = heap_in_use();
    const auto probe = std::make_unique<char[]>(1 << 20);
    if (heap_in_use() < base + (1 << 20)) GTEST_SKIP() << "malloc statistics unavailable (sanitizer build?)";
  }
  size_t before = heap_in_use();
  const auto f = GgufFile::from_memory(std::move(bytes));  // the file's own bytes are moved, not copied
  const size_t parsed = heap_in_use() - before;
  EXPECT_LE(parsed, 2 * file_bytes) << "parsed metadata holds " << parsed << " bytes for a file of " << file_bytes;
  EXPECT_EQ(f->get_arr_int("big").int_at(kBytes - 1), 7);

  before = heap_in_use();
  const auto tok = Tokenizer::from_gguf(*f);
  const size_t vocab = heap_in_use() - before;
  EXPECT_LE(vocab, 2 * vocab_bytes) << "the tokenizer holds " << vocab << " bytes for " << vocab_bytes
                                    << " bytes of vocabulary";
  std::printf("HostileInput: parsed metadata %zu bytes for a %zu-byte file; tokenizer %zu bytes for %zu\n", parsed,
              file_bytes, vocab, vocab_bytes);
  EXPECT_EQ(tok->n_vocab(), int(kTokens));
  EXPECT_EQ(tok->find_token(""), 0);
}

// NaN weights ran to exit 0 with NaN logits and no text. Now eval throws,
// naming where the residual stream first went non-finite, on every backend
// and in both the batched (prompt) and the one-token (decode) passes. NaN in
// the output head leaves the residual stream finite: only the logits' own
// check (on the device for the GPU engine) sees it, with no place to name.
class NonFiniteWeights : public testing::TestWithParam<const char*> {};

TEST_P(NonFiniteWeights, StopWithThePlaceNamed) {
  const auto base = synth_bytes("n_layer=3");
  const auto orig = GgufFile::from_memory(base);
  struct Case {
    const char* tensor;
    const char* place;
  } const cases[] = {{"token_embd.weight", "the token embeddings"},
                     {"blk.1.attn_output.weight", "the attention output of layer 1"},
                     {"blk.0.ffn_down_exps.weight", "the FFN output of layer 0"},
                     {"output.weight", nullptr}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tensor);
    const GgufTensor& t = *orig->tensor(c.tensor);
    const auto bytes = test::rewrite_gguf(base, {c.tensor}, [&](GgufWriter& w) {
      w.add_tensor(c.tensor, t.ne, GgmlType::F32, std::vector<uint8_t>(t.nelements() * 4, 0xFF));  // all NaN
    });
    const auto m = Model::from_gguf(GgufFile::from_memory(bytes, "nan.gguf"));
    EngineOptions o;
    o.backend = GetParam();
    o.n_ctx = 64;
    const auto e = make_engine(*m, o);
    for (const std::vector<int32_t>& tokens : {std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{4}}) {
      e->reset();
      try {
        e->eval_view(tokens);
        ADD_FAILURE() << "no error for " << tokens.size() << " tokens";
      } catch (const Error& err) {
        const std::string msg = err.what();
        EXPECT_NE(msg.find("non-finite logits"), std::string::npos) << msg;
        if (c.place) EXPECT_NE(msg.find(std::string("first appeared in ") + c.place + ":"), std::string::npos) << msg;
        else EXPECT_EQ(msg.find("first appeared"), std::string::npos) << msg;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, NonFiniteWeights, testing::Values("ref", "cpu", "gpu"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace vkmoe
