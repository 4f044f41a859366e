#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace vkmoe {

struct EmbeddedShader {
  const char* name;
  const uint32_t* code;
  size_t words;
};

// All SPIR-V modules compiled from shaders/ at build time.
const std::vector<EmbeddedShader>& embedded_shaders();
// nullptr when no shader has that name.
const EmbeddedShader* find_shader(std::string_view name);

}  // namespace vkmoe
