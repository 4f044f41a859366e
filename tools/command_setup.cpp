#include "tools/command_setup.h"

#include <climits>
#include <cstdio>

#include "engine/model/tensor_check.h"
#include "engine/vulkan/vk_gemm.h"
#include "planner/planner.h"

namespace vkmoe {

const std::vector<OptionSpec> kModelOptions = {{"model", "-m"}, {"set"}, {"preset"}, {"check-tensors", "", true}};
const std::vector<OptionSpec> kEngineOptions = {
    {"ctx", "-c"}, {"ubatch-size", "-ub"}, {"kv-type"}, {"gemm"}, {"backend"}, {"device"}, {"vram-budget"},
    {"moe-mode"}, {"pin-experts"}, {"predict-prefetch", "", true}, {"expert-stats", "", true},
    {"cpu-f32", "", true}, {"gpu-f32", "", true}, {"threads", "-t"}, {"poll"}, {"cpu-strict"}};

std::vector<OptionSpec> operator+(std::vector<OptionSpec> a, const std::vector<OptionSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

SynthSpec builtin_spec() {
  SynthSpec s;
  s.n_layer = 4;
  s.n_expert = 16;
  s.n_expert_used = 4;
  s.n_vocab = 2048;
  return s;
}

SynthSpec spec_from_args(const Args& a, SynthSpec base) {
  if (a.has("preset")) base = SynthSpec::preset(a.get("preset"));
  apply_synth_overrides(base, a.get("set"));
  return base;
}

namespace {

std::unique_ptr<Model> open_model(const Args& a, bool shapes_only) {
  std::string path = a.get("model");
  if (!path.empty()) {
    std::fprintf(stderr, "loading %s\n", path.c_str());
    return Model::load(path);
  }
  SynthSpec s = spec_from_args(a, builtin_spec());
  std::fprintf(stderr, "no -m given: using the built-in synthetic model (%s)\n", describe(s).c_str());
  if (shapes_only) {
    if (a.has("check-tensors")) throw Error("--check-tensors needs a model file (-m)");
    return Model::from_gguf(GgufFile::shapes_from_memory(synth_model_header(s), "<built-in synthetic model>"));
  }
  return Model::from_gguf(GgufFile::from_memory(synth_model_bytes(s), "<built-in synthetic model>"));
}

}  // namespace

std::unique_ptr<Model> load_model(const Args& a, bool shapes_only) {
  std::unique_ptr<Model> m = open_model(a, shapes_only);
  if (a.has("check-tensors"))
    check_tensor_data(m->gguf(), static_cast<int>(a.num("threads", 0, 1, kMaxThreads)));
  return m;
}

int context_size(const Args& a, const Model& m) {
  return static_cast<int>(std::min<long long>(a.num("ctx", 4096, 1, kMaxTokens), m.config().n_ctx_train));
}

int device_index(const Args& a) { return static_cast<int>(a.num("device", -1, 0, INT_MAX)); }

uint64_t vram_budget(const Args& a) { return a.has("vram-budget") ? parse_size(a.get("vram-budget")) : 0; }

EngineOptions engine_options(const Args& a, const Model& m) {
  EngineOptions o;
  o.backend = a.get("backend", "gpu");
  o.n_ctx = context_size(a, m);
  o.device = device_index(a);
  o.vram_budget = vram_budget(a);
  o.mode = parse_plan_mode(a.get("moe-mode", "auto"));
  o.predict_prefetch = a.has("predict-prefetch");
  o.expert_stats = a.has("expert-stats");
  o.threads = static_cast<int>(a.num("threads", 0, 1, kMaxThreads));
  o.cpu_q8 = !a.has("cpu-f32");
  o.gpu_q8 = a.has("gpu-f32") ? EngineOptions::GpuQ8::Off : EngineOptions::GpuQ8::Auto;
  // llama.cpp's spellings: --poll 0..100 (50 = our default of 200 us), --cpu-strict 0|1.
  if (a.has("poll")) o.placement.poll_us = 4 * a.num("poll", 50, 0, 100);
  if (a.has("cpu-strict")) o.placement.pin = static_cast<int>(a.num("cpu-strict", 1, 0, 1));
  o.pin_per_layer = static_cast<int>(a.num("pin-experts", 0, 0, INT_MAX));
  o.n_ubatch = static_cast<int>(a.num("ubatch-size", o.n_ubatch, 1, 1 << 20));
  o.kv_type = a.get("kv-type", o.kv_type);
  if (o.kv_type != "f16" && o.kv_type != "f32" && o.kv_type != "q8_0")
    throw Error("--kv-type must be f16, f32 or q8_0, got '" + o.kv_type + "'");
  o.gemm = a.get("gemm", o.gemm);
  if (!vk::gemm_path_by_name(o.gemm))
    throw Error("--gemm must be one of " + std::string(vk::kGemmPathNames) + ", got '" + o.gemm + "'");
  return o;
}

void print_model(const Model& m) {
  const ModelConfig& c = m.config();
  std::printf("model: %s, %d layers, embd %d, heads %d/%d x %d, vocab %d", c.arch.c_str(), c.n_layer,
              c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_vocab);
  if (c.is_moe()) std::printf(", experts %d/%d x ff %d", c.n_expert_used, c.n_expert, c.n_ff_exp);
  else std::printf(", ff %d", c.n_ff);
  if (c.n_ff_shexp) std::printf(", shared expert ff %d", c.n_ff_shexp);
  std::printf("\n");
}

const std::vector<OptionSpec> kSamplingOptions = {{"temp"}, {"top-k"}, {"top-p"}, {"min-p"}, {"repeat-penalty"},
                                                  {"seed"}};

SamplerParams sampler_params(const Args& a) {
  SamplerParams sp;
  sp.temperature = static_cast<float>(a.real("temp", 0.0, 0, 1e6));
  sp.top_k = static_cast<int>(a.num("top-k", 40, 0, INT_MAX));
  sp.top_p = static_cast<float>(a.real("top-p", 0.95, 0, 1));
  sp.min_p = static_cast<float>(a.real("min-p", 0.0, 0, 1));
  sp.repeat_penalty = static_cast<float>(a.real("repeat-penalty", 1.0, 1e-3, 1e3));
  sp.seed = static_cast<uint64_t>(a.num("seed", 0, 0, LLONG_MAX));
  return sp;
}

void print_startup_summary(const Model& m, const Engine& e) {
  const ModelConfig& c = m.config();
  std::string line = c.arch + " " + std::to_string(c.n_layer) + " layers";
  if (c.is_moe()) line += ", " + std::to_string(c.n_expert_used) + "/" + std::to_string(c.n_expert) + " experts";
  line += " | " + e.describe();
  if (!e.moe_mode().empty()) line += " | mode " + e.moe_mode();  // describe() gives the GPU's VRAM
  line += " | ctx " + std::to_string(e.n_ctx());
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace vkmoe
