// The methods of Python's str that templates call, on code points, and str.format.
#include "engine/model/template/str_methods.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "engine/model/template/unicode.h"

namespace vkmoe::jinja {
namespace {

const std::set<std::string, std::less<>> kStrMethods = {
    "capitalize",   "casefold",   "center",    "count",       "encode",    "endswith",     "expandtabs",   "find",
    "format",       "format_map", "index",     "isalnum",     "isalpha",   "isascii",      "isdecimal",    "isdigit",
    "isidentifier", "islower",    "isnumeric", "isprintable", "isspace",   "istitle",      "isupper",      "join",
    "ljust",        "lower",      "lstrip",    "maketrans",   "partition", "removeprefix", "removesuffix", "replace",
    "rfind",        "rindex",     "rjust",     "rpartition",  "rsplit",    "rstrip",       "split",        "splitlines",
    "startswith",   "strip",      "swapcase",  "title",       "translate", "upper",        "zfill"};

const std::string& str_arg(const Value* v, const char* method, const char* what = "argument") {
  if (!v || !v->is_str()) {
    fail(std::string(method) + "() " + what + " must be str, not " + (v ? v->type_name() : std::string("missing")));
  }
  return v->as_str();
}

// Python index normalization for [start:end] arguments in code points, as byte offsets.
size_t cp_offset(const std::vector<size_t>& starts, int64_t i) {
  const auto n = static_cast<int64_t>(starts.size()) - 1;  // starts has n+1 entries
  if (i < 0) i += n;
  i = std::clamp<int64_t>(i, 0, n);
  return starts[static_cast<size_t>(i)];
}

size_t byte_to_cp(std::string_view s, size_t byte) { return utf8_length(s.substr(0, byte)); }

// The [start:end] window of the str methods that take one (find, count, startswith...).
std::string_view window(const std::string& s, CallArgs& a, size_t first, size_t& base) {
  const Value* st = a.get(first, "start");
  const Value* en = a.get(first + 1, "end");
  base = 0;
  if ((!st || st->is_none()) && (!en || en->is_none())) return s;
  const auto starts = utf8_starts(s);
  const int64_t n = static_cast<int64_t>(starts.size()) - 1;
  const size_t b = st && !st->is_none() ? cp_offset(starts, st->as_int()) : 0;
  const size_t e = en && !en->is_none() ? cp_offset(starts, en->as_int()) : starts[static_cast<size_t>(n)];
  base = b;
  return e > b ? std::string_view(s).substr(b, e - b) : std::string_view();
}

bool is_strip_char(uint32_t cp, const std::vector<uint32_t>* chars) {
  if (!chars) return uni_is_space(cp);
  return std::find(chars->begin(), chars->end(), cp) != chars->end();
}

std::string py_strip(std::string_view s, const Value* chars_v, bool left, bool right) {
  std::vector<uint32_t> chars;
  const std::vector<uint32_t>* cs = nullptr;
  if (chars_v && !chars_v->is_none()) {
    if (!chars_v->is_str()) fail("strip arg must be None or str");
    chars = utf8_code_points(chars_v->as_str());
    cs = &chars;
  }
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      uint32_t cp;
      const size_t n = utf8_decode(s, b, cp);
      if (!is_strip_char(cp, cs)) break;
      b += n;
    }
  }
  if (right) {
    size_t keep = b;
    for (size_t p = b; p < e;) {
      uint32_t cp;
      const size_t n = utf8_decode(s, p, cp);
      p += n;
      if (!is_strip_char(cp, cs)) keep = p;
    }
    e = keep;
  }
  return std::string(s.substr(b, e - b));
}

std::vector<Value> split_space(std::string_view s, int64_t maxsplit) {
  std::vector<Value> out;
  size_t p = 0;
  auto skip_space = [&] {
    while (p < s.size()) {
      uint32_t cp;
      const size_t n = utf8_decode(s, p, cp);
      if (!uni_is_space(cp)) break;
      p += n;
    }
  };
  skip_space();
  while (p < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(std::string(s.substr(p)));
      break;
    }
    const size_t b = p;
    while (p < s.size()) {
      uint32_t cp;
      const size_t n = utf8_decode(s, p, cp);
      if (uni_is_space(cp)) break;
      p += n;
    }
    out.emplace_back(std::string(s.substr(b, p - b)));
    skip_space();
  }
  return out;
}

std::vector<Value> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit) {
  if (sep.empty()) fail("empty separator");
  std::vector<Value> out;
  size_t b = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    const size_t f = s.find(sep, b);
    if (f == std::string::npos) break;
    out.emplace_back(s.substr(b, f - b));
    b = f + sep.size();
  }
  out.emplace_back(s.substr(b));
  return out;
}

std::vector<Value> rsplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  if (maxsplit < 0) {
    return sep && !sep->is_none() ? split_sep(s, str_arg(sep, "rsplit"), -1) : split_space(s, -1);
  }
  std::vector<Value> out;
  if (sep && !sep->is_none()) {
    const std::string& sp = str_arg(sep, "rsplit");
    if (sp.empty()) fail("empty separator");
    size_t e = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (e < sp.size()) break;
      const size_t f = s.rfind(sp, e - sp.size());
      if (f == std::string::npos) break;
      out.emplace_back(s.substr(f + sp.size(), e - f - sp.size()));
      e = f;
    }
    out.emplace_back(s.substr(0, e));
  } else {
    const std::vector<uint32_t> cps = utf8_code_points(s);
    auto e = static_cast<int64_t>(cps.size());
    auto skip_space = [&] {
      while (e > 0 && uni_is_space(cps[static_cast<size_t>(e - 1)])) --e;
    };
    skip_space();
    while (e > 0) {
      if (static_cast<int64_t>(out.size()) == maxsplit) {
        out.emplace_back(utf8_encode(std::vector<uint32_t>(cps.begin(), cps.begin() + e)));
        break;
      }
      int64_t b = e;
      while (b > 0 && !uni_is_space(cps[static_cast<size_t>(b - 1)])) --b;
      out.emplace_back(utf8_encode(std::vector<uint32_t>(cps.begin() + b, cps.begin() + e)));
      e = b;
      skip_space();
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<Value> splitlines(std::string_view s, bool keepends) {
  std::vector<Value> out;
  size_t b = 0;
  for (size_t p = 0; p < s.size();) {
    uint32_t cp;
    const size_t n = utf8_decode(s, p, cp);
    if (!uni_is_linebreak(cp)) {
      p += n;
      continue;
    }
    size_t e = p + n;
    if (cp == '\r' && e < s.size() && s[e] == '\n') ++e;
    out.emplace_back(std::string(s.substr(b, (keepends ? e : p) - b)));
    b = p = e;
  }
  if (b < s.size()) out.emplace_back(std::string(s.substr(b)));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {
    int64_t done = 0;
    size_t p = 0;
    for (;;) {
      if (count >= 0 && done >= count) break;
      out += rep;
      ++done;
      if (p >= s.size()) return out;
      uint32_t cp;
      const size_t n = utf8_decode(s, p, cp);
      out.append(s, p, n);
      p += n;
    }
    out.append(s, p);
    return out;
  }
  size_t b = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    const size_t f = s.find(old, b);
    if (f == std::string::npos) break;
    out.append(s, b, f - b);
    out += rep;
    b = f + old.size();
  }
  out.append(s, b);
  return out;
}

bool all_chars(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  for (uint32_t cp : utf8_code_points(s))
    if (!pred(cp)) return false;
  return true;
}

std::string pad(const std::string& s, CallArgs& a, const char* method, int align) {
  const Value* w = a.get(0, "width");
  if (!w || !w->is_number()) fail(std::string(method) + "() width must be an integer");
  std::string fill = " ";
  if (const Value* f = a.get(1, "fillchar")) {
    fill = str_arg(f, method);
    if (utf8_length(fill) != 1) fail("The fill character must be exactly one character long");
  }
  const int64_t len = static_cast<int64_t>(utf8_length(s));
  const int64_t total = w->as_int() - len;
  if (total <= 0) return s;
  int64_t left = align < 0 ? 0 : align > 0 ? total : total / 2 + (total & w->as_int() & 1);
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < total - left; ++k) out += fill;
  return out;
}

}  // namespace

Value str_method(const Value& self, const std::string& m, CallArgs& a) {
  const std::string& s = self.as_str();
  const bool mk = self.is_markup();
  auto done = [&](Value v) {
    a.check_all_used(m);
    return v;
  };
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return done(Value(py_strip(s, a.get(0, "chars"), m != "rstrip", m != "lstrip"), mk));
  if (m == "split" || m == "rsplit") {
    const Value* sep = a.get(0, "sep");
    const int64_t maxsplit = a.get_or(1, "maxsplit", Value(-1)).as_int();
    if (m == "rsplit") return done(Value::list(rsplit(s, sep, maxsplit)));
    if (!sep || sep->is_none()) return done(Value::list(split_space(s, maxsplit)));
    return done(Value::list(split_sep(s, str_arg(sep, "split"), maxsplit)));
  }
  if (m == "startswith" || m == "endswith") {
    const Value* pre = a.get(0, m == "startswith" ? "prefix" : "suffix");
    size_t base;
    const std::string_view w = window(s, a, 1, base);
    std::vector<Value> cands;
    if (pre && pre->kind() == Kind::List && pre->seq() == Seq::Tuple)
      cands = pre->as_list().items;
    else if (pre)
      cands.push_back(*pre);
    for (const Value& c : cands) {
      const std::string& x = str_arg(&c, m.c_str(), "first arg");
      if (m == "startswith" ? w.substr(0, x.size()) == x : (w.size() >= x.size() && w.substr(w.size() - x.size()) == x))
        return done(Value::boolean(true));
    }
    return done(Value::boolean(false));
  }
  if (m == "replace") {
    const std::string& old = str_arg(a.get(0, "old"), "replace");
    const std::string& rep = str_arg(a.get(1, "new"), "replace");
    return done(Value(py_replace(s, old, rep, a.get_or(2, "count", Value(-1)).as_int()), mk));
  }
  if (m == "upper") return done(Value(str_upper(s), mk));
  if (m == "lower" || m == "casefold") return done(Value(str_lower(s), mk));
  if (m == "title") return done(Value(str_title(s), mk));
  if (m == "capitalize") return done(Value(str_capitalize(s), mk));
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    const std::string& sub = str_arg(a.get(0, "sub"), m.c_str());
    size_t base;
    const std::string_view w = window(s, a, 1, base);
    if (m == "count") {
      if (sub.empty()) return done(Value(utf8_length(w) + 1));
      int64_t n = 0;
      for (size_t f = w.find(sub); f != std::string_view::npos; f = w.find(sub, f + sub.size())) ++n;
      return done(Value(n));
    }
    const size_t f = m[0] == 'r' ? w.rfind(sub) : w.find(sub);
    if (f == std::string_view::npos) {
      if (m == "index" || m == "rindex") fail("substring not found");
      return done(Value(-1));
    }
    return done(Value(byte_to_cp(s, base + f)));
  }
  if (m == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) fail("join() takes exactly one argument");
    std::string out;
    size_t k = 0;
    for (const Value& v : py_iterate(*it)) {
      if (!v.is_str())
        fail("sequence item " + std::to_string(k) + ": expected str instance, " + v.type_name() + " found");
      if (k++) out += s;
      out += v.as_str();
    }
    return done(Value(std::move(out), mk));
  }
  if (m == "format") {
    std::string out = py_format(s, a);
    return Value(std::move(out), mk);
  }
  if (m == "splitlines")
    return done(Value::list(splitlines(s, a.get_or(0, "keepends", Value::boolean(false)).truthy())));
  if (m == "isdigit" || m == "isdecimal" || m == "isnumeric") return done(Value::boolean(all_chars(s, uni_is_digit)));
  if (m == "isalpha") return done(Value::boolean(all_chars(s, uni_is_alpha)));
  if (m == "isalnum")
    return done(Value::boolean(all_chars(s, [](uint32_t c) { return uni_is_alpha(c) || uni_is_digit(c); })));
  if (m == "isspace") return done(Value::boolean(all_chars(s, uni_is_space)));
  if (m == "isascii") return done(Value::boolean(std::all_of(s.begin(), s.end(), [](char c) { return !(c & 0x80); })));
  if (m == "isupper" || m == "islower") {
    bool cased = false;
    for (uint32_t cp : utf8_code_points(s)) {
      if (m == "isupper" ? uni_is_lower(cp) : uni_is_upper(cp)) return done(Value::boolean(false));
      cased |= uni_is_upper(cp) || uni_is_lower(cp);
    }
    return done(Value::boolean(cased));
  }
  if (m == "center") return done(Value(pad(s, a, "center", 0), mk));
  if (m == "ljust") return done(Value(pad(s, a, "ljust", -1), mk));
  if (m == "rjust") return done(Value(pad(s, a, "rjust", 1), mk));
  if (m == "zfill") {
    const int64_t w = a.get_or(0, "width", Value(0)).as_int();
    const int64_t len = static_cast<int64_t>(utf8_length(s));
    if (w <= len) return done(self);
    const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-');
    return done(Value(s.substr(0, sign) + std::string(w - len, '0') + s.substr(sign), mk));
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string& x = str_arg(a.get(0, m == "removeprefix" ? "prefix" : "suffix"), m.c_str());
    if (m == "removeprefix" && s.compare(0, x.size(), x) == 0) return done(Value(s.substr(x.size()), mk));
    if (m == "removesuffix" && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 && !x.empty())
      return done(Value(s.substr(0, s.size() - x.size()), mk));
    return done(self);
  }
  if (m == "partition" || m == "rpartition") {
    const std::string& sep = str_arg(a.get(0, "sep"), m.c_str());
    if (sep.empty()) fail("empty separator");
    const size_t f = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos) {
      return done(m == "partition" ? Value::list({Value(s), Value(""), Value("")}, Seq::Tuple)
                                   : Value::list({Value(""), Value(""), Value(s)}, Seq::Tuple));
    }
    return done(Value::list({Value(s.substr(0, f)), Value(sep), Value(s.substr(f + sep.size()))}, Seq::Tuple));
  }
  fail("unsupported str method '" + m + "'");
}

bool is_str_method(std::string_view name) { return kStrMethods.count(name) > 0; }

std::string py_format(std::string_view fmt, CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t k = 0; k < fmt.size(); ++k) {
    const char c = fmt[k];
    if (c == '}') {
      if (k + 1 < fmt.size() && fmt[k + 1] == '}')
        ++k;
      else
        fail("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (k + 1 < fmt.size() && fmt[k + 1] == '{') {
      out += '{';
      ++k;
      continue;
    }
    const size_t close = fmt.find('}', k);
    if (close == std::string_view::npos) fail("Single '{' encountered in format string");
    std::string_view field = fmt.substr(k + 1, close - k - 1);
    k = close;
    std::string_view spec, conv;
    if (size_t colon = field.find(':'); colon != std::string_view::npos)
      spec = field.substr(colon + 1), field = field.substr(0, colon);
    if (size_t bang = field.find('!'); bang != std::string_view::npos)
      conv = field.substr(bang + 1), field = field.substr(0, bang);
    const Value* v = nullptr;
    if (field.empty()) {
      v = args.get(auto_idx++, "\x01");
      if (!v) fail("Replacement index " + std::to_string(auto_idx - 1) + " out of range for positional args tuple");
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      const size_t i = std::stoul(std::string(field));
      v = i < args.pos.size() ? args.get(i, "\x01") : nullptr;
      if (!v) fail("Replacement index " + std::to_string(i) + " out of range for positional args tuple");
    } else {
      for (auto& kv : args.kw)
        if (kv.first == field) v = &kv.second;
      if (!v) fail("KeyError: '" + std::string(field) + "'");
    }
    std::string s = conv == "r" || conv == "a" ? v->repr() : v->str();
    if (!spec.empty()) {
      // [[fill]align][width] for text; [.precision]f for floats; d for ints.
      char fill = ' ', align = 0;
      size_t p = 0;
      if (spec.size() >= 2 && (spec[1] == '<' || spec[1] == '>' || spec[1] == '^'))
        fill = spec[0], align = spec[1], p = 2;
      else if (spec[0] == '<' || spec[0] == '>' || spec[0] == '^')
        align = spec[0], p = 1;
      size_t width = 0;
      while (p < spec.size() && std::isdigit(static_cast<unsigned char>(spec[p])))
        width = width * 10 + (spec[p++] - '0');
      if (p < spec.size() && spec[p] == '.' && v->is_number()) {
        int prec = 0;
        ++p;
        while (p < spec.size() && std::isdigit(static_cast<unsigned char>(spec[p])))
          prec = prec * 10 + (spec[p++] - '0');
        if (p >= spec.size() || spec[p] != 'f') fail("unsupported format spec '" + std::string(spec) + "'");
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.*f", prec, v->as_float());
        s = buf, ++p;
      } else if (p < spec.size() && spec[p] == 'd' && v->is_number()) {
        ++p;
      }
      if (p != spec.size()) fail("unsupported format spec '" + std::string(spec) + "'");
      if (!align) align = v->is_number() ? '>' : '<';
      const size_t len = utf8_length(s);
      if (width > len) {
        const size_t total = width - len;
        const size_t left = align == '<' ? 0 : align == '>' ? total : total / 2;
        s = std::string(left, fill) + s + std::string(total - left, fill);
      }
    }
    out += s;
  }
  return out;
}

}  // namespace vkmoe::jinja
