#pragma once
// obj.name, obj[key] and obj[a:b:c] as jinja2's sandbox resolves them.
#include <string>

#include "engine/model/template/value.h"

namespace vkmoe::jinja {

// obj.name: a method, else obj[name], else an Undefined.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: the item, else an attribute, else an Undefined.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] (null parts absent).
Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

}  // namespace vkmoe::jinja
