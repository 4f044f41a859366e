// Chat templates: the renderer on small templates (whitespace control, loops,
// macros, filters, errors naming the construct), and on every template of
// shared/fixtures/chat-templates compared byte for byte with Python's jinja2
// (tests/chat_template_oracle.py, set up as transformers sets it up) over
// several conversations. The fixtures folder is $VKMOE_FIXTURES (the fixtures
// folder or its chat-templates subfolder) or ../shared/fixtures/chat-templates
// beside the repository root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/template/chat_template.h"
#include "tests/fixtures.h"
#include "tests/test_util.h"

namespace vkmoe {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// --- small templates ---

std::string render(const std::string& src, const json& ctx = json::object()) {
  return ChatTemplate::parse(src).render(ctx);
}

// Runs fn, expects an Error whose message contains every word in `words`.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& words) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown (expected: " << (words.empty() ? "" : words[0]) << ")";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
  }
}

TEST(ChatTemplate, WhitespaceControl) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it.
  EXPECT_EQ(render("{% if true %}\n  yes\n  {% endif %}\nend"), "  yes\nend");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a\n  {{- 'x' -}}\n  b"), "axb");
  EXPECT_EQ(render("  {{ 'x' }}\n"), "  x");  // one trailing newline of the source is dropped
  EXPECT_EQ(render("  {%+ if true %}x{% endif +%}\ny"), "  x\ny");
  EXPECT_EQ(render("a {# note #}\nb\n  {#- c -#}  d"), "a bd");
  EXPECT_EQ(render("x\r\n{% if true %}\r\ny{% endif %}"), "x\ny");
  EXPECT_EQ(render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(ChatTemplate, ExpressionsAndValues) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 10 / 4 }} {{ 2 ** 10 }} {{ 'a' ~ 1 ~ none }}"),
            "7 3 2 2.5 1024 a1None");
  EXPECT_EQ(render("{{ (1, 'a') }} {{ [1, 'b', none, true, 1.5, {'k': \"it's\"}] }}"),
            "(1, 'a') [1, 'b', None, True, 1.5, {'k': \"it's\"}]");
  EXPECT_EQ(render("{{ 1e20 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 3.0 }}"), "1e+20 1e-05 0.30000000000000004 3.0");
  EXPECT_EQ(render("{{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ 'héllo' | length }} {{ [1,2,3][-1] }}"), "él cba 5 3");
  EXPECT_EQ(render("{{ 'yes' if x is defined else 'no' }} {{ (x.y is defined) if x is defined }}|"), "no |");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ not none }}"), "True True True True");
  EXPECT_EQ(render("{{ m.content }}|{{ m['missing'] }}|{{ none.x }}", {{"m", {{"content", "hi"}}}}), "hi||");
  EXPECT_EQ(render("{{ 'a' or 'b' }} {{ '' or 'b' }} {{ 0 and 1 }}"), "a b 0");
}

TEST(ChatTemplate, LoopsAndScoping) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ x }}{{ ',' if not loop.last }}{% endfor %}"), "1a,2b,3c");
  EXPECT_EQ(render("{% for a in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.revindex }} "
                   "{% endfor %}"),
            "-2-3 1-3-2 2--1 ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{% if x > 6 %}{% break %}{% endif %}"
                   "{% if x == 3 %}{% continue %}{% endif %}{{ x }}{% endfor %}"),
            "15");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  // A set inside a loop stays in its iteration; namespace() carries state out.
  EXPECT_EQ(render("{% set x = 0 %}{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set x = x + i %}"
                   "{% set ns.n = ns.n + i %}{{ x }}{% endfor %}|{{ x }}|{{ ns.n }}"),
            "12|0|3");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
}

TEST(ChatTemplate, MacrosAndCalls) {
  EXPECT_EQ(render("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}"
                   "{{ m(1) }} {{ m(1, 3, 4, c=5) }} {{ m() }}"),
            "12(){} 13(4,){'c': 5} 2(){}");
  EXPECT_EQ(render("{% macro m(a) %}[{{ caller() }}{{ a }}]{% endmacro %}{% call m(1) %}body{% endcall %}"), "[body1]");
  EXPECT_EQ(render("{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ m() }}"), "6");
  EXPECT_EQ(render("{% set s %}  a {{ 1 }}{% endset %}[{{ s }}]{% filter upper %}b{% endfilter %}"), "[  a 1]B");
}

TEST(ChatTemplate, FiltersAndTests) {
  EXPECT_EQ(
      render(
          "{{ ' x ' | trim }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ 'ab' | replace('a', 'x') }}"),
      "x|Hello World|Hello|xb");
  EXPECT_EQ(render("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'a'] | sort }} {{ [1, 2, 2, 'a', 'A'] | unique | list }}"),
            "[1, 2, 3] ['A', 'a', 'b'] [1, 2, 'a']");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }} {{ [1, 2] | join('-') }} {{ [1, 5, 3] | max }}"),
            "[('a', 2), ('b', 1)] 1-2 5");
  EXPECT_EQ(render("{{ [{'a': 1}, {'b': 2}] | selectattr('a', 'defined') | list }} "
                   "{{ [{'a': 1}, {'a': 2}] | map(attribute='a') | list }} {{ [1, 2, 3] | reject('odd') | list }}"),
            "[{'a': 1}] [1, 2] [2]");
  EXPECT_EQ(render("{{ 'a\nb' | indent(2) }}|{{ 'a\nb\n\nc' | indent(2, true) }}"), "a\n  b|  a\n  b\n\n  c");
  EXPECT_EQ(render("{{ {'b': [1, {'c': none}], 'é': 1.0} | tojson }}"), "{\"b\": [1, {\"c\": null}], \"é\": 1.0}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(
      render("{{ '3' | int + 1 }} {{ 'x' | int }} {{ '3.5' | float }} {{ x | default('d') }} {{ '' | d('e', true) }}"),
      "4 0 3.5 d e");
  EXPECT_EQ(render("{{ 1 is number }}{{ true is number }}{{ {} is mapping }}{{ 'a' is iterable }}{{ {} is sequence }}"
                   "{{ none is none }}{{ 1 is true }}{{ true is true }}{{ 'abc' is string }}"),
            "TrueTrueTrueTrueTrueTrueFalseTrueTrue");
  EXPECT_EQ(render("{{ 'a,b'.split(',') }} {{ ' a b '.split() }} {{ 'x-y'.startswith('x') }} "
                   "{{ '<{}>'.format(1) }} {{ 'Ab'.upper() }} {{ '  q'.lstrip() }}"),
            "['a', 'b'] ['a', 'b'] True <1> AB q");
  EXPECT_EQ(render("{{ 'x' | safe + '<' }} {{ '<' | safe ~ '<' }}"), "x&lt; <<");
}

TEST(ChatTemplate, Errors) {
  expect_error([] { ChatTemplate::parse("{% include 'x.jinja' %}"); }, {"line 1", "unsupported tag 'include'"});
  expect_error([] { ChatTemplate::parse("a\n{% for x in y recursive %}{% endfor %}"); }, {"line 2", "recursive"});
  expect_error([] { ChatTemplate::parse("{{ x | nosuchfilter }}"); }, {"no filter named 'nosuchfilter'"});
  expect_error([] { ChatTemplate::parse("{% if x %}"); }, {"end of template", "endif"});
  expect_error([] { ChatTemplate::parse("{{ 'unterminated }}"); }, {"unterminated string"});
  expect_error([] { ChatTemplate::parse("{% frobnicate %}"); }, {"unknown tag 'frobnicate'"});
  expect_error([] { render("\n\n{{ raise_exception('System role not supported') }}"); },
               {"line 3", "System role not supported"});
  expect_error([] { render("{{ raise_exception('two\\nlines') }}"); }, {"two\\x0Alines"});
  expect_error([] { render("{{ 'a' + 1 }}"); }, {"can only concatenate str"});
  expect_error([] { render("{{ x.y }}"); }, {"'x' is undefined"});
  expect_error([] { render("{% set l = [] %}{{ l.append(1) }}"); }, {"unsafe"});
  expect_error([] { render("{{ none | length }}"); }, {"has no len()"});
  // An unknown filter inside an if fails only when it runs (as in jinja2).
  EXPECT_EQ(render("{% if false %}{{ x | from_json }}{% endif %}ok"), "ok");
  expect_error([] { render("{% if true %}{{ '{}' | from_json }}{% endif %}"); }, {"no filter named 'from_json'"});
}

TEST(ChatTemplate, ApplyChatTemplate) {
  const auto t = ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}{{ tools is none }}");
  const json msgs = json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(apply_chat_template(t, msgs, true, "<s>", "</s>"), "<s><|user|>hi</s><|assistant|>True");
  EXPECT_EQ(apply_chat_template(t, msgs, false, "", "", json::array()), "<|user|>hiFalse");
  ChatTemplate d = ChatTemplate::parse("{{ strftime_now('%Y-%m-%d %B') }}");
  std::tm tm{};
  tm.tm_year = 124, tm.tm_mon = 6, tm.tm_mday = 26;
  d.set_now(tm);
  EXPECT_EQ(d.render(json::object()), "2024-07-26 July");
}

// A template from a model file must not hang the server or exhaust its memory:
// renders have a step and a byte budget (jinja2's sandbox caps range() alone).
TEST(ChatTemplate, RenderBudgetStopsRunawayTemplates) {
  expect_error([] { render("{% set l = range(3000) | list %}{% for i in l %}{% for j in l %}{% endfor %}{% endfor %}"); },
               {"line 1", "runs too long"});
  expect_error([] { render("{% macro r(n) %}{% for i in range(9999) %}{{ r(n + 1) if n < 9 }}{% endfor %}{% endmacro %}"
                           "{{ r(0) }}"); },
               {"runs too long"});
  expect_error([] { render("{% set ns = namespace(s='ab') %}\n{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
                           "{% endfor %}"); },
               {"line 2", "builds too much text"});
  expect_error([] { render("{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}"
                           "{% endfor %}"); },
               {"builds too much text"});
  expect_error([] { render("{% set big = 'x' * 1000000 %}{% for i in range(1000) %}{{ big }}{% endfor %}"); },
               {"builds too much text"});
  // A long conversation through a loop stays well inside the budget.
  json msgs = json::array();
  for (int i = 0; i < 4000; ++i) msgs.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(500, 'w')}});
  const auto t = ChatTemplate::parse("{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% endfor %}");
  EXPECT_EQ(apply_chat_template(t, msgs, false, "", "").size(), 4000u * 500 + 2000 * (8 + 13));
}

// --- every fixture template against Python's jinja2 ---

// One conversation: messages, add_generation_prompt ("gen"), whether the tools
// list is passed, and extra template variables.
constexpr const char* kConversations = R"JSON(
[
  {"name": "user_only", "gen": true, "messages": [
    {"role": "user", "content": "Hello!"}]},
  {"name": "two_turn", "gen": false, "messages": [
    {"role": "user", "content": "Hi there."},
    {"role": "assistant", "content": "Hello! How can I help?"}]},
  {"name": "system_two_turn", "gen": false, "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "2+2 is 4."}]},
  {"name": "system_user_gen", "gen": true, "messages": [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Name a color."}]},
  {"name": "multi_turn", "gen": true, "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "One?"},
    {"role": "assistant", "content": "1"},
    {"role": "user", "content": "Two?"},
    {"role": "assistant", "content": "2"},
    {"role": "user", "content": "Three?"}]},
  {"name": "multi_turn_no_gen", "gen": false, "messages": [
    {"role": "user", "content": "A"},
    {"role": "assistant", "content": "B"},
    {"role": "user", "content": "C"},
    {"role": "assistant", "content": "D"}]},
  {"name": "tools_no_call", "gen": true, "tools": true, "messages": [
    {"role": "user", "content": "Weather in Paris?"}]},
  {"name": "tool_call", "gen": true, "tools": true, "messages": [
    {"role": "system", "content": "Use tools when needed."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "call00001", "type": "function", "function": {"name": "get_weather",
        "arguments": {"location": "Paris", "unit": "celsius"}}}]},
    {"role": "tool", "tool_call_id": "call00001", "name": "get_weather",
     "content": "{\"temperature\": 22, \"sky\": \"clear\"}"}]},
  {"name": "tool_call_final", "gen": true, "tools": true, "messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call00001", "type": "function", "function": {"name": "get_weather",
        "arguments": {"location": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "22 C"},
    {"role": "assistant", "content": "It is 22 °C in Paris."},
    {"role": "user", "content": "Thanks!"}]},
  {"name": "tool_args_string", "gen": false, "tools": true, "messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"id": "call00001", "type": "function", "function": {"name": "get_weather",
        "arguments": "{\"location\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "22 C"}]},
  {"name": "tool_calls_two", "gen": false, "tools": true, "messages": [
    {"role": "user", "content": "Compare Paris and Rome."},
    {"role": "assistant", "content": "Checking both.", "tool_calls": [
      {"id": "callaaaaa", "type": "function", "function": {"name": "get_weather",
        "arguments": {"location": "Paris"}}},
      {"id": "callbbbbb", "type": "function", "function": {"name": "get_weather",
        "arguments": {"location": "Rome", "unit": "fahrenheit"}}}]},
    {"role": "tool", "tool_call_id": "callaaaaa", "name": "get_weather", "content": "18 C"},
    {"role": "tool", "tool_call_id": "callbbbbb", "name": "get_weather", "content": "75 F"},
    {"role": "assistant", "content": "Rome is warmer."}]},
  {"name": "reasoning", "gen": true, "messages": [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4", "reasoning_content": "Two plus two is four."},
    {"role": "user", "content": "3+3?"}]},
  {"name": "unicode", "gen": true, "messages": [
    {"role": "system", "content": "Réponds en français. <b>&'\"</b>"},
    {"role": "user", "content": "Zażółć gęślą jaźń 😀\n  indented\ttab"}]},
  {"name": "thinking_off", "gen": true, "extra": {"enable_thinking": false}, "messages": [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "Bye"}]},
  {"name": "reasoning_tool_call", "gen": true, "tools": true, "messages": [
    {"role": "user", "content": "Search for cats."},
    {"role": "assistant", "content": "", "reasoning_content": "I should search.", "tool_calls": [
      {"id": "abc123def", "type": "function", "function": {"name": "search",
        "arguments": {"query": "cats", "max_results": 2}}}]},
    {"role": "tool", "tool_call_id": "abc123def", "name": "search", "content": "Cats are mammals."}]},
  {"name": "content_parts", "gen": true, "messages": [
    {"role": "user", "content": [{"type": "text", "text": "Describe this."}]}]}
]
)JSON";

constexpr const char* kTools = R"JSON(
[
  {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
      "location": {"type": "string", "description": "City name"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}},
  {"type": "function", "function": {"name": "search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {
      "query": {"type": "string"}, "max_results": {"type": "integer", "default": 5}}, "required": ["query"]}}}
]
)JSON";

constexpr const char* kNow = "2025-03-14T09:26:53";  // strftime_now() in both renderers

fs::path source_root() { return fs::path(__FILE__).parent_path().parent_path(); }

std::string run_capture(const std::string& cmd, int& status) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) {
    status = -1;
    return out;
  }
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  status = pclose(f);
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Where two renderings first differ, with some context.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t k = 0;
  while (k < want.size() && k < got.size() && want[k] == got[k]) ++k;
  const size_t from = k > 40 ? k - 40 : 0;
  return "at byte " + std::to_string(k) + ":\n  jinja2: " + json(want.substr(from, 100)).dump() +
         "\n  ours:   " + json(got.substr(from, 100)).dump();
}

TEST(ChatTemplateFixtures, MatchJinja2) {
  const fs::path dir = test::fixtures_dir("chat-templates");
  if (dir.empty()) GTEST_SKIP() << "../shared/fixtures/chat-templates not found (set VKMOE_FIXTURES)";
  if (std::system("python3 -c 'import jinja2' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with jinja2 is not available (apt-get install python3-jinja2)";
  const fs::path oracle = source_root() / "tests" / "chat_template_oracle.py";
  ASSERT_TRUE(fs::exists(oracle)) << oracle;

  std::vector<fs::path> templates;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jinja") templates.push_back(e.path());
  std::sort(templates.begin(), templates.end());
  if (templates.empty()) GTEST_SKIP() << "no .jinja files in " << dir;

  const json convs = json::parse(kConversations);
  const json tools = json::parse(kTools);
  json cases = json::array();
  for (const json& c : convs) {
    json ctx = chat_template_context(c["messages"], c["gen"].get<bool>(), "<s>", "</s>",
                                     c.value("tools", false) ? tools : json(nullptr));
    if (c.contains("extra")) ctx.update(c["extra"]);
    cases.push_back(std::move(ctx));
  }
  json req = {{"now", kNow}, {"templates", json::array()}, {"cases", cases}};
  for (const auto& p : templates) req["templates"].push_back(p.string());
  const fs::path req_path = test::temp_path("vkmoe_chat_template", ".json");
  std::ofstream(req_path) << req.dump();
  int status = 0;
  const std::string resp_text =
      run_capture("python3 " + shell_quote(oracle.string()) + " " + shell_quote(req_path.string()), status);
  fs::remove(req_path);
  ASSERT_EQ(status, 0) << "oracle failed";
  const json results = json::parse(resp_text)["results"];
  ASSERT_EQ(results.size(), templates.size());

  std::tm now{};
  now.tm_year = 125, now.tm_mon = 2, now.tm_mday = 14, now.tm_hour = 9, now.tm_min = 26, now.tm_sec = 53;
  now.tm_isdst = -1;
  const std::time_t t = timegm(&now);
  gmtime_r(&t, &now);  // fills in the weekday and day of the year

  int same = 0, both_failed = 0, mismatched = 0;
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    const std::string name = templates[ti].filename().string();
    std::optional<ChatTemplate> tpl;
    std::string parse_error;
    try {
      tpl = ChatTemplate::parse(test::read_file(templates[ti]));
      tpl->set_now(now);
    } catch (const Error& e) {
      parse_error = e.what();
    }
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const json& want = results[ti][ci];
      const std::string where = name + " / " + convs[ci]["name"].get<std::string>();
      std::string got, error = parse_error;
      if (tpl) {
        try {
          got = tpl->render(cases[ci]);
        } catch (const Error& e) {
          error = e.what();
        }
      }
      if (want.contains("error")) {
        if (error.empty()) {
          ++mismatched;
          ADD_FAILURE() << where << ": jinja2 failed (" << want["error"].get<std::string>() << ") but we rendered "
                        << json(got.substr(0, 200)).dump();
        } else {
          ++both_failed;
        }
      } else if (!error.empty()) {
        ++mismatched;
        ADD_FAILURE() << where << ": jinja2 rendered, we failed: " << error;
      } else if (got != want["out"].get<std::string>()) {
        ++mismatched;
        ADD_FAILURE() << where << ": output differs " << first_difference(want["out"].get<std::string>(), got);
      } else {
        ++same;
      }
    }
  }
  std::printf("chat templates: %zu templates x %zu conversations: %d identical, %d failing in both, %d mismatched\n",
              templates.size(), cases.size(), same, both_failed, mismatched);
}

}  // namespace
}  // namespace vkmoe
