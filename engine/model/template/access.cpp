// Attribute and item access, slicing, and the methods of list and dict, as
// jinja2's ImmutableSandboxedEnvironment resolves them: methods that modify a
// list or dict are unsafe (using them fails), a missing attribute or item is
// an Undefined that fails only when used.
#include "engine/model/template/access.h"

#include <algorithm>
#include <optional>
#include <set>

#include "engine/model/template/str_methods.h"
#include "engine/model/template/unicode.h"

namespace vkmoe::jinja {
namespace {

const std::set<std::string, std::less<>> kListMethods = {"copy", "count", "index"};
const std::set<std::string, std::less<>> kListUnsafe = {"append", "clear",  "extend",  "insert",
                                                        "pop",    "remove", "reverse", "sort"};
const std::set<std::string, std::less<>> kDictMethods = {"copy", "fromkeys", "get", "items", "keys", "values"};
const std::set<std::string, std::less<>> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};

std::string obj_desc(const Value& v) {
  if (v.is_none()) return "'None'";
  return "'" + v.type_name() + " object'";
}

Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined(obj_desc(obj) + " has no attribute '" + name + "'");
}

Value unsafe_attr(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.", true);
}

Value list_method(const Value& self, const std::string& m, CallArgs& a) {
  const auto& items = self.as_list().items;
  if (m == "copy") {
    a.check_all_used(m);
    return Value::list(items);
  }
  const Value* x = a.get(0, "value");
  a.check_all_used(m);
  if (!x) fail(m + "() takes exactly one argument");
  if (m == "count")
    return Value(
        static_cast<int64_t>(std::count_if(items.begin(), items.end(), [&](const Value& v) { return py_eq(v, *x); })));
  for (size_t k = 0; k < items.size(); ++k)
    if (py_eq(items[k], *x)) return Value(k);
  fail(x->repr() + " is not in list");
}

Value dict_method(const Value& self, const std::string& m, CallArgs& a) {
  const DictObj& d = self.as_dict();
  if (m == "get") {
    const Value* key = a.get(0, "key");
    const Value dflt = a.get_or(1, "default", Value::none());
    a.check_all_used(m);
    if (!key) fail("get expected at least 1 argument, got 0");
    const Value* v = d.find(*key);
    return v ? *v : dflt;
  }
  a.check_all_used(m);
  if (m == "copy") return Value::dict(d);
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    if (m == "items")
      out.push_back(Value::list({k, v}, Seq::Tuple));
    else
      out.push_back(m == "keys" ? k : v);
  }
  if (m == "items") return Value::list(std::move(out), Seq::DictItems);
  if (m == "keys") return Value::list(std::move(out), Seq::DictKeys);
  if (m == "values") return Value::list(std::move(out), Seq::DictValues);
  fail("unsupported dict method '" + m + "'");
}

Value bound(const Value& obj, const std::string& name, Value (*impl)(const Value&, const std::string&, CallArgs&)) {
  return Value::func(name, [obj, name, impl](CallArgs& a) { return impl(obj, name, a); });
}

// A method of obj named name, or an Undefined when there is none.
Value method_of(const Value& obj, const std::string& name) {
  // Python's special attributes (__class__...) exist on every object and are unsafe.
  if (name.size() > 4 && name.compare(0, 2, "__") == 0 && name.compare(name.size() - 2, 2, "__") == 0)
    return unsafe_attr(obj, name);
  switch (obj.kind()) {
    case Kind::Str:
      if (is_str_method(name)) return bound(obj, name, str_method);
      break;
    case Kind::List:
      if (obj.seq() != Seq::List && obj.seq() != Seq::Tuple) break;
      if (obj.seq() == Seq::List && kListUnsafe.count(name)) return unsafe_attr(obj, name);
      if (kListMethods.count(name) && (obj.seq() == Seq::List || name != "copy")) return bound(obj, name, list_method);
      break;
    case Kind::Dict:
      if (kDictUnsafe.count(name)) return unsafe_attr(obj, name);
      if (kDictMethods.count(name)) return bound(obj, name, dict_method);
      break;
    default: break;
  }
  return Value();
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) obj.fail_undefined();
  Value m = method_of(obj, name);
  if (m.kind() == Kind::Func || (m.is_undefined() && m.undefined_is_security())) return m;
  if (obj.kind() == Kind::Dict) {
    if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
  } else if (obj.kind() == Kind::Object) {
    if (const Value* v = obj.as_object().attrs.find(std::string_view(name))) return *v;
  } else if (obj.is_number()) {
    const bool f = obj.kind() == Kind::Float;
    if (name == "real") return f ? obj : Value(obj.as_int());
    if (name == "imag") return f ? Value(0.0) : Value(0);
    if (!f && name == "numerator") return Value(obj.as_int());
    if (!f && name == "denominator") return Value(1);
  }
  return missing_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.fail_undefined();
  switch (obj.kind()) {
    case Kind::Dict:
      if (const Value* v = obj.as_dict().find(key)) return *v;
      break;
    case Kind::List:
    case Kind::Str: {
      if (obj.kind() == Kind::List && obj.seq() != Seq::List && obj.seq() != Seq::Tuple && obj.seq() != Seq::Range)
        break;
      if (key.kind() != Kind::Int && key.kind() != Kind::Bool) break;
      int64_t i = key.as_int();
      if (obj.kind() == Kind::List) {
        const auto& items = obj.as_list().items;
        const auto n = static_cast<int64_t>(items.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
      } else {
        const auto starts = utf8_starts(obj.as_str());
        const auto n = static_cast<int64_t>(starts.size()) - 1;
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
          const size_t b = starts[static_cast<size_t>(i)];
          return Value(obj.as_str().substr(b, starts[static_cast<size_t>(i) + 1] - b));
        }
      }
      break;
    }
    default: break;
  }
  if (key.is_str()) {
    if (obj.kind() == Kind::Object) {
      if (const Value* v = obj.as_object().attrs.find(std::string_view(key.as_str()))) return *v;
    }
    Value m = method_of(obj, key.as_str());
    if (m.kind() == Kind::Func || (m.is_undefined() && m.undefined_is_security())) return m;
    return missing_attr(obj, key.as_str());
  }
  return Value::undefined(obj_desc(obj) + " has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  if (obj.is_undefined()) obj.fail_undefined();
  auto as_index = [](const Value* v, bool& ok) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (v->is_undefined()) v->fail_undefined();
    if (v->kind() != Kind::Int && v->kind() != Kind::Bool) ok = false;
    return v->as_int();
  };
  bool ok = true;
  const auto b = as_index(start, ok), e = as_index(stop, ok), st = as_index(step, ok);
  const bool is_seq =
      obj.kind() == Kind::Str ||
      (obj.kind() == Kind::List && (obj.seq() == Seq::List || obj.seq() == Seq::Tuple || obj.seq() == Seq::Range));
  // jinja2 compiles slices to plain Python subscripts: failures raise.
  if (!is_seq) fail("'" + obj.type_name() + "' object is not subscriptable");
  if (!ok) fail("slice indices must be integers or None or have an __index__ method");
  const int64_t s = st.value_or(1);
  if (s == 0) fail("slice step cannot be zero");
  std::vector<uint32_t> cps;
  const std::vector<Value>* items = nullptr;
  int64_t n;
  if (obj.kind() == Kind::Str) {
    cps = utf8_code_points(obj.as_str());
    n = static_cast<int64_t>(cps.size());
  } else {
    items = &obj.as_list().items;
    n = static_cast<int64_t>(items->size());
  }
  auto norm = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lo, hi);
  };
  const int64_t from = s > 0 ? norm(b, 0, 0, n) : norm(b, n - 1, -1, n - 1);
  const int64_t to = s > 0 ? norm(e, n, 0, n) : norm(e, -1, -1, n - 1);
  std::vector<int64_t> idx;
  for (int64_t k = from; s > 0 ? k < to : k > to; k += s) idx.push_back(k);
  if (obj.kind() == Kind::Str) {
    std::string out;
    for (int64_t k : idx) utf8_append(out, cps[static_cast<size_t>(k)]);
    return Value(std::move(out), obj.is_markup());
  }
  std::vector<Value> out;
  for (int64_t k : idx) out.push_back((*items)[static_cast<size_t>(k)]);
  return Value::list(std::move(out), obj.seq());
}

}  // namespace vkmoe::jinja
