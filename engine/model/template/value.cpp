#include "engine/model/template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "engine/model/template/unicode.h"

namespace vkmoe::jinja {

void fail(std::string msg) { throw RenderError{std::move(msg)}; }

namespace {
thread_local RenderBudget* t_budget = nullptr;
}

RenderBudget::RenderBudget() : saved_(t_budget) { t_budget = this; }
RenderBudget::~RenderBudget() { t_budget = saved_; }

void RenderBudget::charge_step() {
  if (t_budget && ++t_budget->steps_ > kMaxSteps)
    fail("the template runs too long (over " + std::to_string(kMaxSteps) + " steps)");
}

void RenderBudget::charge_bytes(uint64_t n) {
  if (t_budget && (t_budget->bytes_ += n) > kMaxBytes)
    fail("the template builds too much text (over " + std::to_string(kMaxBytes >> 20) + " MiB of strings and lists)");
}

void template_error(int line, const std::string& msg) {
  // One line of valid UTF-8: control characters and stray bytes escaped, long messages cut.
  constexpr size_t kMax = 400;
  std::string text;
  for (size_t p = 0; p < msg.size();) {
    if (text.size() >= kMax) {
      text += "...";
      break;
    }
    uint32_t cp;
    const size_t n = utf8_decode(msg, p, cp);
    const bool stray = cp >= 0xDC80 && cp <= 0xDCFF;
    if (cp < 0x20 || cp == 0x7F || stray) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", stray ? cp - 0xDC00 : cp);
      text += buf;
    } else {
      text.append(msg, p, n);
    }
    p += n;
  }
  throw Error("chat template line " + std::to_string(line) + ": " + text);
}

namespace {
struct UndefObj {
  std::string hint;
  bool security = false;
};
}  // namespace

Value Value::undefined(std::string hint, bool security) {
  Value v;
  v.p_ = std::make_shared<UndefObj>(UndefObj{std::move(hint), security});
  return v;
}

Value Value::boolean(bool b) {
  Value v(Kind::Bool);
  v.i_ = b;
  return v;
}

Value::Value(std::string s, bool markup) : kind_(Kind::Str), markup_(markup) {
  RenderBudget::charge_bytes(s.size());
  p_ = std::make_shared<std::string>(std::move(s));
}

namespace {
uint32_t depth_of(const Value& v) {
  if (v.kind() == Kind::List) return v.as_list().depth;
  if (v.kind() == Kind::Dict) return v.as_dict().depth;
  return 0;
}

uint32_t checked_depth(uint32_t child) {
  if (child >= kMaxNesting) fail("value nested too deeply (over " + std::to_string(kMaxNesting) + " levels)");
  return child + 1;
}
}  // namespace

Value Value::list(std::vector<Value> items, Seq seq) {
  RenderBudget::charge_bytes(items.size() * 64);  // a copied item costs more than its bytes
  uint32_t d = 0;
  for (const Value& x : items) d = std::max(d, depth_of(x));
  Value v(Kind::List);
  auto l = std::make_shared<ListObj>(ListObj{std::move(items), seq});
  l->depth = checked_depth(d);
  v.p_ = std::move(l);
  return v;
}

Value Value::dict(DictObj d) {
  uint32_t depth = 0;
  for (const auto& [k, x] : d.items) depth = std::max({depth, depth_of(k), depth_of(x)});
  d.depth = checked_depth(depth);
  Value v(Kind::Dict);
  v.p_ = std::make_shared<DictObj>(std::move(d));
  return v;
}

Value Value::object(std::string type, DictObj attrs) {
  Value v(Kind::Object);
  v.p_ = std::make_shared<ObjectObj>(std::move(type), std::move(attrs));
  return v;
}

ObjectObj::~ObjectObj() {
  // Attributes of objects freed while this one is being freed wait in
  // `pending` instead of being freed recursively.
  thread_local std::vector<DictObj> pending;
  thread_local bool draining = false;
  if (draining) {
    pending.push_back(std::move(attrs));
    return;
  }
  draining = true;
  attrs.items.clear();
  while (!pending.empty()) {
    DictObj d = std::move(pending.back());
    pending.pop_back();
    d.items.clear();
  }
  draining = false;
}

thread_local int RecursionGuard::depth_ = 0;

RecursionGuard::RecursionGuard() {
  if (++depth_ > static_cast<int>(2 * kMaxNesting)) {
    --depth_;
    fail("value nested too deeply or contains itself");
  }
}

Value Value::func(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v(Kind::Func);
  v.p_ = std::make_shared<FuncObj>(FuncObj{std::move(name), std::move(fn)});
  return v;
}

namespace {
template <class J>
Value value_from_json(const J& j) {
  switch (j.type()) {
    case J::value_t::null: return Value::none();
    case J::value_t::boolean: return Value::boolean(j.template get<bool>());
    case J::value_t::number_integer: return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case J::value_t::number_float: return Value(j.template get<double>());
    case J::value_t::string: return Value(j.template get<std::string>());
    case J::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(value_from_json(e));
      return Value::list(std::move(items));
    }
    case J::value_t::object: {
      DictObj d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(Value(it.key()), value_from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default: fail("binary JSON values are not supported");
  }
}
}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }

Seq Value::seq() const { return as_list().seq; }

std::string Value::undefined_hint() const {
  if (!p_) return "value is undefined";
  return std::static_pointer_cast<UndefObj>(p_)->hint;
}

bool Value::undefined_is_security() const { return p_ && std::static_pointer_cast<UndefObj>(p_)->security; }

void Value::fail_undefined() const { fail(undefined_hint()); }

Value Value::with_markup(bool m) const {
  Value v = *this;
  v.markup_ = m && kind_ == Kind::Str;
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0;
    case Kind::Str: return !as_str().empty();
    case Kind::List:
      if (seq() == Seq::Generator) return true;
      return !as_list().items.empty();
    case Kind::Dict: return !as_dict().items.empty();
    default: return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Str: return markup_ ? "Markup" : "str";
    case Kind::List:
      switch (seq()) {
        case Seq::List: return "list";
        case Seq::Tuple: return "tuple";
        case Seq::Generator: return "generator";
        case Seq::DictKeys: return "dict_keys";
        case Seq::DictValues: return "dict_values";
        case Seq::DictItems: return "dict_items";
        case Seq::Range: return "range";
      }
      return "list";
    case Kind::Dict: return "dict";
    case Kind::Object: return as_object().type;
    case Kind::Func: return "function";
  }
  return "object";
}

std::string py_float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e[+-]XX
  std::string sign;
  if (sci[0] == '-') sign = "-", sci.erase(0, 1);
  const size_t e = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits;
  for (size_t k = 0; k < e; ++k)
    if (sci[k] != '.') digits += sci[k];
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(-decpt, '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out = digits + std::string(decpt - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return sign + out;
}

namespace {

std::string str_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t p = 0; p < s.size();) {
    uint32_t cp;
    const size_t n = utf8_decode(s, p, cp);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp >= 0x20 && cp < 0x7F) {
      out += static_cast<char>(cp);
    } else if (cp >= 0x80 && uni_is_printable(cp)) {
      out.append(s.substr(p, n));
    } else {
      char buf[16];
      if (cp <= 0xFF)
        std::snprintf(buf, sizeof buf, "\\x%02x", cp);
      else if (cp <= 0xFFFF)
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", cp);
      out += buf;
    }
    p += n;
  }
  out += quote;
  return out;
}

std::string join_repr(const std::vector<Value>& items, size_t from = 0) {
  std::string out;
  for (size_t k = from; k < items.size(); ++k) {
    if (k > from) out += ", ";
    out += items[k].repr();
  }
  return out;
}

}  // namespace

std::string Value::repr() const {
  RecursionGuard guard;
  switch (kind_) {
    case Kind::Str: return markup_ ? "Markup(" + str_repr(as_str()) + ")" : str_repr(as_str());
    case Kind::List: {
      const ListObj& l = as_list();
      switch (l.seq) {
        case Seq::List: return "[" + join_repr(l.items) + "]";
        case Seq::Tuple: return "(" + join_repr(l.items) + (l.items.size() == 1 ? ",)" : ")");
        case Seq::Generator: return "<generator object>";
        case Seq::DictKeys: return "dict_keys([" + join_repr(l.items) + "])";
        case Seq::DictValues: return "dict_values([" + join_repr(l.items) + "])";
        case Seq::DictItems: return "dict_items([" + join_repr(l.items) + "])";
        case Seq::Range: {
          // Items are the range's values; a range prints its bounds.
          if (l.items.empty()) return "range(0, 0)";
          const int64_t a = l.items.front().as_int(), b = l.items.back().as_int();
          const int64_t step = l.items.size() > 1 ? l.items[1].as_int() - a : 1;
          if (step == 1) return "range(" + std::to_string(a) + ", " + std::to_string(b + 1) + ")";
          return "range(" + std::to_string(a) + ", " + std::to_string(b + step) + ", " + std::to_string(step) + ")";
        }
      }
      return "[]";
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case Kind::Object: {
      const ObjectObj& o = as_object();
      if (o.type == "Namespace") return "<Namespace " + Value::dict(o.attrs).repr() + ">";
      if (o.type == "LoopContext") {
        const Value* i = o.attrs.find("index");
        const Value* n = o.attrs.find("length");
        return "<LoopContext " + (i ? i->str() : "?") + "/" + (n ? n->str() : "?") + ">";
      }
      return "<" + o.type + " object>";
    }
    case Kind::Func: return "<function " + as_func().name + ">";
    case Kind::Undefined: return "Undefined";
    default: return str();
  }
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return i_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return py_float_repr(f_);
    case Kind::Str: return as_str();
    default: return repr();
  }
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

const Value* DictObj::find(const Value& key) const {
  if (key.is_str()) return find(std::string_view(key.as_str()));
  for (const auto& [k, v] : items)
    if (py_eq(k, key)) return &v;
  return nullptr;
}

const Value* DictObj::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_str() && k.as_str() == key) return &v;
  return nullptr;
}

void DictObj::set(const Value& key, Value v) {
  for (auto& kv : items) {
    if (py_eq(kv.first, key)) {
      kv.second = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(size_t i, std::string_view name) {
  used_pos.resize(pos.size());
  used_kw.resize(kw.size());
  if (i < pos.size()) {
    used_pos[i] = true;
    return &pos[i];
  }
  for (size_t k = 0; k < kw.size(); ++k) {
    if (kw[k].first == name) {
      used_kw[k] = true;
      return &kw[k].second;
    }
  }
  return nullptr;
}

Value CallArgs::get_or(size_t i, std::string_view name, Value dflt) {
  const Value* v = get(i, name);
  return v ? *v : dflt;
}

void CallArgs::check_all_used(std::string_view callee) {
  used_pos.resize(pos.size());
  used_kw.resize(kw.size());
  for (size_t k = 0; k < pos.size(); ++k)
    if (!used_pos[k]) fail(std::string(callee) + "() got too many positional arguments");
  for (size_t k = 0; k < kw.size(); ++k)
    if (!used_kw[k]) fail(std::string(callee) + "() got an unexpected keyword argument '" + kw[k].first + "'");
}

bool py_eq(const Value& a, const Value& b) {
  RecursionGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::Str: return a.as_str() == b.as_str();
    case Kind::List: {
      const ListObj &x = a.as_list(), &y = b.as_list();
      if (&x == &y) return true;
      if (x.seq != y.seq || x.seq == Seq::Generator || x.items.size() != y.items.size()) return false;
      for (size_t k = 0; k < x.items.size(); ++k)
        if (!py_eq(x.items[k], y.items[k])) return false;
      return true;
    }
    case Kind::Dict: {
      const DictObj &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !py_eq(v, *w)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool py_lt(const Value& a, const Value& b) {
  RecursionGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float || b.kind() == Kind::Float) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_str() && b.is_str()) return a.as_str() < b.as_str();  // UTF-8 order is code point order
  if (a.kind() == Kind::List && b.kind() == Kind::List && a.seq() == b.seq() &&
      (a.seq() == Seq::List || a.seq() == Seq::Tuple)) {
    const auto &x = a.as_list().items, &y = b.as_list().items;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (!py_eq(x[k], y[k])) return py_lt(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::vector<Value> py_iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      if (v.undefined_is_security()) v.fail_undefined();
      return {};
    case Kind::Str: {
      std::vector<Value> out;
      const std::string& s = v.as_str();
      for (size_t p = 0; p < s.size();) {
        uint32_t cp;
        const size_t n = utf8_decode(s, p, cp);
        out.emplace_back(s.substr(p, n));
        p += n;
      }
      return out;
    }
    case Kind::List: {
      ListObj& l = v.list_obj();
      if (l.seq != Seq::Generator) return l.items;
      if (!l.error.empty()) fail(l.error);
      std::vector<Value> rest(l.items.begin() + static_cast<std::ptrdiff_t>(l.pos), l.items.end());
      l.pos = l.items.size();
      return rest;
    }
    case Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
      return keys;
    }
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined: return 0;
    case Kind::Str: return utf8_length(v.as_str());
    case Kind::List:
      if (v.seq() == Seq::Generator) break;
      return v.as_list().items.size();
    case Kind::Dict: return v.as_dict().items.size();
    default: break;
  }
  fail("object of type '" + v.type_name() + "' has no len()");
}

}  // namespace vkmoe::jinja
