#pragma once
// Chat prompts of the server: the model's ChatFormat (its chat template, or
// ChatML) with template failures answered as 400 errors.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/chat_format.h"

namespace vkmoe::serve {

class ChatPrompt {
 public:
  // Throws Error when the model's template cannot be parsed.
  ChatPrompt(const GgufFile& f, const Tokenizer& tok) : fmt_(f, tok) {}

  // ApiError 400 "template_error" when the template fails (e.g. its
  // raise_exception on a role order it does not accept).
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& tools = nullptr) const;
  std::vector<int32_t> tokenize(const std::string& text) const { return fmt_.tokenize(text); }
  // "model", or "chatml" for a model without a template.
  const char* name() const { return fmt_.from_model() ? "model" : "chatml"; }

 private:
  ChatFormat fmt_;
};

}  // namespace vkmoe::serve
