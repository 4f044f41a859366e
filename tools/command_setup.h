#pragma once
// What the model-running commands (run, bench, chat, serve, plan) share: their
// common options, the model they load (-m, or the built-in synthetic one),
// engine and sampling settings, and the one-line summary each prints first.
#include <memory>
#include <string>
#include <vector>

#include "engine/forward/engine_select.h"
#include "engine/model/model.h"
#include "engine/sample/sampler.h"
#include "tools/cli_args.h"
#include "tools/synth_model.h"

namespace vkmoe {

constexpr long long kMaxTokens = 1 << 30, kMaxThreads = 1024;

extern const std::vector<OptionSpec> kModelOptions;     // -m, --set, --preset
extern const std::vector<OptionSpec> kEngineOptions;    // -c, -ub, --backend, --vram-budget, ...
extern const std::vector<OptionSpec> kSamplingOptions;  // --temp, --top-k, --top-p, --min-p, ...
std::vector<OptionSpec> operator+(std::vector<OptionSpec> a, const std::vector<OptionSpec>& b);

SynthSpec builtin_spec();  // the model of run/bench/chat/serve without -m
// `base`, or --preset, with the --set overrides applied.
SynthSpec spec_from_args(const Args& a, SynthSpec base);
// shapes_only: without -m, the synthetic model's shapes without weights (plan).
std::unique_ptr<Model> load_model(const Args& a, bool shapes_only = false);
int context_size(const Args& a, const Model& m);  // -c, at most the model's training context
int device_index(const Args& a);
uint64_t vram_budget(const Args& a);  // --vram-budget; absent or 0: the device's free memory
EngineOptions engine_options(const Args& a, const Model& m);
SamplerParams sampler_params(const Args& a);

// "model: qwen3moe, 4 layers, ..." on stdout.
void print_model(const Model& m);
// One line on stderr: model, backend, VRAM, expert placement and context.
void print_startup_summary(const Model& m, const Engine& e);

}  // namespace vkmoe
