#pragma once
// How a model's conversations become prompt tokens: its GGUF's chat template
// (tokenizer.chat_template) or, for a model without one, ChatML.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/model/template/chat_template.h"
#include "engine/model/tokenizer.h"

namespace vkmoe {

extern const char* const kChatmlTemplate;

class ChatFormat {
 public:
  // Throws Error when the model's template cannot be parsed (naming the construct).
  ChatFormat(const GgufFile& f, const Tokenizer& tok);
  // messages in OpenAI chat format; tools: OpenAI function specs or null.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& tools = nullptr) const;
  // A rendered prompt as tokens: special-token texts become their ids, and BOS
  // is prepended when the vocabulary asks for it and the text lacks it.
  std::vector<int32_t> tokenize(const std::string& prompt) const;
  bool from_model() const { return from_model_; }  // false: the ChatML fallback

 private:
  const Tokenizer& tok_;
  ChatTemplate tmpl_;
  std::string bos_, eos_;
  bool from_model_ = false;
};

}  // namespace vkmoe
