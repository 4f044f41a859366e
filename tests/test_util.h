#pragma once
// Helpers shared by the tests.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/forward/cpu_forward.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/offload/plan_model.h"
#include "tools/synth_model.h"
#include "tests/seed.h"

namespace vkmoe::test {

// A small synthetic model (2 layers, 512 tokens) with `overrides` applied.
inline std::unique_ptr<Model> synth(const std::string& overrides, uint64_t seed) {
  SynthSpec s;
  s.n_layer = 2;
  s.n_vocab = 512;
  s.seed = seed;
  apply_synth_overrides(s, overrides);
  return Model::from_gguf(GgufFile::from_memory(synth_model_bytes(s), "synth:" + overrides));
}

// n tokens drawn uniformly below vocab.
inline std::vector<int32_t> random_tokens(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> p(n);
  for (auto& t : p) t = int32_t(rng() % uint32_t(vocab));
  return p;
}

// A fresh path in the temporary directory: stem, process id, a random number, ext.
inline std::string temp_path(const std::string& stem, const std::string& ext = "") {
  static std::mt19937_64 rng((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
  return (std::filesystem::temp_directory_path() /
          (stem + "_" + std::to_string(getpid()) + "_" + std::to_string(rng()) + ext))
      .string();
}

// The GGUF file `bytes` without the keys and tensors named in `drop`, plus
// whatever `add` writes (e.g. replacement values for dropped keys).
inline std::vector<uint8_t> rewrite_gguf(const std::vector<uint8_t>& bytes, const std::set<std::string>& drop,
                                         const std::function<void(GgufWriter&)>& add = {}) {
  const auto f = GgufFile::from_memory(bytes);
  GgufWriter w(f->alignment());
  w.add_all(*f, [&](const std::string& name) { return !drop.count(name); });
  if (add) add(w);
  return w.to_bytes();
}

inline int argmax(const std::vector<float>& v) { return int(std::max_element(v.begin(), v.end()) - v.begin()); }

// The plan of an unlimited budget as the GPU engine makes it with the tests'
// tiled GEMMs (which convert no activations: EngineOptions::gemm = "tiled").
inline Plan unlimited_plan(const Model& m, int n_ctx) {
  return make_plan(plan_input_for(m, n_ctx, ~0ull >> 2, GgmlType::F16, 512, /*gemm_converts_x=*/false));
}

// Budget giving `slots` expert slots per layer on top of the trunk, KV and scratch.
inline uint64_t budget_for_slots(const Model& m, int n_ctx, int slots) {
  const Plan p = unlimited_plan(m, n_ctx);
  return p.vram_bytes() - p.expert_cache_bytes + uint64_t(slots) * m.config().n_layer * p.slot_bytes;
}

// max |a - b| relative to max |b|.
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double mx = 0, scale = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    mx = std::max(mx, double(std::fabs(a[i] - b[i])));
    scale = std::max(scale, double(std::fabs(b[i])));
  }
  return mx / scale;
}

// Another forward pass's router logits differ from the reference's by
// rounding (the GPU's final logits by up to ~3e-6 of their size, on lavapipe
// and the H100, in the f32-activation tests). Where the reference's last eval routed
// closer to a tie than kRouteTieMargin, either may pick other experts (and
// fill its KV cache with their output), so GPU-vs-reference logits are not
// compared from that step on; the test says so.
constexpr float kRouteTieMargin = 2e-5f;
inline bool routes_clear_of_ties(const CpuForward& ref, const std::string& step, float margin = kRouteTieMargin) {
  if (ref.min_route_margin() >= margin) return true;
  std::printf("%s: the reference routed %.1e from a tie; logits not compared from here\n", step.c_str(),
              double(ref.min_route_margin()));
  return false;
}

}  // namespace vkmoe::test
