#include "engine/model/template/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "engine/model/template/unicode.h"
#include "engine/model/template/value.h"

namespace vkmoe::jinja {
namespace {

// Python's \s at s[p]: byte length of the whitespace character there, or 0.
size_t space_at(std::string_view s, size_t p) {
  if (p >= s.size()) return 0;
  uint32_t cp;
  const size_t n = utf8_decode(s, p, cp);
  return uni_is_space(cp) ? n : 0;
}

std::string_view rstrip_space(std::string_view s) {
  // Walk forward remembering where the last non-space character ended.
  size_t keep = 0;
  for (size_t p = 0; p < s.size();) {
    const size_t n = space_at(s, p);
    if (n) {
      p += n;
    } else {
      uint32_t cp;
      p += utf8_decode(s, p, cp);
      keep = p;
    }
  }
  return s.substr(0, keep);
}

bool all_space(std::string_view s) {
  if (s.empty()) return false;
  for (size_t p = 0; p < s.size();) {
    const size_t n = space_at(s, p);
    if (!n) return false;
    p += n;
  }
  return true;
}

int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's unicode-escape decoding of a string literal's body.
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t p = 0; p < s.size();) {
    if (s[p] != '\\' || p + 1 >= s.size()) {
      out += s[p++];
      continue;
    }
    const char c = s[p + 1];
    p += 2;
    auto hex = [&](int digits) {
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k, ++p) {
        const char h = p < s.size() ? s[p] : 0;
        if (!std::isxdigit(static_cast<unsigned char>(h))) template_error(line, "truncated \\x/\\u escape in a string");
        v = v * 16 + (h <= '9' ? h - '0' : (h | 32) - 'a' + 10);
      }
      return v;
    };
    switch (c) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': utf8_append(out, hex(2)); break;
      case 'u': utf8_append(out, hex(4)); break;
      case 'U': utf8_append(out, hex(8)); break;
      case 'N': template_error(line, "\\N{...} escapes are not supported");
      default:
        if (c >= '0' && c <= '7') {
          uint32_t v = c - '0';
          for (int k = 0; k < 2 && p < s.size() && s[p] >= '0' && s[p] <= '7'; ++k) v = v * 8 + (s[p++] - '0');
          utf8_append(out, v);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      const size_t start = next_tag(pos_);
      if (start == std::string::npos) {
        data(std::string_view(s_).substr(pos_));
        break;
      }
      const char kind = s_[start + 1];  // '{' '%' '#'
      const char sign = start + 2 < s_.size() && (s_[start + 2] == '-' || s_[start + 2] == '+') ? s_[start + 2] : 0;
      std::string_view text = std::string_view(s_).substr(pos_, start - pos_);
      const int text_lines = count_lines(text);
      if (sign == '-') {
        text = rstrip_space(text);
      } else if (sign != '+' && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && all_space(text.substr(l_pos))) text = text.substr(0, l_pos);
      }
      data(text);
      line_ += text_lines - count_lines(text);
      pos_ = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        line_starting = comment();
      } else if (kind == '%' && raw_begin()) {
        line_starting = raw();
      } else {
        line_starting = tag(kind == '%');
      }
    }
    out_.push_back({Tok::Eof, "", line_});
    return std::move(out_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t p = s_.find('{', from); p != std::string::npos; p = s_.find('{', p + 1)) {
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
    }
    return std::string::npos;
  }

  void data(std::string_view text) {
    if (text.empty()) return;
    out_.push_back({Tok::Data, std::string(text), line_});
    line_ += count_lines(text);
  }

  // After an end tag: its sign ('-' strips all whitespace, '+' nothing,
  // none: trim_blocks drops one newline). Returns whether it ended a line.
  bool after_end(char sign, bool trim) {
    const size_t from = pos_;
    if (sign == '-') {
      while (size_t n = space_at(s_, pos_)) pos_ += n;
    } else if (sign != '+' && trim && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_lines(std::string_view(s_).substr(from, pos_ - from));
    return pos_ > 0 && s_[pos_ - 1] == '\n';
  }

  bool comment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) template_error(line_, "missing end of comment tag");
    char sign = 0;
    size_t body_end = end;
    if (end > pos_ && (s_[end - 1] == '-' || s_[end - 1] == '+')) sign = s_[end - 1], --body_end;
    line_ += count_lines(std::string_view(s_).substr(pos_, end - pos_));
    pos_ = end + 2;
    return after_end(sign, true);
  }

  // At "{% raw %}" (pos_ after "{%" and its sign): consumes the opening tag.
  bool raw_begin() {
    size_t p = pos_;
    while (size_t n = space_at(s_, p)) p += n;
    if (s_.compare(p, 3, "raw") != 0 || (p + 3 < s_.size() && is_name_char(s_[p + 3]))) return false;
    p += 3;
    while (size_t n = space_at(s_, p)) p += n;
    if (s_.compare(p, 3, "-%}") == 0) {
      pos_ = p + 3;
      after_end('-', false);
    } else if (s_.compare(p, 2, "%}") == 0) {
      pos_ = p + 2;
    } else {
      return false;
    }
    return true;
  }

  bool raw() {
    for (size_t p = s_.find("{%", pos_); p != std::string::npos; p = s_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
      while (size_t n = space_at(s_, q)) q += n;
      if (s_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (size_t n = space_at(s_, q)) q += n;
      char end_sign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) end_sign = s_[q++];
      if (s_.compare(q, 2, "%}") != 0) continue;
      std::string_view body = std::string_view(s_).substr(pos_, p - pos_);
      const int lines = count_lines(body);
      if (sign == '-') body = rstrip_space(body);
      data(body);
      line_ += lines - count_lines(body);
      pos_ = q + 2;
      return after_end(end_sign, true);
    }
    template_error(line_, "missing end of raw directive");
  }

  // Inside {{ }} or {% %}: tokens up to the end tag. Returns whether the end ended a line.
  bool tag(bool block) {
    const int begin_line = line_;
    out_.push_back({block ? Tok::BlockBegin : Tok::VarBegin, "", line_});
    std::vector<char> balance;
    for (;;) {
      while (size_t n = space_at(s_, pos_)) {
        if (s_[pos_] == '\n') ++line_;
        pos_ += n;
      }
      if (pos_ >= s_.size()) template_error(begin_line, block ? "unclosed block tag '{%'" : "unclosed '{{'");
      if (balance.empty()) {
        const char* end = block ? "%}" : "}}";
        char sign = 0;
        size_t at = pos_;
        if ((s_[at] == '-' || (block && s_[at] == '+')) && s_.compare(at + 1, 2, end) == 0) sign = s_[at++];
        if (s_.compare(at, 2, end) == 0) {
          out_.push_back({block ? Tok::BlockEnd : Tok::VarEnd, "", line_});
          pos_ = at + 2;
          return after_end(sign, block);
        }
      }
      const char c = s_[pos_];
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s_.size() && is_name_char(s_[e])) ++e;
        out_.push_back({Tok::Name, s_.substr(pos_, e - pos_), line_});
        pos_ = e;
      } else if (is_digit(c)) {
        number();
      } else if (c == '\'' || c == '"') {
        string(c);
      } else {
        op(balance);
      }
    }
  }

  void number() {
    size_t e = pos_;
    auto digits = [&] {
      while (e < s_.size() && (is_digit(s_[e]) || (s_[e] == '_' && e + 1 < s_.size() && is_digit(s_[e + 1])))) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < s_.size() && s_[e] == '.' && is_digit(s_[e + 1])) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t x = e + 1;
      if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
      if (x < s_.size() && is_digit(s_[x])) {
        e = x;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (s_[k] != '_') text += s_[k];
    Token t{is_float ? Tok::Float : Tok::Int, text, line_};
    if (is_float) {
      t.f = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.i = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) template_error(line_, "integer literal out of range: " + text);
    }
    out_.push_back(std::move(t));
    pos_ = e;
  }

  void string(char quote) {
    size_t e = pos_ + 1;
    while (e < s_.size() && s_[e] != quote) e += s_[e] == '\\' ? 2 : 1;
    if (e >= s_.size()) template_error(line_, "unterminated string literal");
    const std::string_view body = std::string_view(s_).substr(pos_ + 1, e - pos_ - 1);
    out_.push_back({Tok::String, unescape(body, line_), line_});
    line_ += count_lines(body);
    pos_ = e + 1;
  }

  void op(std::vector<char>& balance) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* o : kTwo) {
      if (s_.compare(pos_, 2, o) == 0) {
        out_.push_back({Tok::Op, o, line_});
        pos_ += 2;
        return;
      }
    }
    const char c = s_[pos_];
    if (!std::strchr("+-/*%~[](){}><=.:|,;", c)) {
      uint32_t cp;
      const size_t n = utf8_decode(s_, pos_, cp);
      template_error(line_, "unexpected character '" + s_.substr(pos_, n) + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty() || balance.back() != c) template_error(line_, std::string("unexpected '") + c + "'");
      balance.pop_back();
    }
    out_.push_back({Tok::Op, std::string(1, c), line_});
    ++pos_;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> out_;
};

std::string normalize_newlines(std::string_view src) {
  std::string s;
  s.reserve(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    if (src[k] == '\r') {
      s += '\n';
      if (k + 1 < src.size() && src[k + 1] == '\n') ++k;
    } else {
      s += src[k];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();  // keep_trailing_newline=False
  return s;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace vkmoe::jinja
