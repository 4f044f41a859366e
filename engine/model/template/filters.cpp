#include "engine/model/template/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "engine/model/template/access.h"
#include "engine/model/template/ops.h"
#include "engine/model/template/unicode.h"

namespace vkmoe::jinja {
namespace {

using Names = std::set<std::string, std::less<>>;

const Names kFilters = {"abs",    "attr",       "batch",       "capitalize", "center",   "count",
                        "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
                        "first",  "float",      "forceescape", "format",     "groupby",  "indent",
                        "int",    "items",      "join",        "last",       "length",   "list",
                        "lower",  "map",        "max",         "min",        "pprint",   "random",
                        "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
                        "select", "selectattr", "slice",       "sort",       "string",   "striptags",
                        "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
                        "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};

const Names kTests = {
    "boolean",  "callable", "defined",  "divisibleby", "eq",          "equalto", "escaped", "even",
    "false",    "filter",   "float",    "ge",          "greaterthan", "gt",      "in",      "integer",
    "iterable", "le",       "lessthan", "lower",       "lt",          "mapping", "ne",      "none",
    "number",   "odd",      "sameas",   "sequence",    "string",      "test",    "true",    "undefined",
    "upper",    "==",       "!=",       "<",           "<=",          ">",       ">="};

Value generator(std::vector<Value> items) { return Value::list(std::move(items), Seq::Generator); }

// jinja2's make_attrgetter: "a.b.0" looked up item-first at each step.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  for (;;) {
    const size_t e = path.find('.', b);
    const std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = get_item(cur, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

std::string need_str_arg(CallArgs& a, size_t i, const char* name, const char* filter) {
  const Value* v = a.get(i, name);
  if (!v) fail(std::string(filter) + "(): missing argument '" + name + "'");
  return v->str();
}

// Key for case-insensitive sorting/uniqueness (jinja2's ignore_case).
Value fold(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_str()) return Value(str_lower(v.as_str()));
  return v;
}

// sort/min/max/unique key: the item or its attribute(s), folded.
Value sort_key(const Value& item, const Value* attribute, bool case_sensitive) {
  if (!attribute || attribute->is_none()) return fold(item, case_sensitive);
  if (attribute->is_str() && attribute->as_str().find(',') != std::string::npos) {
    std::vector<Value> parts;
    const std::string& s = attribute->as_str();
    size_t b = 0;
    for (;;) {
      const size_t e = s.find(',', b);
      parts.push_back(fold(attr_path(item, s.substr(b, e == std::string::npos ? e : e - b)), case_sensitive));
      if (e == std::string::npos) break;
      b = e + 1;
    }
    return Value::list(std::move(parts));
  }
  return fold(attr_path(item, attribute->str()), case_sensitive);
}

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
bool parse_int(std::string s, int64_t base, int64_t& out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t p = 0;
  while (p < s.size() && std::isspace(static_cast<unsigned char>(s[p]))) ++p;
  std::string digits;
  bool neg = false;
  if (p < s.size() && (s[p] == '+' || s[p] == '-')) neg = s[p++] == '-';
  for (; p < s.size(); ++p) {
    if (s[p] == '_' && !digits.empty() && p + 1 < s.size() && s[p + 1] != '_') continue;
    digits += s[p];
  }
  if (digits.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
  if (*end || errno || !std::isalnum(static_cast<unsigned char>(digits[0]))) return false;
  out = neg ? -v : v;
  return true;
}

bool parse_float(const std::string& s, double& out) {
  std::string t;
  for (char c : s)
    if (c != '_') t += c;
  size_t b = 0, e = t.size();
  while (b < e && std::isspace(static_cast<unsigned char>(t[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(t[e - 1]))) --e;
  t = t.substr(b, e - b);
  if (t.empty()) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return *end == 0 && !(t.size() > 1 && (t[0] == '0') && (t[1] == 'x' || t[1] == 'X'));
}

Value to_int(const Value& v, const Value& dflt, int64_t base) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_str()) {
    int64_t i;
    if (parse_int(v.as_str(), base, i)) return Value(i);
    double f;
    if (parse_float(v.as_str(), f) && std::isfinite(f)) return Value(static_cast<int64_t>(f));
    return dflt;
  }
  if (v.kind() == Kind::Float) {
    if (!std::isfinite(v.as_float())) fail("cannot convert float infinity or NaN to integer");
    return Value(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_number()) return Value(v.as_int());
  return dflt;
}

Value to_float(const Value& v, const Value& dflt) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_number()) return Value(v.as_float());
  double f;
  if (v.is_str() && parse_float(v.as_str(), f)) return Value(f);
  return dflt;
}

std::string indent_text(const Value& in, CallArgs& a) {
  const Value width = a.get_or(0, "width", Value(4));
  const bool first = a.get_or(1, "first", Value::boolean(false)).truthy();
  const bool blank = a.get_or(2, "blank", Value::boolean(false)).truthy();
  const std::string ind = width.is_str() ? width.as_str() : std::string(std::max<int64_t>(0, width.as_int()), ' ');
  CallArgs none;
  std::vector<Value> lines = get_attr(Value(in.str() + "\n"), "splitlines").as_func().fn(none).as_list().items;
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k].as_str();
  } else if (!lines.empty()) {
    rv = lines[0].as_str();
    for (size_t k = 1; k < lines.size(); ++k) {
      const std::string& l = lines[k].as_str();
      rv += "\n" + (l.empty() ? l : ind + l);
    }
  }
  if (first) rv = ind + rv;
  return rv;
}

std::string tojson(const Value& in, CallArgs& a) {
  JsonOptions opt;
  opt.ensure_ascii = a.get_or(0, "ensure_ascii", Value::boolean(false)).truthy();
  const Value indent = a.get_or(1, "indent", Value::none());
  const Value seps = a.get_or(2, "separators", Value::none());
  opt.sort_keys = a.get_or(3, "sort_keys", Value::boolean(false)).truthy();
  a.check_all_used("tojson");
  if (indent.is_undefined()) indent.fail_undefined();
  if (!indent.is_none()) {
    if (!indent.is_str() && indent.kind() != Kind::Int && indent.kind() != Kind::Bool)
      fail("tojson indent must be an int or a str, not " + indent.type_name());
    opt.has_indent = true;
    opt.indent = indent.is_str() ? indent.as_str() : std::string(std::max<int64_t>(0, indent.as_int()), ' ');
    opt.item_sep = ",";
  }
  if (!seps.is_none()) {
    std::vector<Value> s = py_iterate(seps);
    if (s.size() != 2) fail("tojson separators must be a pair");
    opt.item_sep = s[0].str(), opt.key_sep = s[1].str();
  }
  return json_dumps(in, opt);
}

std::vector<Value> filter_items(const Value& in, CallArgs& a, bool select, bool by_attr) {
  // select/reject(test, args...) and selectattr/rejectattr(attr, test, args...)
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty()) fail("missing attribute name");
    attr = a.pos[next++].str();
  }
  std::string test;
  if (next < a.pos.size()) test = a.pos[next++].str();
  CallArgs targs;
  targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(next), a.pos.end());
  targs.kw = a.kw;
  std::vector<Value> out;
  if (!in.truthy()) return out;  // jinja2 skips empty and None inputs
  for (const Value& item : py_iterate(in)) {
    const Value v = by_attr ? attr_path(item, attr) : item;
    CallArgs ta = targs;
    const bool ok = test.empty() ? v.truthy() : apply_test(test, v, ta);
    if (ok == select) out.push_back(item);
  }
  return out;
}

Value map_items(const Value& in, CallArgs& a) {
  std::vector<Value> out;
  if (!in.truthy()) return generator({});  // jinja2 skips empty and None inputs
  const Value* attribute = nullptr;
  for (auto& kv : a.kw)
    if (kv.first == "attribute") attribute = &kv.second;
  if (attribute) {
    Value dflt;
    bool has_default = false;
    for (auto& kv : a.kw) {
      if (kv.first == "default")
        dflt = kv.second, has_default = true;
      else if (kv.first != "attribute")
        fail("map(): unexpected keyword argument '" + kv.first + "'");
    }
    for (const Value& item : py_iterate(in)) {
      Value v = attr_path(item, attribute->str());
      out.push_back(v.is_undefined() && has_default ? dflt : v);
    }
    return generator(std::move(out));
  }
  if (a.pos.empty()) fail("map requires a filter argument");
  const std::string name = a.pos[0].str();
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (const Value& item : py_iterate(in)) {
    CallArgs fa = fargs;
    out.push_back(apply_filter(name, item, fa));
  }
  return generator(std::move(out));
}

Value first_of(const Value& in) {
  if (in.kind() == Kind::List && in.seq() == Seq::Generator) {
    ListObj& l = in.list_obj();
    if (!l.error.empty()) fail(l.error);
    if (l.pos < l.items.size()) return l.items[l.pos++];
  } else {
    std::vector<Value> items = py_iterate(in);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value last_of(const Value& in) {
  if (in.kind() == Kind::List && in.seq() == Seq::Generator) fail("'generator' object is not reversible");
  if (in.kind() != Kind::Str && in.kind() != Kind::List && in.kind() != Kind::Dict && !in.is_undefined())
    fail("'" + in.type_name() + "' object is not reversible");
  std::vector<Value> items = py_iterate(in);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value min_max(const Value& in, CallArgs& a, bool want_max) {
  const bool cs = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
  const Value attr = a.get_or(1, "attribute", Value::none());
  a.check_all_used(want_max ? "max" : "min");
  std::vector<Value> items = py_iterate(in);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], &attr, cs);
  for (size_t k = 1; k < items.size(); ++k) {
    Value key = sort_key(items[k], &attr, cs);
    if (want_max ? py_lt(best_key, key) : py_lt(key, best_key)) best = k, best_key = key;
  }
  return items[best];
}

Value sorted(std::vector<Value> items, const Value* attr, bool cs, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) keyed.emplace_back(sort_key(v, attr, cs), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? py_lt(y.first, x.first) : py_lt(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

size_t word_count(const std::string& s) {
  size_t n = 0;
  bool in_word = false;
  for (uint32_t cp : utf8_code_points(s)) {
    const bool w = uni_is_alpha(cp) || uni_is_digit(cp) || cp == '_';
    n += w && !in_word;
    in_word = w;
  }
  return n;
}

}  // namespace

bool is_jinja2_filter(std::string_view name) { return kFilters.count(name) > 0; }
bool is_jinja2_test(std::string_view name) { return kTests.count(name) > 0; }

Value apply_filter(std::string_view name, const Value& in, CallArgs& a) {
  const std::string n(name);
  auto done = [&](Value v) {
    a.check_all_used(n);
    return v;
  };
  auto text = [&] {
    if (in.is_undefined() && in.undefined_is_security()) in.fail_undefined();
    return in.str();
  };
  const bool mk = in.is_markup();
  if (n == "tojson") return Value(tojson(in, a));
  if (n == "trim") {
    const Value s = Value(text(), mk);
    return get_attr(s, "strip").as_func().fn(a);
  }
  if (n == "length" || n == "count") return done(Value(py_len(in)));
  if (n == "string") return done(in.is_str() ? in : Value(text()));
  if (n == "default" || n == "d") {
    const Value dflt = a.get_or(0, "default_value", Value(""));
    const bool boolean = a.get_or(1, "boolean", Value::boolean(false)).truthy();
    a.check_all_used(n);
    if (in.is_undefined() || (boolean && !in.truthy())) return dflt;
    return in;
  }
  if (n == "upper") return done(Value(str_upper(text()), mk));
  if (n == "lower") return done(Value(str_lower(text()), mk));
  if (n == "capitalize") return done(Value(str_capitalize(text()), mk));
  if (n == "title") {
    // jinja2: each run after one of "-", whitespace, "(", "{", "[", "<" is capitalized.
    std::string out;
    bool start = true;
    for (uint32_t cp : utf8_code_points(text())) {
      const bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || uni_is_space(cp);
      if (start)
        uni_append_upper(out, cp);
      else
        uni_append_lower(out, cp);
      start = sep;
    }
    return done(Value(std::move(out), mk));
  }
  if (n == "replace") {
    const Value s = Value(text(), mk);
    return get_attr(s, "replace").as_func().fn(a);
  }
  if (n == "join") {
    const std::string sep = a.get_or(0, "d", Value("")).str();
    const Value attr = a.get_or(1, "attribute", Value::none());
    a.check_all_used(n);
    std::string out;
    size_t k = 0;
    for (const Value& v : py_iterate(in)) {
      if (k++) out += sep;
      out += (attr.is_none() ? v : attr_path(v, attr.str())).str();
    }
    return Value(std::move(out));
  }
  if (n == "first") return done(first_of(in));
  if (n == "last") return done(last_of(in));
  if (n == "list") return done(Value::list(py_iterate(in)));
  if (n == "items") {
    a.check_all_used(n);
    if (in.is_undefined()) return generator({});
    if (in.kind() != Kind::Dict) {
      Value g = generator({});
      g.list_obj().error = "Can only get item pairs from a mapping.";
      return g;
    }
    std::vector<Value> out;
    for (const auto& [k, v] : in.as_dict().items) out.push_back(Value::list({k, v}, Seq::Tuple));
    return generator(std::move(out));
  }
  if (n == "dictsort") {
    const bool cs = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
    const std::string by = a.get_or(1, "by", Value("key")).str();
    const bool reverse = a.get_or(2, "reverse", Value::boolean(false)).truthy();
    a.check_all_used(n);
    if (in.is_undefined()) in.fail_undefined();
    if (in.kind() != Kind::Dict) fail("'" + in.type_name() + "' object has no attribute 'items'");
    const Value pos(by == "value" ? 1 : 0);
    if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
    std::vector<Value> pairs;
    for (const auto& [k, v] : in.as_dict().items) pairs.push_back(Value::list({k, v}, Seq::Tuple));
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
      const Value kx = fold(get_item(x, pos), cs), ky = fold(get_item(y, pos), cs);
      return reverse ? py_lt(ky, kx) : py_lt(kx, ky);
    });
    return Value::list(std::move(pairs));
  }
  if (n == "sort") {
    const bool reverse = a.get_or(0, "reverse", Value::boolean(false)).truthy();
    const bool cs = a.get_or(1, "case_sensitive", Value::boolean(false)).truthy();
    const Value attr = a.get_or(2, "attribute", Value::none());
    a.check_all_used(n);
    return sorted(py_iterate(in), &attr, cs, reverse);
  }
  if (n == "unique") {
    const bool cs = a.get_or(0, "case_sensitive", Value::boolean(false)).truthy();
    const Value attr = a.get_or(1, "attribute", Value::none());
    a.check_all_used(n);
    std::vector<Value> seen, out;
    for (const Value& v : py_iterate(in)) {
      Value key = sort_key(v, &attr, cs);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_eq(s, key); })) {
        seen.push_back(key);
        out.push_back(v);
      }
    }
    return generator(std::move(out));
  }
  if (n == "min" || n == "max") return min_max(in, a, n == "max");
  if (n == "sum") {
    const Value attr = a.get_or(0, "attribute", Value::none());
    Value total = a.get_or(1, "start", Value(0));
    a.check_all_used(n);
    for (const Value& v : py_iterate(in)) total = py_binop("+", total, attr.is_none() ? v : attr_path(v, attr.str()));
    return total;
  }
  if (n == "reverse") {
    a.check_all_used(n);
    if (in.is_str()) {
      std::vector<uint32_t> cps = utf8_code_points(in.as_str());
      std::reverse(cps.begin(), cps.end());
      return Value(utf8_encode(cps), mk);
    }
    std::vector<Value> items = py_iterate(in);
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
  }
  if (n == "map") return map_items(in, a);
  if (n == "select" || n == "reject") return generator(filter_items(in, a, n == "select", false));
  if (n == "selectattr" || n == "rejectattr") return generator(filter_items(in, a, n == "selectattr", true));
  if (n == "safe") return done(Value(text(), true));
  if (n == "escape" || n == "e" || n == "forceescape") {
    if (mk && n != "forceescape") return done(in);
    return done(Value(html_escape(text()), true));
  }
  if (n == "indent") {
    std::string out = indent_text(in, a);
    return done(Value(std::move(out), mk));
  }
  if (n == "int") {
    const Value dflt = a.get_or(0, "default", Value(0));
    const int64_t base = a.get_or(1, "base", Value(10)).as_int();
    a.check_all_used(n);
    return to_int(in, dflt, base);
  }
  if (n == "float") {
    const Value dflt = a.get_or(0, "default", Value(0.0));
    a.check_all_used(n);
    return to_float(in, dflt);
  }
  if (n == "abs") {
    a.check_all_used(n);
    if (!in.is_number()) fail("bad operand type for abs(): '" + in.type_name() + "'");
    return in.kind() == Kind::Float ? Value(std::fabs(in.as_float()))
                                    : Value(static_cast<int64_t>(std::llabs(in.as_int())));
  }
  if (n == "round") {
    const int64_t prec = a.get_or(0, "precision", Value(0)).as_int();
    const std::string method = a.get_or(1, "method", Value("common")).str();
    a.check_all_used(n);
    if (!in.is_number()) fail("round() needs a number, not " + in.type_name());
    const double scale = std::pow(10.0, static_cast<double>(prec));
    const double x = in.as_float() * scale;
    double r;
    if (method == "common")
      r = std::nearbyint(x);
    else if (method == "ceil")
      r = std::ceil(x);
    else if (method == "floor")
      r = std::floor(x);
    else
      fail("method must be 'common', 'ceil' or 'floor'");
    return Value(r / scale);
  }
  if (n == "center") {
    const Value s(text());
    CallArgs ca;
    ca.pos.push_back(a.get_or(0, "width", Value(80)));
    a.check_all_used(n);
    return get_attr(s, "center").as_func().fn(ca);
  }
  if (n == "wordcount") return done(Value(word_count(text())));
  if (n == "format") {
    const std::string fmt = text();
    if (!a.kw.empty()) {
      if (!a.pos.empty()) fail("can't handle positional and keyword arguments at the same time");
      DictObj d;
      for (auto& [k, v] : a.kw) d.set(Value(k), v);
      return py_binop("%", Value(fmt), Value::dict(std::move(d)));
    }
    return py_binop("%", Value(fmt), Value::list(a.pos, Seq::Tuple));
  }
  if (n == "attr") return done(get_attr(in, need_str_arg(a, 0, "name", "attr")));
  if (kFilters.count(n)) fail("unsupported filter '" + n + "'");
  fail("no filter named '" + n + "'");
}

bool apply_test(std::string_view name, const Value& in, CallArgs& a) {
  const std::string n(name);
  auto arg = [&]() -> Value {
    const Value* v = a.get(0, "other");
    if (!v) fail("test '" + n + "' needs an argument");
    a.check_all_used(n);
    return *v;
  };
  const Kind k = in.kind();
  static const Names kWithArgs = {
      "divisibleby", "in", "eq", "equalto",     "==", "ne", "!=", "lt",     "lessthan", "<",
      "le",          "<=", "gt", "greaterthan", ">",  "ge", ">=", "sameas", "filter",   "test"};
  if (!kWithArgs.count(n) && kTests.count(n)) a.check_all_used(n);
  if (n == "defined" || n == "undefined") return (k != Kind::Undefined) == (n == "defined");
  if (n == "none") return k == Kind::None;
  if (n == "string") return k == Kind::Str;
  if (n == "mapping") return k == Kind::Dict;
  if (n == "number") return in.is_number();
  if (n == "integer") return k == Kind::Int;
  if (n == "float") return k == Kind::Float;
  if (n == "boolean") return k == Kind::Bool;
  if (n == "true" || n == "false") return k == Kind::Bool && in.as_bool() == (n == "true");
  if (n == "iterable") {
    return k == Kind::Undefined || k == Kind::Str || k == Kind::List || k == Kind::Dict ||
           (k == Kind::Object && in.as_object().type == "LoopContext");
  }
  if (n == "sequence") {
    return k == Kind::Undefined || k == Kind::Str || k == Kind::Dict ||
           (k == Kind::List && (in.seq() == Seq::List || in.seq() == Seq::Tuple || in.seq() == Seq::Range));
  }
  if (n == "callable") return k == Kind::Func;
  if (n == "escaped") return in.is_markup();
  if (n == "odd" || n == "even") {
    if (!in.is_number() || k == Kind::Float) fail("test '" + n + "' needs an integer");
    return (in.as_int() % 2 != 0) == (n == "odd");
  }
  if (n == "divisibleby") {
    const Value d = arg();
    if (!in.is_number() || !d.is_number() || d.as_float() == 0) fail("divisibleby needs a non-zero number");
    return py_eq(py_binop("%", in, d), Value(0));
  }
  if (n == "lower" || n == "upper") {
    CallArgs none;
    return get_attr(Value(in.str()), n == "lower" ? "islower" : "isupper").as_func().fn(none).truthy();
  }
  if (n == "in") return py_contains(arg(), in);
  if (n == "eq" || n == "equalto" || n == "==") return py_eq(in, arg());
  if (n == "ne" || n == "!=") return !py_eq(in, arg());
  if (n == "lt" || n == "lessthan" || n == "<") return py_compare("<", in, arg());
  if (n == "le" || n == "<=") return py_compare("<=", in, arg());
  if (n == "gt" || n == "greaterthan" || n == ">") return py_compare(">", in, arg());
  if (n == "ge" || n == ">=") return py_compare(">=", in, arg());
  if (n == "sameas") {
    const Value o = arg();
    if (k != o.kind()) return false;
    if (k == Kind::List || k == Kind::Dict || k == Kind::Object || k == Kind::Func)
      return in.identity() == o.identity();
    return py_eq(in, o);
  }
  if (n == "filter") return is_jinja2_filter(arg().str());
  if (n == "test") return is_jinja2_test(arg().str());
  fail("no test named '" + n + "'");
}

}  // namespace vkmoe::jinja
