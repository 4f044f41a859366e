#include "engine/model/template/parser.h"

#include <initializer_list>
#include <set>

#include "base/error.h"
#include "engine/model/template/filters.h"
#include "engine/model/template/lexer.h"

namespace vkmoe::jinja {
namespace {

ExprPtr make(Ex kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Marks the filters and tests of an expression as resolved at render time
// (jinja2 defers unknown names inside conditional expressions).
void soften(Expr* e) {
  if (!e) return;
  e->soft = true;
  for (auto& x : e->a) soften(x.get());
  for (auto& kv : e->kwargs) soften(kv.second.get());
}

void collect_names(const Expr* e, std::set<std::string>& out) {
  if (!e) return;
  if (e->kind == Ex::Name) out.insert(e->name);
  for (const auto& x : e->a) collect_names(x.get(), out);
  for (const auto& kv : e->kwargs) collect_names(kv.second.get(), out);
}

void collect_names(const Body& body, std::set<std::string>& out) {
  for (const auto& s : body) {
    collect_names(s->e.get(), out);
    collect_names(s->cond.get(), out);
    for (const auto& x : s->conds) collect_names(x.get(), out);
    for (const auto& b : s->bodies) collect_names(b, out);
    for (const auto& x : s->values) collect_names(x.get(), out);
    for (const auto& x : s->defaults) collect_names(x.get(), out);
    for (const auto& x : s->filters) collect_names(x.get(), out);
    if (s->kind != St::Macro) {  // a nested macro has its own caller/varargs
      collect_names(s->body, out);
      collect_names(s->else_body, out);
    }
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse() {
    Body b = subparse({});
    validate(b);
    return b;
  }

 private:
  // --- token stream ---
  const Token& cur() const { return t_[p_]; }
  const Token& look(size_t k = 1) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[p_ < t_.size() - 1 ? p_++ : p_]; }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++p_;
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    ++p_;
    return true;
  }
  [[noreturn]] void error(const std::string& msg) const { template_error(cur().line, msg); }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::Data: return "template data";
      case Tok::VarBegin: return "'{{'";
      case Tok::VarEnd: return "'}}'";
      case Tok::BlockBegin: return "'{%'";
      case Tok::BlockEnd: return "'%}'";
      case Tok::Eof: return "end of template";
      case Tok::String: return "string";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
  }
  void expect_name(const char* n) {
    if (!skip_name(n)) error(std::string("expected '") + n + "', got " + describe(cur()));
  }
  std::string expect_identifier() {
    if (cur().type != Tok::Name) error("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) error("expected end of block statement '%}', got " + describe(cur()));
    ++p_;
  }

  // --- statements ---
  // Parses until a block tag whose name is in `ends` (consumed up to the name,
  // which is returned in *end) or the end of the template.
  Body subparse(std::initializer_list<const char*> ends, std::string* end = nullptr) {
    Deeper guard(*this);
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (ends.size()) {
          std::string want;
          for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
          error("unexpected end of template, expected " + want);
        }
        return body;
      }
      if (t.type == Tok::Data) {
        auto s = stmt(St::Text, t.line);
        s->name = t.text;
        body.push_back(std::move(s));
        ++p_;
      } else if (t.type == Tok::VarBegin) {
        ++p_;
        auto s = stmt(St::Print, t.line);
        s->e = parse_tuple();
        if (cur().type != Tok::VarEnd) error("expected end of print statement '}}', got " + describe(cur()));
        ++p_;
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        const Token& name = look();
        if (name.type == Tok::Name) {
          for (const char* e : ends) {
            if (name.text == e) {
              p_ += 2;
              if (end) *end = e;
              return body;
            }
          }
        }
        ++p_;
        statement(body);
      } else {
        error("unexpected " + describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> stmt(St kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // A body in a new (non-soft) frame, as jinja2's for/macro/call/filter bodies.
  template <class F>
  auto inner_frame(F f) {
    const bool soft = soft_;
    soft_ = false;
    auto r = f();
    soft_ = soft;
    return r;
  }

  void statement(Body& body) {
    if (cur().type != Tok::Name) error("tag name expected, got " + describe(cur()));
    const std::string tag = cur().text;
    const int line = cur().line;
    ++p_;
    if (tag == "if") return body.push_back(parse_if(line));
    if (tag == "for") return body.push_back(parse_for(line));
    if (tag == "set") return body.push_back(parse_set(line));
    if (tag == "macro") return body.push_back(parse_macro(line));
    if (tag == "call") return body.push_back(parse_call_block(line));
    if (tag == "filter") return body.push_back(parse_filter_block(line));
    if (tag == "with") return body.push_back(parse_with(line));
    if (tag == "generation") {
      auto s = stmt(St::Generation, line);
      expect_block_end();
      s->body = subparse({"endgeneration"});
      expect_block_end();
      return body.push_back(std::move(s));
    }
    if (tag == "break" || tag == "continue") {
      if (!loop_depth_) error("'" + tag + "' outside of a loop");
      expect_block_end();
      return body.push_back(stmt(tag == "break" ? St::Break : St::Continue, line));
    }
    if (tag == "print") {
      auto s = stmt(St::Print, line);
      s->e = parse_tuple();
      expect_block_end();
      return body.push_back(std::move(s));
    }
    static const std::set<std::string> kUnsupported = {"include",    "extends", "import", "from",     "block",
                                                       "autoescape", "do",      "trans",  "pluralize"};
    --p_;
    if (kUnsupported.count(tag)) error("unsupported tag '" + tag + "'");
    error("unknown tag '" + tag + "'");
  }

  std::unique_ptr<Stmt> parse_if(int line) {
    auto s = stmt(St::If, line);
    const bool soft = soft_;
    soft_ = true;
    for (;;) {
      s->conds.push_back(parse_tuple(/*condexpr=*/false));
      expect_block_end();
      std::string end;
      s->bodies.push_back(subparse({"elif", "else", "endif"}, &end));
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        s->else_body = subparse({"endif"});
      }
      expect_block_end();
      break;
    }
    soft_ = soft;
    return s;
  }

  void parse_targets(Stmt& s, const char* end_name) {
    // Names, optionally a tuple "a, b" or "(a, b)".
    const bool paren = skip_op("(");
    for (;;) {
      s.targets.push_back(expect_identifier());
      if (!skip_op(",")) break;
      s.unpack = true;
      if ((end_name && is_name(end_name)) || is_op("=") || is_op(")")) break;
    }
    if (paren) {
      expect_op(")");
      s.unpack = true;
    }
  }

  std::unique_ptr<Stmt> parse_for(int line) {
    auto s = stmt(St::For, line);
    parse_targets(*s, "in");
    expect_name("in");
    s->e = parse_tuple(/*condexpr=*/false, "recursive");
    inner_frame([&] {
      if (skip_name("if")) s->cond = parse_expression();
      if (is_name("recursive")) error("unsupported construct: recursive for loop");
      expect_block_end();
      ++loop_depth_;
      std::string end;
      s->body = subparse({"endfor", "else"}, &end);
      --loop_depth_;
      if (end == "else") {
        expect_block_end();
        s->else_body = subparse({"endfor"});
      }
      expect_block_end();
      return 0;
    });
    return s;
  }

  std::unique_ptr<Stmt> parse_set(int line) {
    auto s = stmt(St::Set, line);
    if (cur().type == Tok::Name && look().type == Tok::Op && look().text == ".") {
      s->name = next().text;
      ++p_;
      s->attr = expect_identifier();
    } else {
      parse_targets(*s, nullptr);
    }
    if (skip_op("=")) {
      s->e = parse_tuple();
      expect_block_end();
      return s;
    }
    if (!s->attr.empty() && !is_op("|") && cur().type != Tok::BlockEnd)
      error("expected '=' after 'set " + s->name + "." + s->attr + "', got " + describe(cur()));
    s->kind = St::SetBlock;
    parse_filters(s->filters);
    expect_block_end();
    s->body = inner_frame([&] { return subparse({"endset"}); });
    expect_block_end();
    return s;
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      s.params.push_back(expect_identifier());
      if (skip_op("=")) {
        s.defaults.push_back(parse_expression());
      } else if (!s.defaults.empty()) {
        error("non-default argument follows default argument");
      }
    }
    expect_op(")");
  }

  std::unique_ptr<Stmt> parse_macro(int line) {
    auto s = stmt(St::Macro, line);
    s->name = expect_identifier();
    inner_frame([&] {
      const int loops = loop_depth_;
      loop_depth_ = 0;
      parse_signature(*s);
      expect_block_end();
      s->body = subparse({"endmacro"});
      expect_block_end();
      loop_depth_ = loops;
      return 0;
    });
    std::set<std::string> names;
    collect_names(s->body, names);
    s->uses_caller = names.count("caller");
    s->uses_varargs = names.count("varargs");
    s->uses_kwargs = names.count("kwargs");
    return s;
  }

  std::unique_ptr<Stmt> parse_call_block(int line) {
    auto s = stmt(St::CallBlock, line);
    if (is_op("(")) parse_signature(*s);
    s->e = parse_expression();
    if (s->e->kind != Ex::Call) error("expected a call after 'call'");
    inner_frame([&] {
      const int loops = loop_depth_;
      loop_depth_ = 0;
      expect_block_end();
      s->body = subparse({"endcall"});
      expect_block_end();
      loop_depth_ = loops;
      return 0;
    });
    return s;
  }

  std::unique_ptr<Stmt> parse_filter_block(int line) {
    auto s = stmt(St::FilterBlock, line);
    parse_filters(s->filters, /*start_inline=*/true);
    expect_block_end();
    s->body = inner_frame([&] { return subparse({"endfilter"}); });
    expect_block_end();
    return s;
  }

  std::unique_ptr<Stmt> parse_with(int line) {
    auto s = stmt(St::With, line);
    while (cur().type != Tok::BlockEnd) {
      if (!s->targets.empty()) expect_op(",");
      s->targets.push_back(expect_identifier());
      expect_op("=");
      s->values.push_back(parse_expression());
    }
    expect_block_end();
    s->body = inner_frame([&] { return subparse({"endwith"}); });
    expect_block_end();
    return s;
  }

  // --- expressions (jinja2's precedence, lowest first) ---
  ExprPtr parse_tuple(bool condexpr = true, const char* extra_end = nullptr, bool explicit_parens = false) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) expect_op(",");
      if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")") || (extra_end && is_name(extra_end)))
        break;
      items.push_back(condexpr ? parse_expression() : parse_or());
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) error("expected an expression, got " + describe(cur()));
    }
    auto e = make(Ex::Tuple, line);
    e->a = std::move(items);
    return e;
  }

  ExprPtr parse_expression() { return parse_condexpr(); }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      auto c = make(Ex::CondExpr, line);
      c->a.push_back(parse_or());
      c->a.push_back(std::move(e));
      c->a.push_back(skip_name("else") ? parse_condexpr() : nullptr);
      soften(c.get());
      e = std::move(c);
      line = cur().line;
    }
    return e;
  }

  ExprPtr binary(Ex kind, ExprPtr l, ExprPtr r, int line, std::string name = "") {
    auto e = make(kind, line);
    e->name = std::move(name);
    e->a.push_back(std::move(l));
    e->a.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      l = binary(Ex::Or, std::move(l), parse_and(), line);
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      l = binary(Ex::And, std::move(l), parse_not(), line);
    }
    return l;
  }

  ExprPtr parse_not() {
    Deeper guard(*this);
    if (is_name("not")) {
      auto e = make(Ex::Not, next().line);
      e->a.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
        p_ += 2;
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Ex::Compare, line);
        cmp->a.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->a.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      l = binary(Ex::BinOp, std::move(l), parse_concat(), t.line, t.text);
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const int line = next().line;
      l = binary(Ex::BinOp, std::move(l), parse_math2(), line, "~");
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      l = binary(Ex::BinOp, std::move(l), parse_pow(), t.line, t.text);
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary();
    while (is_op("**")) {
      const int line = next().line;
      l = binary(Ex::BinOp, std::move(l), parse_unary(), line, "**");
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    Deeper guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = make(t.text == "-" ? Ex::Neg : Ex::Pos, t.line);
      e->a.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    if (t.type == Tok::Name) {
      ++p_;
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto e = make(Ex::Const, t.line);
        e->value = Value::boolean(t.text == "true" || t.text == "True");
        return e;
      }
      if (t.text == "none" || t.text == "None") {
        auto e = make(Ex::Const, t.line);
        e->value = Value::none();
        return e;
      }
      auto e = make(Ex::Name, t.line);
      e->name = t.text;
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      const int line = t.line;
      while (cur().type == Tok::String) s += next().text;
      auto e = make(Ex::Const, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      ++p_;
      auto e = make(Ex::Const, t.line);
      e->value = t.type == Tok::Int ? Value(t.i) : Value(t.f);
      return e;
    }
    if (is_op("(")) {
      ++p_;
      ExprPtr e = parse_tuple(true, nullptr, /*explicit_parens=*/true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      auto e = make(Ex::List, next().line);
      while (!is_op("]")) {
        if (!e->a.empty()) expect_op(",");
        if (is_op("]")) break;
        e->a.push_back(parse_expression());
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      auto e = make(Ex::Dict, next().line);
      while (!is_op("}")) {
        if (!e->a.empty()) expect_op(",");
        if (is_op("}")) break;
        e->a.push_back(parse_expression());
        expect_op(":");
        e->a.push_back(parse_expression());
      }
      expect_op("}");
      return e;
    }
    error("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".") || is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        ++p_;
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& a = next();
      if (a.type == Tok::Name) {
        auto e = make(Ex::GetAttr, t.line);
        e->name = a.text;
        e->a.push_back(std::move(obj));
        return e;
      }
      if (a.type != Tok::Int) template_error(a.line, "expected name or number after '.'");
      auto e = make(Ex::GetItem, t.line);
      auto k = make(Ex::Const, a.line);
      k->value = Value(a.i);
      e->a.push_back(std::move(obj));
      e->a.push_back(std::move(k));
      return e;
    }
    // '[': an index, a slice, or a tuple of them
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed(obj));
      if (args.back()->kind == Ex::Slice) {
        expect_op("]");
        return std::move(args.back());
      }
    }
    expect_op("]");
    if (args.empty()) template_error(t.line, "expected a subscript expression");
    auto e = make(Ex::GetItem, t.line);
    e->a.push_back(std::move(obj));
    if (args.size() == 1) {
      e->a.push_back(std::move(args[0]));
    } else {
      auto tup = make(Ex::Tuple, t.line);
      tup->a = std::move(args);
      e->a.push_back(std::move(tup));
    }
    return e;
  }

  // One subscript: an expression, or a slice (which takes `obj` as its operand).
  ExprPtr parse_subscribed(ExprPtr& obj) {
    const int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression();
      if (!is_op(":")) return start;
    }
    ++p_;  // ':'
    auto e = make(Ex::Slice, line);
    e->a.push_back(std::move(obj));
    e->a.push_back(std::move(start));
    e->a.push_back(is_op(":") || is_op("]") || is_op(",") ? nullptr : parse_expression());
    if (skip_op(":")) {
      e->a.push_back(is_op("]") || is_op(",") ? nullptr : parse_expression());
    } else {
      e->a.push_back(nullptr);
    }
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool need_comma = false;
    while (!is_op(")")) {
      if (need_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*") || is_op("**")) error("unsupported construct: *args / **kwargs in a call");
      if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
        std::string key = next().text;
        ++p_;
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!e.kwargs.empty()) error("positional argument follows keyword argument");
        e.a.push_back(parse_expression());
      }
      need_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Ex::Call, cur().line);
    e->a.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_identifier();
    while (skip_op(".")) name += "." + expect_identifier();
    return name;
  }

  // jinja2 rejects unknown filters and tests at compile time, except inside
  // if statements and conditional expressions (soft), where they fail when run.
  static void validate(const Expr* e) {
    if (!e) return;
    if ((e->kind == Ex::Filter && !e->soft && !is_jinja2_filter(e->name)) ||
        (e->kind == Ex::Test && !e->soft && !is_jinja2_test(e->name))) {
      template_error(e->line,
                     std::string("no ") + (e->kind == Ex::Filter ? "filter" : "test") + " named '" + e->name + "'");
    }
    for (const auto& x : e->a) validate(x.get());
    for (const auto& kv : e->kwargs) validate(kv.second.get());
  }
  static void validate(const Body& body) {
    for (const auto& s : body) {
      validate(s->e.get());
      validate(s->cond.get());
      for (const auto& x : s->conds) validate(x.get());
      for (const auto& b : s->bodies) validate(b);
      for (const auto& x : s->values) validate(x.get());
      for (const auto& x : s->defaults) validate(x.get());
      for (const auto& x : s->filters) validate(x.get());
      validate(s->body);
      validate(s->else_body);
    }
  }

  ExprPtr parse_filter(ExprPtr in) {
    auto e = make(Ex::Filter, cur().line);
    e->name = dotted_name();
    e->a.push_back(std::move(in));
    if (is_op("(")) parse_call_args(*e);
    e->soft = soft_;
    return e;
  }

  // Filters of a filter block or block set ("| a | b(1)"), each with a null input.
  void parse_filters(std::vector<ExprPtr>& out, bool start_inline = false) {
    while (start_inline || is_op("|")) {
      if (!start_inline) ++p_;
      start_inline = false;
      out.push_back(parse_filter(nullptr));
    }
  }

  ExprPtr parse_test(ExprPtr in) {
    const int line = next().line;  // 'is'
    const bool negated = skip_name("not");
    auto e = make(Ex::Test, line);
    e->name = dotted_name();
    e->a.push_back(std::move(in));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                cur().type == Tok::Float || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("you cannot chain multiple tests with 'is'");
      e->a.push_back(parse_postfix(parse_primary()));
    }
    e->soft = soft_;
    if (!negated) return e;
    auto n = make(Ex::Not, line);
    n->a.push_back(std::move(e));
    return n;
  }

  // Bounds the recursion of nested expressions and blocks (hostile templates).
  struct Deeper {
    explicit Deeper(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) p_.error("expression or block nesting too deep");
    }
    ~Deeper() { --p_.depth_; }
    Parser& p_;
  };
  static constexpr int kMaxParseDepth = 100;

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  bool soft_ = false;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace vkmoe::jinja
