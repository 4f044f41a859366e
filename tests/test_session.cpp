// Session: KV prefix reuse gives the same replies as a fresh context, stop
// strings, limits, cancellation and streaming pieces (CPU backend).
#include <gtest/gtest.h>

#include <memory>

#include "engine/forward/engine_select.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "tools/synth_model.h"

namespace vkmoe {
namespace {

struct Fixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Session> session;
  explicit Fixture(int n_ctx = 256, const std::string& backend = "cpu") {
    SynthSpec s;
    s.n_vocab = 512;
    model = Model::from_gguf(GgufFile::from_memory(synth_model_bytes(s), "synth"));
    tok = Tokenizer::from_gguf(model->gguf());
    EngineOptions o;
    o.backend = backend;
    o.n_ctx = n_ctx;
    engine = make_engine(*model, o);
    session = std::make_unique<Session>(*engine, *tok);
  }
  GenerateResult run(const std::vector<int32_t>& prompt, int max_tokens, std::vector<std::string> stop = {},
                     std::string* streamed = nullptr) {
    GenerateRequest r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    r.stop = std::move(stop);
    return session->generate(r, [&](std::string_view piece) {
      EXPECT_FALSE(piece.empty());
      if (streamed) *streamed += piece;
      return true;
    });
  }
};

class SessionBackend : public testing::TestWithParam<const char*> {};

TEST_P(SessionBackend, ContinuingAConversationReusesTheCacheAndMatchesAFreshContext) {
  Fixture a(256, GetParam()), fresh(256, GetParam());
  const std::vector<int32_t> turn1 = a.tok->encode("Once upon a time", false);
  const GenerateResult r1 = a.run(turn1, 12);
  EXPECT_EQ(r1.cached_tokens, 0);
  EXPECT_EQ(r1.completion_tokens, 12);
  EXPECT_EQ(r1.finish, FinishReason::Length);
  // The next request holds the first prompt, the reply and new text.
  std::vector<int32_t> turn2 = a.session->context();
  for (int32_t id : a.tok->encode(" and then", false)) turn2.push_back(id);
  const GenerateResult r2 = a.run(turn2, 10);
  EXPECT_GE(r2.cached_tokens, int(turn1.size()) + 11);  // all but the re-evaluated last token
  const GenerateResult f2 = fresh.run(turn2, 10);
  EXPECT_EQ(f2.cached_tokens, 0);
  EXPECT_EQ(r2.text, f2.text);
  // A different history shares only its first tokens.
  std::vector<int32_t> other = turn1;
  other.back() = (other.back() + 1) % 512;
  const GenerateResult r3 = a.run(other, 4);
  EXPECT_EQ(r3.cached_tokens, int(turn1.size()) - 1);
  EXPECT_EQ(r3.text, fresh.run(other, 4).text);
}

INSTANTIATE_TEST_SUITE_P(Backends, SessionBackend, testing::Values("cpu", "gpu"),
                         [](const auto& info) { return std::string(info.param); });

TEST(Session, StopStringsEndTheReplyAndAreNotStreamed) {
  Fixture f;
  const auto prompt = f.tok->encode("The weather today", false);
  const GenerateResult full = f.run(prompt, 24);
  ASSERT_GE(full.text.size(), 8u) << full.text;
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  std::string streamed;
  const GenerateResult r = f.run(prompt, 24, {"never appears", stop}, &streamed);
  EXPECT_EQ(r.finish, FinishReason::Stop);
  EXPECT_EQ(r.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(streamed, r.text);
}

TEST(Session, CancelAndLimits) {
  Fixture f(64);
  const auto prompt = f.tok->encode("Hello", false);
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = 50;
  int pieces = 0;
  const GenerateResult c = f.session->generate(r, [&](std::string_view) { return ++pieces < 3; });
  EXPECT_EQ(c.finish, FinishReason::Cancelled);
  EXPECT_EQ(pieces, 3);
  std::atomic<bool> cancel{true};
  r.cancel = &cancel;
  EXPECT_EQ(f.session->generate(r).completion_tokens, 0);
  // The context fills up: the reply ends with "length" before overflowing.
  r.cancel = nullptr;
  r.max_tokens = -1;
  const GenerateResult full = f.session->generate(r);
  if (full.finish == FinishReason::Length) {
    EXPECT_EQ(f.engine->n_past(), 63);
  }
  r.prompt.assign(64, prompt[0]);
  EXPECT_THROW(f.session->generate(r), Error);
}

TEST(Session, StreamablePrefixKeepsUtf8AndStopPrefixesBack) {
  EXPECT_EQ(streamable_prefix("abc", {}), 3u);
  EXPECT_EQ(streamable_prefix("ab\xC3", {}), 2u);          // first byte of a 2-byte character
  EXPECT_EQ(streamable_prefix("ab\xC3\xA9", {}), 4u);      // complete
  EXPECT_EQ(streamable_prefix("a\xF0\x9F\x98", {}), 1u);   // 3 of 4 bytes
  EXPECT_EQ(streamable_prefix("hello <|e", {"<|end|>"}), 6u);
  EXPECT_EQ(streamable_prefix("hello <", {"<|end|>", "xyz"}), 6u);
  EXPECT_EQ(streamable_prefix("hello", {"<|end|>"}), 5u);
}

}  // namespace
}  // namespace vkmoe
