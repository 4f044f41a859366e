#include "tools/serve/openai_response.h"

#include <chrono>
#include <mutex>
#include <random>

namespace vkmoe::serve {
namespace {

using nlohmann::json;

// 24 random letters and digits.
std::string fresh_id() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}() * 0x100000001ull ^ std::random_device{}()};
  static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::lock_guard<std::mutex> lock(mu);
  std::string s;
  for (int i = 0; i < 24; ++i) s += digits[rng() % 62];
  return s;
}

json base_object(const ResponseMeta& m, bool chunk) {
  const bool chat = m.endpoint == Endpoint::Chat;
  return {{"id", m.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "vkmoe"}};
}

}  // namespace

ResponseMeta make_meta(Endpoint e, const std::string& model) {
  ResponseMeta m;
  m.endpoint = e;
  m.id = (e == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + fresh_id();
  m.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = model;
  return m;
}

const char* openai_finish_reason(FinishReason r) { return r == FinishReason::Length ? "length" : "stop"; }

json usage_json(const GenerateResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", r.cached_tokens}}}};
}

json completion_json(const ResponseMeta& m, const GenerateResult& r) {
  json o = base_object(m, false);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish_reason(r.finish)}};
  if (m.endpoint == Endpoint::Chat) choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else choice["text"] = r.text;
  o["choices"] = json::array({choice});
  o["usage"] = usage_json(r);
  return o;
}

json chunk_json(const ResponseMeta& m, const std::string& text, const char* finish, bool first) {
  json o = base_object(m, true);
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish ? json(finish) : json(nullptr)}};
  if (m.endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!finish) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  o["choices"] = json::array({choice});
  return o;
}

json usage_chunk_json(const ResponseMeta& m, const GenerateResult& r) {
  json o = base_object(m, true);
  o["choices"] = json::array();
  o["usage"] = usage_json(r);
  return o;
}

json error_json(const std::string& message, const char* type, const std::string& code, const std::string& param) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json error_json(const ApiError& e) { return error_json(e.what(), e.type(), e.code, e.param); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace vkmoe::serve
