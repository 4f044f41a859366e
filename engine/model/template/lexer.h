#pragma once
// Template source to tokens, with jinja2's whitespace control as transformers
// configures it: trim_blocks and lstrip_blocks on, {%- -%} {{- -}} {#- -#}
// strip, {%+ +%} keep, one trailing newline of the source dropped.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkmoe::jinja {

enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Data text, name, decoded string literal or operator
  int line = 1;
  int64_t i = 0;  // Int
  double f = 0;   // Float
};

// Throws Error ("chat template line N: ...") on malformed input.
std::vector<Token> tokenize(std::string_view source);

}  // namespace vkmoe::jinja
