#include "engine/model/template/renderer.h"

#include <ctime>

#include "base/error.h"
#include "engine/model/template/filters.h"

namespace vkmoe::jinja {
namespace {

constexpr int kMaxDepth = 100;         // nested macro calls
constexpr int64_t kMaxRange = 100000;  // jinja2 sandbox's MAX_RANGE
constexpr size_t kMaxOutput = 256u << 20;

Value range_fn(CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3 || !a.kw.empty()) fail("range() takes 1 to 3 positional arguments");
  for (const Value& v : a.pos) {
    if (v.is_undefined()) v.fail_undefined();
    if (v.kind() != Kind::Int && v.kind() != Kind::Bool)
      fail("'" + v.type_name() + "' object cannot be interpreted as an integer");
  }
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int(), stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange)
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    items.emplace_back(v);
  }
  return Value::list(std::move(items), Seq::Range);
}

DictObj kwargs_dict(CallArgs& a, const char* callee) {
  DictObj d;
  if (a.pos.size() > 1) fail(std::string(callee) + "() takes at most 1 positional argument");
  if (!a.pos.empty()) {
    if (a.pos[0].kind() != Kind::Dict) fail(std::string(callee) + "() positional argument must be a mapping");
    d = a.pos[0].as_dict();
  }
  for (auto& [k, v] : a.kw) d.set(Value(k), v);
  return d;
}

std::string strftime_tm(const std::string& fmt, const std::tm& t) {
  if (fmt.empty()) return "";
  std::string buf(256, '\0');
  for (;;) {
    const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &t);
    if (n > 0 || buf.size() > 4096) return buf.substr(0, n);
    buf.resize(buf.size() * 4);
  }
}

}  // namespace

Value* Renderer::Scope::find(const std::string& name) {
  for (auto& kv : vars)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

void Renderer::Scope::set(const std::string& name, Value v) {
  if (Value* old = find(name))
    *old = std::move(v);
  else
    vars.emplace_back(name, std::move(v));
}

Renderer::Enter::Enter(Renderer& r, Scope* parent) : r_(r), s_(std::make_unique<Scope>()), saved_(r.scope_) {
  s_->parent = parent;
  r.scope_ = s_.get();
}

Renderer::Enter::~Enter() {
  r_.scope_ = saved_;
  if (s_->pinned) r_.pinned_.push_back(std::move(s_));
}

Renderer::Renderer(std::vector<std::pair<std::string, Value>> vars, std::optional<std::tm> now) : now_(now) {
  auto& g = globals_;
  g.set("range", Value::func("range", range_fn));
  g.set("namespace", Value::func("namespace", [this](CallArgs& a) {
          namespaces_.push_back(Value::object("Namespace", kwargs_dict(a, "namespace")));
          return namespaces_.back();
        }));
  g.set("dict", Value::func("dict", [](CallArgs& a) { return Value::dict(kwargs_dict(a, "dict")); }));
  g.set("raise_exception", Value::func("raise_exception", [](CallArgs& a) -> Value {
          const Value* msg = a.get(0, "message");
          fail("raise_exception: " + (msg ? msg->str() : std::string()));
        }));
  g.set("strftime_now", Value::func("strftime_now", [this](CallArgs& a) {
          const Value* fmt = a.get(0, "format");
          a.check_all_used("strftime_now");
          if (!fmt || !fmt->is_str()) fail("strftime_now() argument must be str");
          std::tm t{};
          if (now_) {
            t = *now_;
          } else {
            const std::time_t now = std::time(nullptr);
            localtime_r(&now, &t);
          }
          return Value(strftime_tm(fmt->as_str(), t));
        }));
  top_.parent = &globals_;
  for (auto& [k, v] : vars) top_.set(k, std::move(v));
}

Renderer::~Renderer() {
  for (Value& ns : namespaces_) ns.as_object().attrs.items.clear();
}

std::string Renderer::render(const Body& body) {
  std::string out;
  RenderBudget budget;
  try {
    exec(body, out);
  } catch (const RenderError& e) {
    template_error(e.line, e.msg);
  }
  return out;
}

namespace {
void emit(std::string& out, const std::string& text) {  // output counts against the render's budget
  RenderBudget::charge_bytes(text.size());
  out += text;
}
}  // namespace

Renderer::Flow Renderer::exec(const Body& body, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec(const Stmt& s, std::string& out) {
  try {
    switch (s.kind) {
      case St::Text: emit(out, s.name); break;
      case St::Print: emit(out, eval(*s.e).str()); break;
      case St::If:
        for (size_t k = 0; k < s.conds.size(); ++k) {
          if (eval(*s.conds[k]).truthy()) return exec(s.bodies[k], out);
        }
        return exec(s.else_body, out);
      case St::For: exec_for(s, out); break;
      case St::Set: exec_set(s, eval(*s.e)); break;
      case St::SetBlock: {
        std::string text = render_scoped(s.body);
        exec_set(s, apply_filters(s.filters, Value(std::move(text))));
        break;
      }
      case St::FilterBlock: {
        std::string text = render_scoped(s.body);
        emit(out, apply_filters(s.filters, Value(std::move(text))).str());
        break;
      }
      case St::Macro:
        scope_->set(s.name, make_macro(s, s.body, s.name, s.uses_caller, s.uses_varargs, s.uses_kwargs));
        break;
      case St::CallBlock: {
        const Expr& call_expr = *s.e;
        Value callee = eval(*call_expr.a[0]);
        CallArgs args = eval_args(call_expr, 1);
        args.kw.emplace_back("caller", make_macro(s, s.body, "caller", false, false, false));
        emit(out, call(callee, args).str());
        break;
      }
      case St::With: {
        std::vector<Value> values;
        for (const auto& v : s.values) values.push_back(eval(*v));
        Enter inner(*this, scope_);
        for (size_t k = 0; k < s.targets.size(); ++k) scope_->set(s.targets[k], values[k]);
        return exec(s.body, out);
      }
      case St::Generation: return exec(s.body, out);
      case St::Break: return Flow::Break;
      case St::Continue: return Flow::Continue;
    }
  } catch (RenderError& e) {
    if (!e.line) e.line = s.line;
    throw;
  }
  if (out.size() > kMaxOutput) fail("rendered text exceeds 256 MiB");
  return Flow::Normal;
}

std::string Renderer::render_scoped(const Body& body) {
  std::string out;
  Enter inner(*this, scope_);
  exec(body, out);
  return out;
}

Value Renderer::apply_filters(const std::vector<ExprPtr>& filters, Value v) {
  for (const auto& f : filters) {
    CallArgs args = eval_args(*f, 1);
    v = apply_filter(f->name, v, args);
  }
  return v;
}

namespace {
void unpack_into(const std::vector<std::string>& targets, bool unpack, const Value& v,
                 const std::function<void(const std::string&, Value)>& set) {
  if (!unpack) return set(targets[0], v);
  std::vector<Value> parts = py_iterate(v);
  if (parts.size() < targets.size())
    fail("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
         std::to_string(parts.size()) + ")");
  if (parts.size() > targets.size())
    fail("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  for (size_t k = 0; k < targets.size(); ++k) set(targets[k], parts[k]);
}
}  // namespace

void Renderer::exec_set(const Stmt& s, Value v) {
  if (!s.attr.empty()) {
    Value ns = lookup(s.name);
    if (ns.kind() != Kind::Object || ns.as_object().type != "Namespace")
      fail("cannot assign attribute on non-namespace object '" + s.name + "'");
    ns.as_object().attrs.set(Value(s.attr), std::move(v));
    return;
  }
  unpack_into(s.targets, s.unpack, v, [&](const std::string& name, Value x) { scope_->set(name, std::move(x)); });
}

namespace {
// The keys of a loop variable, built once rather than per iteration.
struct LoopKeys {
  Value index{"index"}, index0{"index0"}, revindex{"revindex"}, revindex0{"revindex0"}, first{"first"},
      last{"last"}, length{"length"}, depth{"depth"}, depth0{"depth0"}, previtem{"previtem"},
      nextitem{"nextitem"}, cycle{"cycle"};
};
const LoopKeys& loop_keys() {
  static const LoopKeys keys;
  return keys;
}
}  // namespace

void Renderer::exec_for(const Stmt& s, std::string& out) {
  const Value seq = eval(*s.e);
  std::vector<Value> items = py_iterate(seq);
  Scope* outer = scope_;
  auto bind = [&](const Value& item) {
    unpack_into(s.targets, s.unpack, item, [&](const std::string& name, Value x) { scope_->set(name, std::move(x)); });
  };
  if (s.cond) {  // {% for x in seq if cond %}: filtered before the loop counts
    std::vector<Value> kept;
    for (const Value& item : items) {
      Enter iter(*this, outer);
      bind(item);
      if (eval(*s.cond).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const size_t n = items.size();
  for (size_t k = 0; k < n; ++k) {
    RenderBudget::charge_step();
    Enter iter(*this, outer);
    DictObj loop;
    const auto i = static_cast<int64_t>(k);
    const auto len = static_cast<int64_t>(n);
    const LoopKeys& key = loop_keys();
    loop.items = {{key.index, Value(i + 1)},
                  {key.index0, Value(i)},
                  {key.revindex, Value(len - i)},
                  {key.revindex0, Value(len - i - 1)},
                  {key.first, Value::boolean(k == 0)},
                  {key.last, Value::boolean(k + 1 == n)},
                  {key.length, Value(len)},
                  {key.depth, Value(1)},
                  {key.depth0, Value(0)},
                  {key.previtem, k ? items[k - 1] : Value::undefined("there is no previous item")},
                  {key.nextitem, k + 1 < n ? items[k + 1] : Value::undefined("there is no next item")}};
    loop.items.emplace_back(key.cycle, Value::func("cycle", [k](CallArgs& a) -> Value {
                              if (a.pos.empty()) fail("no items for cycling given");
                              return a.pos[k % a.pos.size()];
                            }));
    scope_->set("loop", Value::object("LoopContext", std::move(loop)));
    bind(items[k]);
    if (exec(s.body, out) == Flow::Break) break;
  }
  if (n == 0) exec(s.else_body, out);
}

Value Renderer::make_macro(const Stmt& s, const Body& body, const std::string& name, bool uses_caller,
                           bool uses_varargs, bool uses_kwargs) {
  const Stmt* def = &s;
  const Body* b = &body;
  Scope* closure = scope_;
  for (Scope* sc = closure; sc; sc = sc->parent) sc->pinned = true;
  return Value::func(name, [this, def, b, name, closure, uses_caller, uses_varargs, uses_kwargs](CallArgs& a) {
    if (++depth_ > kMaxDepth) {
      --depth_;
      fail("macro calls nested too deeply");
    }
    Enter call_scope(*this, closure);
    Scope* sc = call_scope.scope();
    const auto& params = def->params;
    const size_t n_defaults = def->defaults.size();
    if (a.pos.size() > params.size() && !uses_varargs)
      fail("macro '" + name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    std::vector<bool> bound(params.size());
    for (size_t k = 0; k < a.pos.size() && k < params.size(); ++k) sc->set(params[k], a.pos[k]), bound[k] = true;
    DictObj extra_kw;
    Value caller;
    for (auto& [key, v] : a.kw) {
      size_t k = 0;
      while (k < params.size() && params[k] != key) ++k;
      if (k < params.size()) {
        if (bound[k]) fail("macro '" + name + "' got multiple values for argument '" + key + "'");
        sc->set(key, v), bound[k] = true;
      } else if (key == "caller" && uses_caller) {
        caller = v;
      } else if (uses_kwargs) {
        extra_kw.set(Value(key), v);
      } else {
        fail("macro '" + name + "' takes no keyword argument '" + key + "'");
      }
    }
    try {
      for (size_t k = 0; k < params.size(); ++k) {
        if (bound[k]) continue;
        const size_t first_default = params.size() - n_defaults;
        sc->set(params[k], k >= first_default ? eval(*def->defaults[k - first_default])
                                              : Value::undefined("parameter '" + params[k] + "' was not provided"));
      }
      if (uses_varargs) {
        std::vector<Value> rest;
        for (size_t k = params.size(); k < a.pos.size(); ++k) rest.push_back(a.pos[k]);
        sc->set("varargs", Value::list(std::move(rest), Seq::Tuple));
      }
      if (uses_kwargs) sc->set("kwargs", Value::dict(std::move(extra_kw)));
      if (uses_caller) sc->set("caller", caller);
      std::string out;
      exec(*b, out);
      --depth_;
      return Value(std::move(out));
    } catch (...) {
      --depth_;
      throw;
    }
  });
}

Value Renderer::lookup(const std::string& name) {
  for (Scope* sc = scope_; sc; sc = sc->parent) {
    if (Value* v = sc->find(name)) return *v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  if (callee.kind() == Kind::Func) return callee.as_func().fn(args);
  if (callee.is_undefined()) callee.fail_undefined();
  fail("'" + callee.type_name() + "' object is not callable");
}

}  // namespace vkmoe::jinja
