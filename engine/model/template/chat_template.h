#pragma once
// Chat templates (GGUF tokenizer.chat_template): a Jinja2 subset rendered as
// transformers' apply_chat_template renders it (jinja2's sandbox with
// trim_blocks, lstrip_blocks, loop controls, tojson, raise_exception and
// strftime_now). Output matches Python's jinja2 byte for byte on the
// templates of shared/fixtures/chat-templates.
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace vkmoe {

namespace jinja {
struct Stmt;
}

// A parsed template: cheap to copy (the syntax tree is shared); render() may
// run on several threads at once.
class ChatTemplate {
 public:
  // Parses a template; throws Error naming the construct it cannot handle.
  static ChatTemplate parse(const std::string& source);
  // Renders with the given variables, as transformers' apply_chat_template does:
  // ctx holds "messages" (array of {role, content, optional tool_calls / tool_call_id / name / reasoning_content}),
  // "add_generation_prompt" (bool), "bos_token", "eos_token", optional "tools" (array of OpenAI function specs),
  // plus any extra keys. Throws Error on a render-time failure (incl. raise_exception(msg) from the template).
  std::string render(const nlohmann::json& ctx) const;
  // Same, keeping the key order of JSON objects (Python dicts keep it; nlohmann::json sorts keys).
  std::string render(const nlohmann::ordered_json& ctx) const;
  // strftime_now() formats this time instead of the local clock (reproducible prompts, tests).
  void set_now(const std::tm& t) { now_ = t; }

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> body_;
  std::optional<std::tm> now_;
};

// The variables transformers passes a chat template: messages, tools (null
// when absent), documents (null), add_generation_prompt, bos_token, eos_token.
nlohmann::json chat_template_context(const nlohmann::json& messages, bool add_generation_prompt,
                                     const std::string& bos_token, const std::string& eos_token,
                                     const nlohmann::json& tools = nullptr);

// The conversation rendered for a model: messages in OpenAI chat format.
std::string apply_chat_template(const ChatTemplate& t, const nlohmann::json& messages, bool add_generation_prompt,
                                const std::string& bos_token, const std::string& eos_token,
                                const nlohmann::json& tools = nullptr);

}  // namespace vkmoe
