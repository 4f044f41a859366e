#pragma once
// Values of the template language: Python's types as jinja2 sees them
// (None, bool, int, float, str, list/tuple, dict, namespace objects, callables)
// plus jinja2's Undefined. Lists and dicts are shared and never modified in
// place (the sandbox forbids it); namespaces are shared and mutable.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vkmoe::jinja {

// A failure while rendering: becomes a vkmoe::Error naming the template line.
struct RenderError {
  std::string msg;
  int line = 0;
};
[[noreturn]] void fail(std::string msg);
// Throws the vkmoe::Error a template failure becomes: "chat template line N: msg".
[[noreturn]] void template_error(int line, const std::string& msg);

// What one render may spend: a step per expression evaluated and per loop
// iteration, and the bytes of every string and list built (a template from a
// model file must not hang or exhaust memory). A RenderBudget installs itself
// for its thread while it lives; past either limit the render fails.
class RenderBudget {
 public:
  static constexpr uint64_t kMaxSteps = 4'000'000, kMaxBytes = 128ull << 20;
  RenderBudget();
  ~RenderBudget();
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;
  static void charge_step();
  static void charge_bytes(uint64_t n);

 private:
  uint64_t steps_ = 0, bytes_ = 0;
  RenderBudget* saved_;
};

class Value;
struct CallArgs;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, Str, List, Dict, Object, Func };

// Python sequence flavours sharing the list representation; they differ in
// repr, len() and JSON support. A Generator is consumed by iteration.
enum class Seq : uint8_t { List, Tuple, Generator, DictKeys, DictValues, DictItems, Range };

struct ListObj;
struct DictObj;
struct ObjectObj;
struct FuncObj;

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint, bool security = false);
  static Value none() { return Value(Kind::None); }
  static Value boolean(bool b);
  Value(int64_t i) : kind_(Kind::Int), i_(i) {}
  Value(int i) : kind_(Kind::Int), i_(i) {}
  Value(size_t i) : kind_(Kind::Int), i_(static_cast<int64_t>(i)) {}
  Value(double f) : kind_(Kind::Float), f_(f) {}
  Value(std::string s, bool markup = false);
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(std::vector<Value> items, Seq seq = Seq::List);
  static Value dict(DictObj d);
  static Value object(std::string type, DictObj attrs);
  static Value func(std::string name, std::function<Value(CallArgs&)> fn);
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_str() const { return kind_ == Kind::Str; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_markup() const { return markup_; }
  bool truthy() const;

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(f_) : i_; }
  double as_float() const { return kind_ == Kind::Float ? f_ : static_cast<double>(i_); }
  const std::string& as_str() const { return *std::static_pointer_cast<const std::string>(p_); }
  const ListObj& as_list() const { return *std::static_pointer_cast<ListObj>(p_); }
  ListObj& list_obj() const { return *std::static_pointer_cast<ListObj>(p_); }
  const DictObj& as_dict() const { return *std::static_pointer_cast<DictObj>(p_); }
  ObjectObj& as_object() const { return *std::static_pointer_cast<ObjectObj>(p_); }
  const FuncObj& as_func() const { return *std::static_pointer_cast<FuncObj>(p_); }
  Seq seq() const;  // for lists
  const void* identity() const { return p_.get(); }

  // Undefined: the error raised when it is used (jinja2's UndefinedError message).
  std::string undefined_hint() const;
  bool undefined_is_security() const;
  [[noreturn]] void fail_undefined() const;

  std::string str() const;        // Python str()
  std::string repr() const;       // Python repr()
  std::string type_name() const;  // "str", "int", "dict", "NoneType" ...
  Value with_markup(bool m) const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<void> p_;
};

// Lists and dicts are built whole, so their nesting depth is known and
// capped (kMaxNesting); objects count as leaves.
constexpr uint32_t kMaxNesting = 256;

struct ListObj {
  std::vector<Value> items;
  Seq seq = Seq::List;
  size_t pos = 0;     // Generator: items already consumed
  std::string error;  // Generator: fails when iterated (jinja2 generators fail lazily)
  uint32_t depth = 1;
};

// Insertion-ordered mapping, keys compared with Python's ==.
struct DictObj {
  std::vector<std::pair<Value, Value>> items;
  uint32_t depth = 1;  // set by Value::dict
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  void set(const Value& key, Value v);
};

// namespace() objects and loop contexts: named attributes.
// Objects are mutable and may form long chains or cycles: their destructor
// releases chains iteratively (no deep recursion), and the Renderer clears
// the namespaces it made when it ends (no leaked cycles).
struct ObjectObj {
  std::string type;  // "Namespace", "LoopContext"
  DictObj attrs;
  ObjectObj(std::string t, DictObj a) : type(std::move(t)), attrs(std::move(a)) {}
  ObjectObj(const ObjectObj&) = delete;
  ObjectObj& operator=(const ObjectObj&) = delete;
  ~ObjectObj();
};

// Guards recursion over values (repr, JSON, comparisons): fails past a depth
// that only cyclic or hostile data reaches.
class RecursionGuard {
 public:
  RecursionGuard();
  ~RecursionGuard() { --depth_; }
  RecursionGuard(const RecursionGuard&) = delete;
  RecursionGuard& operator=(const RecursionGuard&) = delete;

 private:
  static thread_local int depth_;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument at position i or named name (nullptr when absent); marks it used.
  const Value* get(size_t i, std::string_view name);
  Value get_or(size_t i, std::string_view name, Value dflt);
  // Fails when arguments were passed that no get() asked for.
  void check_all_used(std::string_view callee);
  std::vector<bool> used_pos, used_kw;
};

struct FuncObj {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

// Python semantics.
bool py_eq(const Value& a, const Value& b);
bool py_lt(const Value& a, const Value& b);     // fails on unorderable types
std::vector<Value> py_iterate(const Value& v);  // for loops, list(), join...
size_t py_len(const Value& v);
std::string py_float_repr(double f);
std::string html_escape(std::string_view s);

// json.dumps as transformers' tojson calls it.
struct JsonOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // the indent unit (json.dumps: a number of spaces or a string)
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonOptions& opt);

}  // namespace vkmoe::jinja
