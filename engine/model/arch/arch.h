#pragma once
// An architecture is one short file here: the hyper-parameters it reads
// beyond the common ones (model.cpp), and the program of each layer as a
// LayerSpec. Executors implement the blocks a spec names, never an
// architecture; an architecture that reuses blocks needs only its file and a
// line in registry.cpp.
#include <string>

#include "engine/model/hparams.h"
#include "engine/model/model.h"

namespace vkmoe {

struct ArchDef {
  const char* name;  // general.architecture
  // Reads the architecture's own hyper-parameters into c. The common ones
  // (sizes, heads, rope, norm epsilon, expert counts) are read before.
  void (*configure)(const Hparams& h, ModelConfig& c);
  // What layer il computes.
  LayerSpec (*layer)(const ModelConfig& c, int il);
  // Writes the keys configure() reads, for a model of config c (synth).
  void (*write)(const ModelConfig& c, GgufWriter& w);
};

const ArchDef* find_arch(const std::string& name);  // nullptr when unknown
std::string arch_names();                          // "llama, qwen3, ..."

}  // namespace vkmoe
