#pragma once
// Syntax tree of a parsed template.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/template/value.h"

namespace vkmoe::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class Ex : uint8_t {
  Const, Name, List, Tuple, Dict,  // Dict: args are key, value, key, value...
  GetAttr,   // a[0].name
  GetItem,   // a[0][a[1]]
  Slice,     // a[0][a[1]:a[2]:a[3]] (null parts absent)
  Call,      // a[0](args, kwargs)
  Filter,    // a[0] | name(args, kwargs); a[0] null in a filter block
  Test,      // a[0] is name(args, kwargs)
  Not, Neg, Pos, And, Or,
  BinOp,     // name: + - * / // % ** ~ (a[0], a[1])
  Compare,   // a[0] then (ops[k], a[k+1]) pairs: == != < <= > >= in notin
  CondExpr,  // a[1] if a[0] else a[2] (a[2] may be null)
};

struct Expr {
  Ex kind;
  int line = 0;
  std::string name;
  Value value;                 // Const
  std::vector<ExprPtr> a;      // operands / positional arguments (after the callee)
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
  bool soft = false;           // Filter/Test: unknown name fails at render time (jinja2 soft frames)
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class St : uint8_t {
  Text,        // name: literal text
  Print,       // {{ e }}
  If,          // conds[k] -> bodies[k]; else in else_body
  For,         // targets in e (if cond), body, else_body
  Set,         // targets = e, or name.attr = e on a namespace
  SetBlock,    // targets (or name.attr) = filters(body)
  Macro,       // name(params=defaults) body
  CallBlock,   // e is the call; params/defaults for caller; body
  FilterBlock, // filters applied to body
  With,        // targets = values; body
  Break, Continue,
  Generation,  // transformers' {% generation %}: renders body
};

struct Stmt {
  St kind;
  int line = 0;
  std::string name;     // Text: the text; Macro: name; Set: namespace name of ns.attr
  std::string attr;     // Set: attribute of ns.attr
  ExprPtr e;            // Print / For iterable / Set value / CallBlock call
  ExprPtr cond;         // For: loop filter
  std::vector<ExprPtr> conds;  // If
  std::vector<Body> bodies;    // If
  Body body, else_body;
  std::vector<std::string> targets;  // For / Set / With names (several: tuple unpacking)
  bool unpack = false;               // targets came from a tuple
  std::vector<ExprPtr> values;       // With values
  std::vector<std::string> params;   // Macro / CallBlock
  std::vector<ExprPtr> defaults;     // aligned to the last params
  std::vector<ExprPtr> filters;      // SetBlock / FilterBlock: Filter exprs with null input
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;  // Macro
};

}  // namespace vkmoe::jinja
