#include "engine/model/arch/arch.h"

namespace vkmoe {

extern const ArchDef kArchLlama, kArchQwen3, kArchQwen3Moe, kArchOlmoe, kArchQwen2Moe, kArchGlm4Moe, kArchGptOss,
    kArchDeepseek2;

namespace {
const ArchDef* const kArchs[] = {&kArchLlama, &kArchQwen3, &kArchQwen3Moe, &kArchOlmoe, &kArchQwen2Moe, &kArchGlm4Moe,
                                 &kArchGptOss, &kArchDeepseek2};
}  // namespace

const ArchDef* find_arch(const std::string& name) {
  for (const ArchDef* a : kArchs)
    if (name == a->name) return a;
  return nullptr;
}

std::string arch_names() {
  std::string s;
  for (const ArchDef* a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a->name);
  return s;
}

}  // namespace vkmoe
