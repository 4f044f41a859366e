#pragma once
// Tokens to a syntax tree, following jinja2's grammar and precedence.
// Constructs outside the supported subset (include, extends, import, block,
// recursive loops, *args calls, unknown tags) throw an Error naming the
// construct and its line.
#include <string_view>

#include "engine/model/template/ast.h"

namespace vkmoe::jinja {

Body parse_template(std::string_view source);

}  // namespace vkmoe::jinja
