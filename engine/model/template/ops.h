#pragma once
// Python's operators on template values: arithmetic, ~, comparisons, `in`,
// and printf-style str % args.
#include <string_view>

#include "engine/model/template/value.h"

namespace vkmoe::jinja {

Value py_binop(std::string_view op, const Value& a, const Value& b);   // + - * / // % ** ~
bool py_compare(std::string_view op, const Value& a, const Value& b);  // == != < <= > >= in notin
bool py_contains(const Value& container, const Value& item);
Value py_neg(const Value& v);

}  // namespace vkmoe::jinja
