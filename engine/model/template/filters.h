#pragma once
// jinja2's filters and tests.
#include <string_view>

#include "engine/model/template/value.h"

namespace vkmoe::jinja {

// Names jinja2 knows (so the parser can tell a typo from a filter we lack).
bool is_jinja2_filter(std::string_view name);
bool is_jinja2_test(std::string_view name);

Value apply_filter(std::string_view name, const Value& in, CallArgs& args);
bool apply_test(std::string_view name, const Value& in, CallArgs& args);

}  // namespace vkmoe::jinja
