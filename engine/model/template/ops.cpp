#include "engine/model/template/ops.h"

#include <cmath>
#include <cstdio>

#include "engine/model/template/unicode.h"

namespace vkmoe::jinja {
namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  fail("unsupported operand type(s) for " + std::string(op) + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool is_float(const Value& a, const Value& b) { return a.kind() == Kind::Float || b.kind() == Kind::Float; }

std::string repeat(const std::string& s, int64_t n) {
  std::string out;
  if (n <= 0) return out;
  if (s.size() * static_cast<size_t>(n) > (64u << 20)) fail("string repetition too large");
  out.reserve(s.size() * n);
  for (int64_t k = 0; k < n; ++k) out += s;
  return out;
}

Value add(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_float(a, b)) return Value(a.as_float() + b.as_float());
    return Value(a.as_int() + b.as_int());
  }
  if (a.is_str() && b.is_str()) {
    // Markup + str escapes the str (markupsafe), and the other way round.
    if (a.is_markup() && !b.is_markup()) return Value(a.as_str() + html_escape(b.as_str()), true);
    if (b.is_markup() && !a.is_markup()) return Value(html_escape(a.as_str()) + b.as_str(), true);
    return Value(a.as_str() + b.as_str(), a.is_markup());
  }
  if (a.kind() == Kind::List && b.kind() == Kind::List && a.seq() == b.seq() &&
      (a.seq() == Seq::List || a.seq() == Seq::Tuple)) {
    std::vector<Value> items = a.as_list().items;
    items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return Value::list(std::move(items), a.seq());
  }
  if (a.is_str()) fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
  if (a.kind() == Kind::List && (a.seq() == Seq::List || a.seq() == Seq::Tuple))
    fail("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
  unsupported("+", a, b);
}

Value mul(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_float(a, b)) return Value(a.as_float() * b.as_float());
    return Value(a.as_int() * b.as_int());
  }
  const Value& seq = a.is_number() ? b : a;
  const Value& n = a.is_number() ? a : b;
  if (n.is_number() && n.kind() != Kind::Float) {
    if (seq.is_str()) return Value(repeat(seq.as_str(), n.as_int()), seq.is_markup());
    if (seq.kind() == Kind::List && (seq.seq() == Seq::List || seq.seq() == Seq::Tuple)) {
      std::vector<Value> items;
      for (int64_t k = 0; k < n.as_int(); ++k)
        items.insert(items.end(), seq.as_list().items.begin(), seq.as_list().items.end());
      return Value::list(std::move(items), seq.seq());
    }
  }
  unsupported("*", a, b);
}

double py_fmod(double x, double y) {
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return m;
}

// printf-style formatting: %s %r %d %i %f %x %% with a tuple, a dict (%(name)s) or one value.
std::string percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> pos;
  if (args.kind() == Kind::List && args.seq() == Seq::Tuple)
    pos = args.as_list().items;
  else
    pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%') {
      out += fmt[k];
      continue;
    }
    if (++k >= fmt.size()) fail("incomplete format");
    const Value* v = nullptr;
    if (fmt[k] == '(') {
      const size_t close = fmt.find(')', k);
      if (close == std::string::npos || args.kind() != Kind::Dict) fail("format requires a mapping");
      v = args.as_dict().find(std::string_view(fmt).substr(k + 1, close - k - 1));
      if (!v) fail("KeyError: " + fmt.substr(k + 1, close - k - 1));
      k = close + 1;
    }
    std::string spec;
    while (k < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[k]) != std::string_view::npos)
      spec += fmt[k++];
    if (k >= fmt.size()) fail("incomplete format");
    const char conv = fmt[k];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!v) {
      if (next >= pos.size()) fail("not enough arguments for format string");
      v = &pos[next++];
    }
    char buf[512];
    const std::string cspec = "%" + spec;
    switch (conv) {
      case 's':
      case 'r': {
        const std::string s = conv == 's' ? v->str() : v->repr();
        std::snprintf(buf, sizeof buf, (cspec + "s").c_str(), s.c_str());
        out += spec.empty() ? s : std::string(buf);
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
        if (!v->is_number())
          fail("%" + std::string(1, conv) + " format: a real number is required, not " + v->type_name());
        std::snprintf(buf, sizeof buf, (cspec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(),
                      static_cast<long long>(v->kind() == Kind::Float ? std::trunc(v->as_float()) : v->as_int()));
        out += buf;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v->is_number()) fail("must be real number, not " + v->type_name());
        std::snprintf(buf, sizeof buf, (cspec + conv).c_str(), v->as_float());
        out += buf;
        break;
      default: fail(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (args.kind() != Kind::Dict && next < pos.size()) fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace

Value py_neg(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.kind() == Kind::Float) return Value(-v.as_float());
  if (v.is_number()) return Value(-v.as_int());
  fail("bad operand type for unary -: '" + v.type_name() + "'");
}

Value py_binop(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    if (a.kind() == Kind::Undefined && a.undefined_is_security()) a.fail_undefined();
    return Value(a.str() + b.str());
  }
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (op == "+") return add(a, b);
  if (op == "*") return mul(a, b);
  if (op == "%" && a.is_str()) return Value(percent_format(a.as_str(), b), a.is_markup());
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  if (op == "-") {
    if (is_float(a, b)) return Value(a.as_float() - b.as_float());
    return Value(a.as_int() - b.as_int());
  }
  if (op == "/") {
    if (b.as_float() == 0) fail("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (b.as_float() == 0) fail(op == "%" ? "modulo by zero" : "integer division or modulo by zero");
    if (is_float(a, b)) {
      const double x = a.as_float(), y = b.as_float();
      if (op == "%") return Value(py_fmod(x, y));
      const double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
      double fd = std::floor(div);
      if (div - fd > 0.5) fd += 1.0;
      return Value(fd);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) --q, r += y;
    return op == "%" ? Value(r) : Value(q);
  }
  if (op == "**") {
    if (!is_float(a, b) && b.as_int() >= 0) {
      int64_t r = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; --e) r *= base;
      return Value(r);
    }
    return Value(std::pow(a.as_float(), b.as_float()));
  }
  fail("unknown operator " + std::string(op));
}

bool py_contains(const Value& c, const Value& item) {
  switch (c.kind()) {
    case Kind::Str:
      if (!item.is_str()) fail("'in <string>' requires string as left operand, not " + item.type_name());
      return c.as_str().find(item.as_str()) != std::string::npos;
    case Kind::Dict: return c.as_dict().find(item) != nullptr;
    case Kind::Undefined: return false;
    case Kind::List:
      for (const Value& v : py_iterate(c))
        if (py_eq(v, item)) return true;
      return false;
    default: fail("argument of type '" + c.type_name() + "' is not iterable");
  }
}

bool py_compare(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return py_eq(a, b);
  if (op == "!=") return !py_eq(a, b);
  if (op == "in") return py_contains(b, a);
  if (op == "notin") return !py_contains(b, a);
  if (op == "<") return py_lt(a, b);
  if (op == ">") return py_lt(b, a);
  if (op == "<=") return py_lt(a, b) || py_eq(a, b);
  if (op == ">=") return py_lt(b, a) || py_eq(a, b);
  fail("unknown comparison " + std::string(op));
}

}  // namespace vkmoe::jinja
