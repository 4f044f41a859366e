#include "engine/vulkan/shaders.h"

namespace vkmoe {

const EmbeddedShader* find_shader(std::string_view name) {
  for (const auto& s : embedded_shaders())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace vkmoe
