// Expression evaluation of the Renderer.
#include "engine/model/template/access.h"
#include "engine/model/template/filters.h"
#include "engine/model/template/ops.h"
#include "engine/model/template/renderer.h"

namespace vkmoe::jinja {

Value Renderer::eval(const Expr& e) {
  try {
    RenderBudget::charge_step();
    return eval_inner(e);
  } catch (RenderError& err) {
    if (!err.line) err.line = e.line;
    throw;
  }
}

CallArgs Renderer::eval_args(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t k = first; k < e.a.size(); ++k) args.pos.push_back(eval(*e.a[k]));
  for (const auto& [name, x] : e.kwargs) args.kw.emplace_back(name, eval(*x));
  return args;
}

Value Renderer::eval_inner(const Expr& e) {
  switch (e.kind) {
    case Ex::Const: return e.value;
    case Ex::Name: return lookup(e.name);
    case Ex::List:
    case Ex::Tuple: {
      std::vector<Value> items;
      items.reserve(e.a.size());
      for (const auto& x : e.a) items.push_back(eval(*x));
      return Value::list(std::move(items), e.kind == Ex::Tuple ? Seq::Tuple : Seq::List);
    }
    case Ex::Dict: {
      DictObj d;
      for (size_t k = 0; k + 1 < e.a.size(); k += 2) {
        Value key = eval(*e.a[k]);
        if (key.kind() == Kind::List && key.seq() != Seq::Tuple) fail("unhashable type: '" + key.type_name() + "'");
        if (key.kind() == Kind::Dict) fail("unhashable type: 'dict'");
        d.set(key, eval(*e.a[k + 1]));
      }
      return Value::dict(std::move(d));
    }
    case Ex::GetAttr: return get_attr(eval(*e.a[0]), e.name);
    case Ex::GetItem: {
      Value obj = eval(*e.a[0]);
      return get_item(obj, eval(*e.a[1]));
    }
    case Ex::Slice: {
      Value obj = eval(*e.a[0]);
      Value parts[3];
      const Value* p[3] = {nullptr, nullptr, nullptr};
      for (int k = 0; k < 3; ++k) {
        if (e.a[k + 1]) parts[k] = eval(*e.a[k + 1]), p[k] = &parts[k];
      }
      return get_slice(obj, p[0], p[1], p[2]);
    }
    case Ex::Call: {
      Value callee = eval(*e.a[0]);
      CallArgs args = eval_args(e, 1);
      return call(callee, args);
    }
    case Ex::Filter: {
      Value in = e.a[0] ? eval(*e.a[0]) : Value();
      CallArgs args = eval_args(e, 1);
      return apply_filter(e.name, in, args);
    }
    case Ex::Test: {
      Value in = eval(*e.a[0]);
      CallArgs args = eval_args(e, 1);
      return Value::boolean(apply_test(e.name, in, args));
    }
    case Ex::Not: return Value::boolean(!eval(*e.a[0]).truthy());
    case Ex::Neg: return py_neg(eval(*e.a[0]));
    case Ex::Pos: {
      Value v = eval(*e.a[0]);
      if (v.is_undefined()) v.fail_undefined();
      if (!v.is_number()) fail("bad operand type for unary +: '" + v.type_name() + "'");
      return v.kind() == Kind::Bool ? Value(v.as_int()) : v;
    }
    case Ex::And: {
      Value l = eval(*e.a[0]);
      return l.truthy() ? eval(*e.a[1]) : l;
    }
    case Ex::Or: {
      Value l = eval(*e.a[0]);
      return l.truthy() ? l : eval(*e.a[1]);
    }
    case Ex::BinOp: {
      Value l = eval(*e.a[0]);
      Value r = eval(*e.a[1]);
      return py_binop(e.name, l, r);
    }
    case Ex::Compare: {
      Value l = eval(*e.a[0]);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value r = eval(*e.a[k + 1]);
        if (!py_compare(e.ops[k], l, r)) return Value::boolean(false);
        l = std::move(r);
      }
      return Value::boolean(true);
    }
    case Ex::CondExpr:
      if (eval(*e.a[0]).truthy()) return eval(*e.a[1]);
      if (e.a[2]) return eval(*e.a[2]);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
  }
  fail("unknown expression");
}

}  // namespace vkmoe::jinja
