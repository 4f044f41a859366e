#pragma once
// The methods of Python's str (strip, split, startswith, replace, format...)
// on UTF-8 text, indexed by code point as Python does.
#include <string>
#include <string_view>

#include "engine/model/template/value.h"

namespace vkmoe::jinja {

bool is_str_method(std::string_view name);  // any method Python's str has
// Calls self.m(args); fails for the few str methods not implemented.
Value str_method(const Value& self, const std::string& m, CallArgs& a);
// Python's str.format with positional and keyword arguments.
std::string py_format(std::string_view fmt, CallArgs& args);

}  // namespace vkmoe::jinja
