#pragma once
// Runs a parsed template: jinja2's scoping (a for-loop iteration and a macro
// call are scopes, if is not), loop contexts, macros and call blocks, and the
// globals transformers provides (raise_exception, strftime_now, namespace,
// range, dict).
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/template/ast.h"

namespace vkmoe::jinja {

class Renderer {
 public:
  // vars: the template's variables; now: the time strftime_now() formats
  // (nullopt: the local clock).
  Renderer(std::vector<std::pair<std::string, Value>> vars, std::optional<std::tm> now);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;
  // Throws Error ("chat template line N: ...") on failure.
  std::string render(const Body& body);

 private:
  // Scopes form a stack; one a macro captured (pinned) outlives its block.
  struct Scope {
    Scope* parent = nullptr;
    std::vector<std::pair<std::string, Value>> vars;
    bool pinned = false;
    Value* find(const std::string& name);
    void set(const std::string& name, Value v);
  };
  // Enters a new scope under `parent` for its lifetime.
  class Enter {
   public:
    Enter(Renderer& r, Scope* parent);
    ~Enter();
    Enter(const Enter&) = delete;
    Enter& operator=(const Enter&) = delete;
    Scope* scope() const { return s_.get(); }

   private:
    Renderer& r_;
    std::unique_ptr<Scope> s_;
    Scope* saved_;
  };
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, std::string& out);
  void exec_set(const Stmt& s, Value v);
  Value make_macro(const Stmt& s, const Body& body, const std::string& name, bool uses_caller, bool uses_varargs,
                   bool uses_kwargs);
  std::string render_scoped(const Body& body);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v);

  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  Value lookup(const std::string& name);
  Value call(const Value& callee, CallArgs& args);

  Scope globals_, top_;
  Scope* scope_ = &top_;
  std::vector<std::unique_ptr<Scope>> pinned_;
  std::vector<Value> namespaces_;  // cleared at the end: breaks cycles among them
  std::optional<std::tm> now_;
  int depth_ = 0;  // macro recursion guard
};

}  // namespace vkmoe::jinja
