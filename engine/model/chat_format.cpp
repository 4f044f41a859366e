#include "engine/model/chat_format.h"

namespace vkmoe {

const char* const kChatmlTemplate =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

namespace {

std::string token_text(const Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.n_vocab() ? std::string(tok.vocab().tokens[id]) : std::string();
}

}  // namespace

ChatFormat::ChatFormat(const GgufFile& f, const Tokenizer& tok)
    : tok_(tok), bos_(token_text(tok, tok.bos())), eos_(token_text(tok, tok.eos())) {
  from_model_ = f.has("tokenizer.chat_template");
  const std::string source = from_model_ ? f.get_str("tokenizer.chat_template") : kChatmlTemplate;
  try {
    tmpl_ = ChatTemplate::parse(source);
  } catch (const Error& e) {
    throw Error(std::string("the model's chat template: ") + e.what());
  }
}

std::string ChatFormat::render(const nlohmann::json& messages, bool add_generation_prompt,
                               const nlohmann::json& tools) const {
  return apply_chat_template(tmpl_, messages, add_generation_prompt, bos_, eos_, tools);
}

std::vector<int32_t> ChatFormat::tokenize(const std::string& prompt) const {
  std::vector<int32_t> ids = tok_.encode(prompt, false);
  if (tok_.vocab().add_bos && tok_.bos() >= 0 && (ids.empty() || ids[0] != tok_.bos()))
    ids.insert(ids.begin(), tok_.bos());
  return ids;
}

}  // namespace vkmoe
