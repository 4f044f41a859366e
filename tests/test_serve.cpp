// `vkmoe serve` below HTTP: OpenAI request checking, response and SSE
// formatting, chat prompts, the FIFO generation queue, and ServeCore over a
// small synthetic model on the CPU backend (tests/serve_e2e.py drives a real
// server process).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "engine/model/gguf.h"
#include "engine/vulkan/vk_runtime.h"
#include "tests/test_util.h"
#include "tools/serve/openai_request.h"
#include "tools/serve/openai_response.h"
#include "tools/serve/serve_core.h"

namespace vkmoe::serve {
namespace {

using nlohmann::json;

// Runs f, expecting an ApiError with this status and param; returns its message.
template <class F>
std::string api_error(F f, int status, const std::string& param, const std::string& code = "") {
  try {
    f();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, status) << e.what();
    EXPECT_EQ(e.param, param) << e.what();
    if (!code.empty()) {
      EXPECT_EQ(e.code, code) << e.what();
    }
    return e.what();
  }
  ADD_FAILURE() << "no ApiError";
  return "";
}

json chat_body(json extra = json::object()) {
  json b = {{"model", "x"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  b.update(extra);
  return b;
}

TEST(ServeRequest, ChatDefaultsAreOpenAIs) {
  const CompletionParams p = parse_chat_request(chat_body());
  EXPECT_EQ(p.endpoint, Endpoint::Chat);
  EXPECT_FALSE(p.stream);
  EXPECT_EQ(p.max_tokens, -1);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 1.f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 1.f);
  EXPECT_EQ(p.sampling.top_k, 0);
  EXPECT_EQ(p.sampling.seed, 0u);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_EQ(p.messages, json::parse(R"([{"role":"user","content":"hi"}])"));
}

TEST(ServeRequest, ChatFieldsAndLlamaCppExtras) {
  const CompletionParams p = parse_chat_request(chat_body(json::parse(R"({
      "temperature": 0, "top_p": 0.5, "top_k": 7, "min_p": 0.1, "repeat_penalty": 1.1, "seed": 42,
      "max_tokens": 100, "max_completion_tokens": 12, "stop": ["A", "", "B"], "stream": true,
      "stream_options": {"include_usage": true}, "frequency_penalty": 0, "presence_penalty": 0.0, "n": 1,
      "user": "ignored", "some_future_field": {"x": 1}, "logprobs": false, "response_format": {"type": "text"}})")));
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.f);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.5f);
  EXPECT_EQ(p.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.sampling.repeat_penalty, 1.1f);
  EXPECT_NE(p.sampling.seed, 0u);
  EXPECT_EQ(p.max_tokens, 12);  // max_completion_tokens wins
  EXPECT_EQ(p.stop, (std::vector<std::string>{"A", "B"}));
  EXPECT_TRUE(p.stream);
  EXPECT_TRUE(p.include_usage);
  // A given seed is reproducible; seed 0 is a seed too, not "random".
  EXPECT_EQ(parse_chat_request(chat_body({{"seed", 42}})).sampling.seed, p.sampling.seed);
  EXPECT_NE(parse_chat_request(chat_body({{"seed", 0}})).sampling.seed, 0u);
  EXPECT_EQ(parse_chat_request(chat_body({{"stop", "END"}})).stop, std::vector<std::string>{"END"});
  EXPECT_EQ(parse_chat_request(chat_body({{"max_tokens", 5.0}})).max_tokens, 5);  // an integral float
  // null is absent.
  EXPECT_FLOAT_EQ(parse_chat_request(chat_body({{"temperature", nullptr}})).sampling.temperature, 1.f);
}

TEST(ServeRequest, WrongTypesAndValuesName400TheField) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"temperature", "hot"}, {"temperature", 3}, {"temperature", -1}, {"top_p", true}, {"top_k", 1.5},
           {"top_k", -1}, {"max_tokens", "10"}, {"max_tokens", -2}, {"max_completion_tokens", json::array()},
           {"stream", "yes"}, {"stream_options", 1}, {"stop", 5}, {"stop", json::array({1})}, {"seed", "x"},
           {"seed", 0.5}, {"min_p", 2}, {"repeat_penalty", 0}, {"model", 3}, {"logit_bias", "x"}}) {
    const std::string msg = api_error([&] { parse_chat_request(chat_body({{field, value}})); }, 400, field);
    EXPECT_NE(msg.find("'" + field + "'"), std::string::npos) << msg;
  }
  api_error([&] { parse_chat_request(json::object()); }, 400, "messages", "missing_field");
  api_error([&] { parse_chat_request({{"messages", "hi"}}); }, 400, "messages", "invalid_type");
  api_error([&] { parse_chat_request({{"messages", json::array()}}); }, 400, "messages", "invalid_value");
  api_error([&] { parse_chat_request({{"messages", {{{"content", "x"}}}}}); }, 400, "messages[0].role");
  api_error([&] { parse_chat_request({{"messages", {{{"role", 1}, {"content", "x"}}}}}); }, 400, "messages[0].role");
  api_error([&] { parse_chat_request({{"messages", {{{"role", "user"}}}}}); }, 400, "messages[0].content");
  api_error([&] { parse_chat_request({{"messages", {{{"role", "user"}, {"content", 5}}}}}); }, 400,
            "messages[0].content");
  api_error([&] { parse_chat_request({{"messages", {"hi"}}}); }, 400, "messages[0]");
  api_error([&] { parse_chat_request(chat_body({{"stop", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i",
                                                                       "j", "k", "l", "m", "n", "o", "p", "q"})}})); },
            400, "stop");
}

TEST(ServeRequest, UnsupportedParametersAreRejectedNotIgnored) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"n", 2}, {"frequency_penalty", 0.5}, {"presence_penalty", -1}, {"logprobs", true},
           {"logit_bias", {{"5", 1}}}, {"response_format", {{"type", "json_object"}}}, {"best_of", 3}})
    api_error([&] { parse_chat_request(chat_body({{field, value}})); }, 400, field, "unsupported_parameter");
  api_error([&] { parse_completion_request({{"prompt", "x"}, {"echo", true}}); }, 400, "echo");
  api_error([&] { parse_completion_request({{"prompt", "x"}, {"suffix", "y"}}); }, 400, "suffix");
  api_error([&] { parse_completion_request({{"prompt", "x"}, {"logprobs", 2}}); }, 400, "logprobs");
}

TEST(ServeRequest, MessagesContentPartsRolesAndExtraKeys) {
  const json m = check_messages(json::parse(R"([
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "tool_calls": [{"id": "1"}]},
      {"role": "tool", "content": "42", "tool_call_id": "1"}])"));
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["content"], "ab");
  EXPECT_EQ(m[2]["content"], "");  // absent or null: templates concatenate it
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "1");
  EXPECT_EQ(m[3]["tool_call_id"], "1");
  api_error([] { check_messages(json::parse(R"([{"role":"user","content":[{"type":"image_url"}]}])")); }, 400,
            "messages[0].content[0].type", "unsupported_parameter");
  api_error([] { check_messages(json::parse(R"([{"role":"user","content":[{"type":"text"}]}])")); }, 400,
            "messages[0].content[0].text");
}

TEST(ServeRequest, CompletionPrompts) {
  CompletionParams p = parse_completion_request({{"prompt", "Once"}});
  EXPECT_EQ(p.endpoint, Endpoint::Completion);
  EXPECT_EQ(p.prompt, "Once");
  EXPECT_EQ(p.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_EQ(parse_completion_request({{"prompt", {"one"}}}).prompt, "one");
  p = parse_completion_request({{"prompt", {1, 2, 3}}}, 10);
  EXPECT_TRUE(p.prompt_is_tokens);
  EXPECT_EQ(p.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request({{"prompt", {{4, 5}}}}, 10).prompt_tokens, (std::vector<int32_t>{4, 5}));
  api_error([] { parse_completion_request({{"prompt", {1, 10}}}, 10); }, 400, "prompt", "invalid_value");
  api_error([] { parse_completion_request({{"prompt", {-1}}}, 10); }, 400, "prompt");
  api_error([] { parse_completion_request({{"prompt", {"a", "b"}}}); }, 400, "prompt", "unsupported_parameter");
  api_error([] { parse_completion_request({{"prompt", 7}}); }, 400, "prompt", "invalid_type");
  api_error([] { parse_completion_request(json::object()); }, 400, "prompt", "missing_field");
}

TEST(ServeRequest, BodyMustBeAJsonObject) {
  EXPECT_EQ(parse_json_body(R"({"a": 1})")["a"], 1);
  for (const char* bad : {"", "{", "{\"a\": }", "[1, 2]", "\"text\"", "nul", "{\"a\": 1} x"})
    api_error([&] { parse_json_body(bad); }, 400, "", "invalid_json");
}

TEST(ServeResponse, ObjectsChunksUsageAndErrors) {
  ResponseMeta chat = make_meta(Endpoint::Chat, "m"), text = make_meta(Endpoint::Completion, "m");
  EXPECT_EQ(chat.id.rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(text.id.rfind("cmpl-", 0), 0u);
  EXPECT_NE(make_meta(Endpoint::Chat, "m").id, chat.id);
  GenerateResult r;
  r.text = "hello";
  r.finish = FinishReason::Length;
  r.prompt_tokens = 10;
  r.cached_tokens = 4;
  r.completion_tokens = 3;
  const json c = completion_json(chat, r);
  EXPECT_EQ(c["object"], "chat.completion");
  EXPECT_EQ(c["model"], "m");
  EXPECT_EQ(c["choices"][0]["message"], json({{"role", "assistant"}, {"content", "hello"}}));
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(c["usage"], json::parse(R"({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                                         "prompt_tokens_details": {"cached_tokens": 4}})"));
  const json t = completion_json(text, r);
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_EQ(t["choices"][0]["text"], "hello");

  EXPECT_EQ(chunk_json(chat, "", nullptr, true)["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  const json piece = chunk_json(chat, "lo");
  EXPECT_EQ(piece["object"], "chat.completion.chunk");
  EXPECT_EQ(piece["choices"][0]["delta"], json({{"content", "lo"}}));
  EXPECT_TRUE(piece["choices"][0]["finish_reason"].is_null());
  const json last = chunk_json(chat, "", "stop");
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunk_json(text, "lo")["choices"][0]["text"], "lo");
  EXPECT_EQ(chunk_json(text, "lo")["object"], "text_completion");
  const json u = usage_chunk_json(chat, r);
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 4);

  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_STREQ(kSseDone, "data: [DONE]\n\n");
  EXPECT_EQ(dump(json("a\xff" "b")), "\"a\xef\xbf\xbd" "b\"");  // sampled bytes need not be UTF-8
  EXPECT_EQ(openai_finish_reason(FinishReason::Cancelled), std::string("stop"));

  const json e = error_json(ApiError(400, "'top_k' must be an integer", "invalid_type", "top_k"));
  EXPECT_EQ(e, json::parse(R"({"error": {"message": "'top_k' must be an integer", "type": "invalid_request_error",
                                          "param": "top_k", "code": "invalid_type"}})"));
  EXPECT_EQ(error_json(ApiError(503, "busy", "server_busy"))["error"]["type"], "server_error");
  EXPECT_TRUE(error_json(ApiError(503, "busy", "server_busy"))["error"]["param"].is_null());
}

TEST(ServeQueue, TurnsAreFifoAndExclusive) {
  GenerationQueue q(16);
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> inside{0};
  std::vector<std::thread> threads;
  {
    auto first = q.acquire();  // hold the engine while the others line up
    for (int i = 0; i < 6; ++i) {
      threads.emplace_back([&, i] {
        auto turn = q.acquire();
        EXPECT_EQ(inside.fetch_add(1), 0);
        {
          std::lock_guard<std::mutex> lock(mu);
          order.push_back(i);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        inside.fetch_sub(1);
      });
      while (q.waiting() != i + 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(q.busy());
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(q.busy());
  EXPECT_EQ(q.waiting(), 0);
}

TEST(ServeQueue, FullQueueShutdownAndGoneClients) {
  GenerationQueue q(1);
  auto held = q.acquire();
  std::thread waiter([&] { api_error([&] { q.acquire(); }, 503, "", "shutting_down"); });
  while (q.waiting() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  api_error([&] { q.acquire(); }, 503, "", "server_busy");
  q.shutdown();
  waiter.join();
  api_error([&] { q.acquire(); }, 503, "", "shutting_down");

  GenerationQueue q2(4);
  auto h2 = q2.acquire();
  std::atomic<bool> wanted{true};
  std::thread gone([&] { api_error([&] { q2.acquire([&] { return wanted.load(); }); }, 499, ""); });
  while (q2.waiting() != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  wanted = false;
  gone.join();
  EXPECT_EQ(q2.waiting(), 0);
}

// A small model on the CPU backend behind a ServeCore.
struct CoreFixture {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ServeCore> core;
  // chat_template: nullptr keeps the synthetic model's, "" removes it.
  explicit CoreFixture(int n_ctx, const char* chat_template = nullptr, const char* backend = "cpu") {
    SynthSpec s;
    s.n_vocab = 512;
    std::vector<uint8_t> bytes = synth_model_bytes(s);
    if (chat_template)
      bytes = test::rewrite_gguf(bytes, {"tokenizer.chat_template"}, [&](GgufWriter& w) {
        if (*chat_template) w.add_str("tokenizer.chat_template", chat_template);
      });
    model = Model::from_gguf(GgufFile::from_memory(bytes, "synth"));
    tok = Tokenizer::from_gguf(model->gguf());
    EngineOptions o;
    o.backend = backend;
    o.n_ctx = n_ctx;
    engine = make_engine(*model, o);
    core = std::make_unique<ServeCore>(*engine, *tok, model->gguf(), "synth", 8);
  }
  GenerateResult run(const CompletionParams& p) {
    auto turn = core->wait_turn();
    return core->generate(turn, core->make_request(p));
  }
};

CompletionParams greedy_chat(const json& messages, int max_tokens) {
  return parse_chat_request({{"messages", messages}, {"temperature", 0}, {"max_tokens", max_tokens}});
}

TEST(ServeCore, ChatMlFallbackAndModelTemplate) {
  CoreFixture chatml(128, "");  // no template: ChatML
  EXPECT_STREQ(chatml.core->chat().name(), "chatml");
  const json msgs = json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"U"}])");
  EXPECT_EQ(chatml.core->chat().render(msgs, true),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  const GenerateRequest g = chatml.core->make_request(greedy_chat(msgs, 4));
  EXPECT_EQ(g.prompt, chatml.tok->encode(chatml.core->chat().render(msgs, true), false));
  EXPECT_EQ(g.prompt[0], chatml.tok->find_token("<|im_start|>"));  // special tokens, not their letters

  CoreFixture own(128, "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
                       "{% if add_generation_prompt %}[assistant]{% endif %}"
                       "{% if messages[0].role != 'user' %}{{ raise_exception('user first') }}{% endif %}");
  EXPECT_STREQ(own.core->chat().name(), "model");
  EXPECT_EQ(own.core->chat().render(json::parse(R"([{"role":"user","content":"U"}])"), true),
            "<|endoftext|>[user]U[assistant]");
  const std::string msg = api_error([&] { own.core->chat().render(msgs, true); }, 400, "messages", "template_error");
  EXPECT_NE(msg.find("user first"), std::string::npos) << msg;
}

TEST(ServeCore, ContextLimitsAndMaxTokens) {
  CoreFixture f(64);
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += " word";
  const std::string msg = api_error([&] { f.core->make_request(parse_completion_request({{"prompt", long_text}})); },
                                    400, "prompt", "context_length_exceeded");
  EXPECT_NE(msg.find("64"), std::string::npos) << msg;
  api_error([&] { f.core->make_request(parse_completion_request({{"prompt", ""}})); }, 400, "prompt");
  const json few = {{"prompt", "Once upon"}, {"max_tokens", 1000}};
  const GenerateRequest g = f.core->make_request(parse_completion_request(few));
  EXPECT_EQ(g.max_tokens, 64 - int(g.prompt.size()));  // capped by the context
  EXPECT_NE(g.cancel, nullptr);  // shutdown() cancels it
  const GenerateRequest chat = f.core->make_request(parse_chat_request(chat_body()));
  EXPECT_EQ(chat.max_tokens, 64 - int(chat.prompt.size()));  // no max_tokens: what the context leaves
}

TEST(ServeCore, ContinuingConversationReportsCachedTokensAndShutdownCancels) {
  CoreFixture f(256);
  json msgs = json::parse(R"([{"role":"user","content":"Once upon a time"}])");
  const GenerateResult r1 = f.run(greedy_chat(msgs, 8));
  EXPECT_EQ(r1.cached_tokens, 0);
  EXPECT_GT(r1.completion_tokens, 0);
  // The same request again: all but the re-evaluated last prompt token.
  const GenerateResult again = f.run(greedy_chat(msgs, 8));
  EXPECT_EQ(again.cached_tokens, again.prompt_tokens - 1);
  EXPECT_EQ(again.text, r1.text);
  msgs.push_back({{"role", "assistant"}, {"content", r1.text}});
  msgs.push_back({{"role", "user"}, {"content", "and then?"}});
  const GenerateResult r2 = f.run(greedy_chat(msgs, 8));
  EXPECT_GE(r2.cached_tokens, r1.prompt_tokens - 1);  // a token may merge across the turn boundary

  f.core->shutdown();
  EXPECT_TRUE(f.core->stopping());
  api_error([&] { f.core->wait_turn(); }, 503, "", "shutting_down");
}

// A lost device (injected on whatever Vulkan device there is) fails the
// running request with 500 "device_lost", records why the server must stop,
// and turns every waiting or later request away.
TEST(ServeCore, LostDeviceFailsTheRequestAndStopsTheServer) {
  CoreFixture f(128, nullptr, "gpu");
  const json msgs = json::parse(R"([{"role":"user","content":"Once upon a time"}])");
  EXPECT_GT(f.run(greedy_chat(msgs, 4)).completion_tokens, 0);
  EXPECT_EQ(f.core->fatal_error(), "");
  vk::set_device_lost_fault("after:1");
  const std::string msg = api_error([&] { f.run(greedy_chat(msgs, 4)); }, 500, "", "device_lost");
  vk::set_device_lost_fault("off");
  EXPECT_NE(msg.find("Vulkan device lost"), std::string::npos) << msg;
  EXPECT_NE(f.core->fatal_error().find("Vulkan device lost"), std::string::npos);
  EXPECT_TRUE(f.core->stopping());
  api_error([&] { f.core->wait_turn(); }, 503, "", "shutting_down");
}

}  // namespace
}  // namespace vkmoe::serve
