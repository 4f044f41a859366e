#include "engine/vulkan/shaders.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace vkmoe {
namespace {

// VKMOE_SHADER_DIR (shader development): DIR/NAME.spv replaces the embedded
// module NAME, so variants compiled elsewhere run without a rebuild.
const EmbeddedShader* override_shader(std::string_view name) {
  static const char* dir = std::getenv("VKMOE_SHADER_DIR");
  if (!dir || !*dir) return nullptr;
  struct Loaded {
    std::string name;
    std::vector<uint32_t> words;
    EmbeddedShader shader;
  };
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Loaded>, std::less<>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(name); it != cache.end()) return it->second ? &it->second->shader : nullptr;
  auto& slot = cache[std::string(name)];
  std::ifstream f(std::string(dir) + "/" + std::string(name) + ".spv", std::ios::binary);
  if (!f) return nullptr;
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.empty() || bytes.size() % 4 != 0) return nullptr;
  slot = std::make_unique<Loaded>();
  slot->name = std::string(name);
  slot->words.resize(bytes.size() / 4);
  std::memcpy(slot->words.data(), bytes.data(), bytes.size());
  slot->shader = {slot->name.c_str(), slot->words.data(), slot->words.size()};
  return &slot->shader;
}

}  // namespace

const EmbeddedShader* find_shader(std::string_view name) {
  if (const EmbeddedShader* o = override_shader(name)) return o;
  for (const auto& s : embedded_shaders())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace vkmoe
