#pragma once
// What a chat template read from a model file goes through: parsing, then
// rendering over a few conversations (plain, with a system prompt, with tool
// calls and tools, and without the generation prompt). Shared by the mutation
// test (tests/test_template_fuzz.cpp) and the libFuzzer target
// (fuzz/fuzz_template.cpp). A hostile template may be rejected with a
// one-line vkmoe::Error at either step; anything else escaping (another
// exception type, a multi-line message) is a bug, reported as std::logic_error.
#include <stdexcept>
#include <string>

#include "engine/model/template/chat_template.h"

namespace vkmoe::test {

inline const std::vector<nlohmann::json>& template_conversations() {
  static const std::vector<nlohmann::json> all = [] {
    using nlohmann::json;
    const json user = {{"role", "user"}, {"content", "What is 2+2?"}};
    const json call = {{"role", "assistant"},
                       {"content", nullptr},
                       {"tool_calls",
                        json::array({{{"id", "call_1"},
                                      {"type", "function"},
                                      {"function", {{"name", "add"}, {"arguments", {{"a", 2}, {"b", 2}}}}}}})}};
    const json tool = {{"role", "tool"}, {"tool_call_id", "call_1"}, {"name", "add"}, {"content", "4"}};
    const json tools = json::array({{{"type", "function"},
                                     {"function",
                                      {{"name", "add"},
                                       {"description", "Adds two numbers"},
                                       {"parameters",
                                        {{"type", "object"},
                                         {"properties", {{"a", {{"type", "number"}}}, {"b", {{"type", "number"}}}}},
                                         {"required", {"a", "b"}}}}}}}});
    return std::vector<json>{
        chat_template_context(json::array({user}), true, "<s>", "</s>"),
        chat_template_context(json::array({{{"role", "system"}, {"content", "Be brief."}}, user,
                                           {{"role", "assistant"}, {"content", "4"}}, user}),
                              false, "", "<|end|>"),
        chat_template_context(json::array({user, call, tool}), true, "<s>", "</s>", tools)};
  }();
  return all;
}

struct TemplateReach {
  bool parsed = false;
  int rendered = 0;  // conversations rendered without an Error
};

inline TemplateReach run_template(const std::string& source) {
  TemplateReach r;
  auto one_line = [](const Error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos)
      throw std::logic_error(std::string("multi-line error: ") + e.what());
  };
  ChatTemplate t;
  try {
    t = ChatTemplate::parse(source);
  } catch (const Error& e) {
    one_line(e);
    return r;
  }
  r.parsed = true;
  for (const nlohmann::json& ctx : template_conversations()) {
    try {
      t.render(ctx);
      ++r.rendered;
    } catch (const Error& e) {
      one_line(e);
    }
  }
  return r;
}

}  // namespace vkmoe::test
