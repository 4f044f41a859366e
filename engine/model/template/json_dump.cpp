// json.dumps as transformers' tojson filter calls it: Python's separators,
// indent, sort_keys and ensure_ascii, floats as Python's repr.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/model/template/unicode.h"
#include "engine/model/template/value.h"

namespace vkmoe::jinja {
namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t p = 0; p < s.size();) {
    uint32_t cp;
    const size_t n = utf8_decode(s, p, cp);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buf[16];
        if (cp < 0x20) {
          std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          out += buf;
        } else if (cp < 0x80 || !ensure_ascii) {
          out.append(s.substr(p, n));
        } else if (cp < 0x10000) {
          std::snprintf(buf, sizeof buf, "\\u%04x", cp);
          out += buf;
        } else {
          const uint32_t c = cp - 0x10000;
          std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
          out += buf;
        }
      }
    }
    p += n;
  }
  out += '"';
}

std::string json_key(const Value& k, const JsonOptions& opt) {
  switch (k.kind()) {
    case Kind::Str: return k.as_str();
    case Kind::None: return "null";
    case Kind::Bool: return k.as_bool() ? "true" : "false";
    case Kind::Int: return std::to_string(k.as_int());
    case Kind::Float: return py_float_repr(k.as_float());
    default: fail("keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

void json_value(std::string& out, const Value& v, const JsonOptions& opt, int depth) {
  RecursionGuard guard;
  auto newline = [&](int d) {
    out += '\n';
    for (int k = 0; k < d; ++k) out += opt.indent;
  };
  switch (v.kind()) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.as_int()); return;
    case Kind::Float: {
      const double f = v.as_float();
      if (std::isnan(f))
        out += "NaN";
      else if (std::isinf(f))
        out += f < 0 ? "-Infinity" : "Infinity";
      else
        out += py_float_repr(f);
      return;
    }
    case Kind::Str: json_string(out, v.as_str(), opt.ensure_ascii); return;
    case Kind::List: {
      if (v.seq() != Seq::List && v.seq() != Seq::Tuple) break;
      const auto& items = v.as_list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += opt.item_sep;
        if (opt.has_indent) newline(depth + 1);
        json_value(out, items[k], opt, depth + 1);
      }
      if (opt.has_indent) newline(depth);
      out += ']';
      return;
    }
    case Kind::Dict: {
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, val] : v.as_dict().items) items.emplace_back(json_key(k, opt), &val);
      if (opt.sort_keys) {
        for (const auto& [k, val] : v.as_dict().items)
          if (!k.is_str()) fail("'<' not supported between instances of dict keys of mixed types");
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += opt.item_sep;
        if (opt.has_indent) newline(depth + 1);
        json_string(out, items[k].first, opt.ensure_ascii);
        out += opt.key_sep;
        json_value(out, *items[k].second, opt, depth + 1);
      }
      if (opt.has_indent) newline(depth);
      out += '}';
      return;
    }
    default: break;
  }
  fail("Object of type " + v.type_name() + " is not JSON serializable");
}

}  // namespace

std::string json_dumps(const Value& v, const JsonOptions& opt) {
  std::string out;
  json_value(out, v, opt, 0);
  return out;
}

}  // namespace vkmoe::jinja
