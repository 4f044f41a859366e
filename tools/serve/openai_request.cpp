#include "tools/serve/openai_request.h"

#include <climits>
#include <cmath>

namespace vkmoe::serve {
namespace {

using nlohmann::json;

constexpr size_t kMaxStop = 16;

ApiError bad_type(const std::string& name, const char* what) {
  return ApiError(400, "'" + name + "' must be " + what, "invalid_type", name);
}

ApiError bad_value(const std::string& name, const std::string& what) {
  return ApiError(400, "'" + name + "' " + what, "invalid_value", name);
}

ApiError unsupported(const std::string& name, const std::string& what) {
  return ApiError(400, "'" + name + "' " + what, "unsupported_parameter", name);
}

// The field, or nullptr when absent or null.
const json* field(const json& obj, const std::string& name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// stop: a string or an array of strings; empty strings are dropped.
std::vector<std::string> parse_stop(const json& body) {
  std::vector<std::string> out;
  const json* s = field(body, "stop");
  if (!s) return out;
  if (s->is_string()) {
    if (!s->get_ref<const std::string&>().empty()) out.push_back(*s);
    return out;
  }
  if (!s->is_array()) throw bad_type("stop", "a string or an array of strings");
  if (s->size() > kMaxStop) throw bad_value("stop", "has more than " + std::to_string(kMaxStop) + " strings");
  for (const json& e : *s) {
    if (!e.is_string()) throw bad_type("stop", "a string or an array of strings");
    if (!e.get_ref<const std::string&>().empty()) out.push_back(e);
  }
  return out;
}

// The fields both endpoints share: sampling, limits, stop, streaming, and the
// parameters vkmoe rejects.
void parse_common(const json& body, CompletionParams& p) {
  SamplerParams& s = p.sampling;
  // OpenAI's defaults (temperature 1, top_p 1) and no top-k/min-p/repeat
  // penalty unless asked for (llama.cpp's extra names).
  s.temperature = static_cast<float>(json_number(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(json_number(body, "top_p", 1.0, 0.0, 1.0));
  s.top_k = static_cast<int>(json_int(body, "top_k", 0, 0, INT_MAX));
  s.min_p = static_cast<float>(json_number(body, "min_p", 0.0, 0.0, 1.0));
  s.repeat_penalty = static_cast<float>(json_number(body, "repeat_penalty", 1.0, 1e-3, 1e3));
  s.repeat_last_n = static_cast<int>(json_int(body, "repeat_last_n", 64, -1, INT_MAX));
  if (field(body, "seed")) {
    // Any integer; 0 means "random" to the sampler, so seeds are mixed into a
    // non-zero value.
    const long long seed = json_int(body, "seed", 0, LLONG_MIN, LLONG_MAX);
    s.seed = static_cast<uint64_t>(seed) ^ 0x9E3779B97F4A7C15ull;
    if (s.seed == 0) s.seed = 1;
  } else {
    s.seed = 0;
  }
  for (const char* name : {"frequency_penalty", "presence_penalty"})
    if (json_number(body, name, 0.0, -2.0, 2.0) != 0.0)
      throw unsupported(name, "is not supported (only 0); use repeat_penalty");
  if (json_int(body, "n", 1, 1, INT_MAX) != 1) throw unsupported("n", "must be 1");
  if (json_int(body, "best_of", 1, 1, INT_MAX) != 1) throw unsupported("best_of", "must be 1");
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) throw bad_type("logit_bias", "an object");
    if (!lb->empty()) throw unsupported("logit_bias", "is not supported");
  }
  long long max_tokens = json_int(body, "max_tokens", p.max_tokens, 0, INT_MAX);
  max_tokens = json_int(body, "max_completion_tokens", max_tokens, 0, INT_MAX);
  p.max_tokens = static_cast<int>(max_tokens);
  p.stop = parse_stop(body);
  p.stream = json_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad_type("stream_options", "an object");
    p.include_usage = json_bool(*so, "include_usage", false);
  }
  if (const json* m = field(body, "model"); m && !m->is_string()) throw bad_type("model", "a string");
}

// Content of a message: a string, null, or an array of text parts.
json message_content(const json& c, const std::string& name) {
  if (c.is_null() || c.is_string()) return c;
  if (!c.is_array()) throw bad_type(name, "a string, null or an array of content parts");
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string part = name + "[" + std::to_string(i) + "]";
    if (!c[i].is_object()) throw bad_type(part, "an object");
    const std::string type = json_string(c[i], "type", "");
    if (type != "text") throw unsupported(part + ".type", "must be \"text\" (only text content is supported)");
    const json* t = field(c[i], "text");
    if (!t || !t->is_string()) throw bad_type(part + ".text", "a string");
    text += t->get_ref<const std::string&>();
  }
  return text;
}

}  // namespace

nlohmann::json parse_json_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("invalid JSON in the request body: ") + e.what(), "invalid_json");
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", "invalid_json");
  return j;
}

bool json_bool(const json& obj, const std::string& name, bool def) {
  const json* v = field(obj, name);
  if (!v) return def;
  if (!v->is_boolean()) throw bad_type(name, "a boolean");
  return v->get<bool>();
}

long long json_int(const json& obj, const std::string& name, long long def, long long min, long long max) {
  const json* v = field(obj, name);
  if (!v) return def;
  long long x = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    x = u > static_cast<uint64_t>(LLONG_MAX) ? LLONG_MAX : static_cast<long long>(u);
  } else if (v->is_number_integer()) {
    x = v->get<long long>();
  } else if (v->is_number_float()) {  // 5.0 is an integer; 5.5 is not
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d)) throw bad_type(name, "an integer");
    x = d >= 9.2e18 ? LLONG_MAX : d <= -9.2e18 ? LLONG_MIN : static_cast<long long>(d);
  } else {
    throw bad_type(name, "an integer");
  }
  if (x < min) throw bad_value(name, "must be at least " + std::to_string(min));
  if (x > max) throw bad_value(name, "must be at most " + std::to_string(max));
  return x;
}

double json_number(const json& obj, const std::string& name, double def, double min, double max) {
  const json* v = field(obj, name);
  if (!v) return def;
  if (!v->is_number()) throw bad_type(name, "a number");
  const double x = v->get<double>();
  if (!(x >= min && x <= max)) throw bad_value(name, "must be between " + show(min) + " and " + show(max));
  return x;
}

std::string json_string(const json& obj, const std::string& name, const std::string& def) {
  const json* v = field(obj, name);
  if (!v) return def;
  if (!v->is_string()) throw bad_type(name, "a string");
  return *v;
}

std::vector<int32_t> json_tokens(const json& value, const std::string& name, int n_vocab) {
  if (!value.is_array()) throw bad_type(name, "an array of token ids");
  std::vector<int32_t> out;
  out.reserve(value.size());
  for (const json& t : value) {
    if (!t.is_number_integer() && !t.is_number_unsigned()) throw bad_type(name, "an array of token ids");
    const long long id = t.is_number_unsigned() ? static_cast<long long>(std::min<uint64_t>(t.get<uint64_t>(), INT_MAX))
                                                : t.get<long long>();
    if (id < 0 || id >= n_vocab)
      throw bad_value(name, "holds token id " + std::to_string(id) + ", outside the vocabulary of " +
                                std::to_string(n_vocab));
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

nlohmann::json check_messages(const json& messages, const std::string& field_name) {
  if (!messages.is_array()) throw bad_type(field_name, "an array of messages");
  if (messages.empty()) throw bad_value(field_name, "must hold at least one message");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string name = field_name + "[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object()) throw bad_type(name, "an object");
    const json* role = field(m, "role");
    if (!role) throw ApiError(400, "'" + name + ".role' is required", "missing_field", name + ".role");
    if (!role->is_string() || role->get_ref<const std::string&>().empty())
      throw bad_type(name + ".role", "a non-empty string");
    json msg = m;
    if (*role == "developer") msg["role"] = "system";
    auto c = m.find("content");
    if (c == m.end()) {
      if (*role != "assistant")
        throw ApiError(400, "'" + name + ".content' is required", "missing_field", name + ".content");
      msg["content"] = "";
    } else {
      msg["content"] = message_content(*c, name + ".content");
      if (msg["content"].is_null()) msg["content"] = "";  // templates concatenate it (llama.cpp does the same)
    }
    out.push_back(std::move(msg));
  }
  return out;
}

CompletionParams parse_chat_request(const json& body) {
  CompletionParams p;
  p.endpoint = Endpoint::Chat;
  auto m = body.find("messages");
  if (m == body.end() || m->is_null()) throw ApiError(400, "'messages' is required", "missing_field", "messages");
  p.messages = check_messages(*m);
  if (const json* t = field(body, "tools")) {
    if (!t->is_array()) throw bad_type("tools", "an array");
    if (!t->empty()) p.tools = *t;
  }
  if (json_bool(body, "logprobs", false)) throw unsupported("logprobs", "is not supported");
  if (const json* rf = field(body, "response_format")) {
    if (!rf->is_object()) throw bad_type("response_format", "an object");
    if (json_string(*rf, "type", "text") != "text")
      throw unsupported("response_format", "supports only {\"type\": \"text\"}");
  }
  parse_common(body, p);
  return p;
}

CompletionParams parse_completion_request(const json& body, int n_vocab) {
  CompletionParams p;
  p.endpoint = Endpoint::Completion;
  p.max_tokens = 16;  // OpenAI's default for /v1/completions
  const json* pr = field(body, "prompt");
  if (!pr) throw ApiError(400, "'prompt' is required", "missing_field", "prompt");
  const json* one = pr;
  if (pr->is_array() && !pr->empty() && (pr->front().is_string() || pr->front().is_array())) {
    if (pr->size() != 1) throw unsupported("prompt", "must be a single prompt (one string or one token array)");
    one = &pr->front();
  }
  if (one->is_string()) {
    p.prompt = *one;
  } else if (one->is_array()) {
    p.prompt_is_tokens = true;
    p.prompt_tokens = json_tokens(*one, "prompt", n_vocab);
  } else {
    throw bad_type("prompt", "a string, an array of strings, or an array of token ids");
  }
  if (json_bool(body, "echo", false)) throw unsupported("echo", "is not supported");
  if (!json_string(body, "suffix", "").empty()) throw unsupported("suffix", "is not supported");
  if (const json* lp = field(body, "logprobs")) {
    if (!lp->is_number_integer() && !lp->is_number_unsigned()) throw bad_type("logprobs", "an integer");
    if (lp->get<long long>() != 0) throw unsupported("logprobs", "is not supported");
  }
  parse_common(body, p);
  return p;
}

}  // namespace vkmoe::serve
