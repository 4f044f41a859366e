#pragma once
// OpenAI request bodies -> checked parameters. Unknown fields are ignored (as
// OpenAI does); a known field of the wrong type or out of range is an ApiError
// 400 naming it; null counts as absent. Parameters vkmoe cannot honour
// (n > 1, logprobs, logit_bias, non-zero frequency/presence penalties, JSON
// response formats, echo, suffix) are rejected rather than silently ignored.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sample/sampler.h"
#include "tools/serve/api_error.h"

namespace vkmoe::serve {

enum class Endpoint { Chat, Completion };

struct CompletionParams {
  Endpoint endpoint = Endpoint::Chat;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  nlohmann::json messages;             // Chat: checked messages (content always a string)
  nlohmann::json tools;                // Chat: null or the array given
  std::string prompt;                  // Completion: text prompt
  std::vector<int32_t> prompt_tokens;  // Completion: a prompt given as token ids
  bool prompt_is_tokens = false;
  int max_tokens = -1;                 // < 0: until end of generation or a full context
  SamplerParams sampling;
  std::vector<std::string> stop;
};

// The body as a JSON object; ApiError 400 "invalid_json" otherwise.
nlohmann::json parse_json_body(const std::string& body);

// POST /v1/chat/completions and /v1/completions bodies.
CompletionParams parse_chat_request(const nlohmann::json& body);
// Token-id prompts must lie in [0, n_vocab).
CompletionParams parse_completion_request(const nlohmann::json& body, int n_vocab = 1 << 30);

// messages of a chat request: a non-empty array of {role, content, ...};
// content given as an array of text parts becomes their concatenation, null
// or absent (an assistant's tool calls) "", and role "developer" becomes
// "system". `field` names the field in errors.
nlohmann::json check_messages(const nlohmann::json& messages, const std::string& field = "messages");

// Typed fields of a JSON object; absent or null gives `def`.
bool json_bool(const nlohmann::json& obj, const std::string& name, bool def);
long long json_int(const nlohmann::json& obj, const std::string& name, long long def, long long min, long long max);
double json_number(const nlohmann::json& obj, const std::string& name, double def, double min, double max);
std::string json_string(const nlohmann::json& obj, const std::string& name, const std::string& def);
// Token ids: an array of integers in [0, n_vocab).
std::vector<int32_t> json_tokens(const nlohmann::json& value, const std::string& name, int n_vocab);

}  // namespace vkmoe::serve
