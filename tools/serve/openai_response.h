#pragma once
// OpenAI response bodies: chat.completion / text_completion objects, their
// streamed chunks as server-sent events, usage, and error bodies.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/session/session.h"
#include "tools/serve/openai_request.h"

namespace vkmoe::serve {

// What every response object of one request repeats.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Chat;
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};
ResponseMeta make_meta(Endpoint e, const std::string& model);  // a fresh id, now

// "stop" or "length" (a cancelled reply reads "stop").
const char* openai_finish_reason(FinishReason r);
// {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}
nlohmann::json usage_json(const GenerateResult& r);
// The whole reply of a non-streaming request.
nlohmann::json completion_json(const ResponseMeta& m, const GenerateResult& r);
// A streamed chunk: text (chat: delta.content), finish_reason when `finish`
// is set; chat's first chunk carries delta.role "assistant" (`first`).
nlohmann::json chunk_json(const ResponseMeta& m, const std::string& text, const char* finish = nullptr,
                          bool first = false);
// The last chunk of stream_options.include_usage: no choices, usage.
nlohmann::json usage_chunk_json(const ResponseMeta& m, const GenerateResult& r);

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_json(const std::string& message, const char* type, const std::string& code,
                          const std::string& param = "");
nlohmann::json error_json(const ApiError& e);

// Compact JSON text; invalid UTF-8 (a model can sample any bytes) becomes U+FFFD.
std::string dump(const nlohmann::json& j);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace vkmoe::serve
