#include "engine/model/template/chat_template.h"

#include "engine/model/template/parser.h"
#include "engine/model/template/renderer.h"

namespace vkmoe {

ChatTemplate ChatTemplate::parse(const std::string& source) {
  ChatTemplate t;
  t.body_ = std::make_shared<const jinja::Body>(jinja::parse_template(source));
  return t;
}

namespace {
template <class J>
std::string render_json(const jinja::Body& body, const J& ctx, const std::optional<std::tm>& now) {
  if (!ctx.is_object() && !ctx.is_null()) throw Error("chat template context must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  if (ctx.is_object()) {
    for (auto it = ctx.begin(); it != ctx.end(); ++it) vars.emplace_back(it.key(), jinja::Value::from_json(it.value()));
  }
  return jinja::Renderer(std::move(vars), now).render(body);
}
}  // namespace

std::string ChatTemplate::render(const nlohmann::json& ctx) const {
  if (!body_) throw Error("chat template: render() on an empty template");
  return render_json(*body_, ctx, now_);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& ctx) const {
  if (!body_) throw Error("chat template: render() on an empty template");
  return render_json(*body_, ctx, now_);
}

nlohmann::json chat_template_context(const nlohmann::json& messages, bool add_generation_prompt,
                                     const std::string& bos_token, const std::string& eos_token,
                                     const nlohmann::json& tools) {
  return {{"messages", messages},   {"tools", tools},
          {"documents", nullptr},   {"add_generation_prompt", add_generation_prompt},
          {"bos_token", bos_token}, {"eos_token", eos_token}};
}

std::string apply_chat_template(const ChatTemplate& t, const nlohmann::json& messages, bool add_generation_prompt,
                                const std::string& bos_token, const std::string& eos_token,
                                const nlohmann::json& tools) {
  return t.render(chat_template_context(messages, add_generation_prompt, bos_token, eos_token, tools));
}

}  // namespace vkmoe
