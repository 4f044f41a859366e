// vkmoe command-line interface.
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/forward/cpu_forward.h"
#include "base/error.h"
#include "engine/forward/engine_select.h"
#include "engine/model/model.h"
#include "engine/offload/plan_model.h"
#include "engine/sample/sampler.h"
#include "engine/vulkan/vk_gemm.h"
#include "engine/model/tokenizer.h"
#include "planner/planner.h"
#include "tools/bench_cmd.h"
#include "tools/bench_shaders.h"
#include "tools/cli_args.h"
#include "tools/synth_model.h"

using namespace vkmoe;

namespace {

const char* kUsage =
    "usage: vkmoe <command> [options]\n"
    "commands:\n"
    "  run            generate text (no -m: the built-in synthetic MoE model)\n"
    "  bench          prompt-processing and generation tokens/s, llama-bench style (see below)\n"
    "  info           Vulkan devices (and a summary of the -m model)\n"
    "  plan           where each tensor goes for a VRAM budget; takes -m, --set, --preset, -c,\n"
    "                 --device, --vram-budget, --moe-mode, --pin-experts, --capacity-ratio R\n"
    "  synth          write a synthetic GGUF model; takes -o FILE, --set, --preset\n"
    "  bench-shaders  shader microbenchmarks (GB/s, % of measured bandwidth; see its --help)\n"
    "run and bench options:\n"
    "  -m, --model FILE       GGUF model (default: built-in synthetic qwen3moe)\n"
    "  -p, --prompt TEXT      prompt (run)\n"
    "  -n, --n-predict N      tokens to generate (run; default 32)\n"
    "  -c, --ctx N            context size (default 4096 run, what the tests need bench; at most the model's)\n"
    "  -ub, --ubatch-size N   tokens per batched forward pass of the prompt (default 512)\n"
    "  --kv-type f16|f32|q8_0 KV cache element type (default f16)\n"
    "  --gemm PATH            prompt GEMM kernels: auto, tiled (f32), int8, coopmat,\n"
    "                         coopmat2 (NVIDIA; default auto)\n"
    "  --backend gpu|cpu|ref  gpu (Vulkan, default), cpu (SIMD), ref (scalar reference)\n"
    "  --device N             Vulkan device index (see `vkmoe info`)\n"
    "  --vram-budget SIZE     VRAM to use, e.g. 12GiB (default or 0: the device's free memory)\n"
    "  --moe-mode MODE        auto|resident|expert-cache|cpu-moe (default auto)\n"
    "  --predict-prefetch     prefetch predicted experts of the next layer\n"
    "  --expert-stats         print prediction accuracy, hit rate, bytes moved (and GPU time per step\n"
    "                         with VKMOE_PROFILE=1)\n"
    "  --pin-experts N        pin the N most-used experts per layer in VRAM after the prompt\n"
    "  --cpu-q8               CPU experts on Q8-quantized activations: faster, ~1% off the GPU result\n"
    "  -t, --threads N        CPU threads, 1 to 1024 (default: all cores)\n"
    "  --temp T --top-k K --top-p P --min-p P --repeat-penalty R --seed S\n"
    "                         sampling (run; default greedy)\n"
    "  --set k=v,...          synth/default-model shape (arch, n_layer, n_embd, n_expert, quant, ...)\n"
    "  --preset qwen3-30b-a3b synth/default-model preset\n"
    "bench options (each test starts on an empty context; 1 warm-up run, then -r timed runs):\n"
    "  -p, --n-prompt N,...   ppN tests: N prompt tokens in one batched eval (default 512; 0: none)\n"
    "  -n, --n-gen N,...      tgN tests: N tokens generated one at a time (default 128; 0: none)\n"
    "  -pg P,G                a ppP+tgG test: prompt then generation, t/s over both\n"
    "  -d, --n-depth N,...    run every test after N untimed context tokens (default 0)\n"
    "  -r, --repetitions N    timed runs per test (default 5)\n"
    "  -o, --output FORMAT    md (default), json, jsonl or csv (with all samples)\n";

constexpr long long kMaxTokens = 1 << 30, kMaxThreads = 1024;

// The options of each command (see kUsage).
const std::vector<OptionSpec> kModelOptions = {{"model", "-m"}, {"set"}, {"preset"}};
const std::vector<OptionSpec> kEngineOptions = {
    {"ctx", "-c"}, {"ubatch-size", "-ub"}, {"kv-type"}, {"gemm"}, {"backend"}, {"device"}, {"vram-budget"},
    {"moe-mode"}, {"pin-experts"}, {"predict-prefetch", "", true}, {"expert-stats", "", true},
    {"cpu-q8", "", true}, {"threads", "-t"}};
const std::vector<OptionSpec> kRunOptions = {{"prompt", "-p"}, {"n-predict", "-n"}, {"temp"}, {"top-k"},
                                             {"top-p"}, {"min-p"}, {"repeat-penalty"}, {"seed"}};
const std::vector<OptionSpec> kBenchOptions = {{"n-prompt", "-p"}, {"n-gen", "-n"}, {"pg", "-pg"},
                                               {"n-depth", "-d"}, {"repetitions", "-r"}, {"output", "-o"}};
const std::vector<OptionSpec> kPlanOptions = {{"ctx", "-c"}, {"device"}, {"vram-budget"},
                                              {"moe-mode"}, {"pin-experts"}, {"capacity-ratio"}};
const std::vector<OptionSpec> kSynthOptions = {{"output", "-o"}, {"set"}, {"preset"}};

std::vector<OptionSpec> operator+(std::vector<OptionSpec> a, const std::vector<OptionSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The built-in model of `run`/`bench` without -m.
SynthSpec builtin_spec() {
  SynthSpec s;
  s.n_layer = 4;
  s.n_expert = 16;
  s.n_expert_used = 4;
  s.n_vocab = 2048;
  return s;
}

// `base`, or --preset, with the --set overrides applied.
SynthSpec spec_from_args(const Args& a, SynthSpec base) {
  if (a.get("preset") == "qwen3-30b-a3b") base = SynthSpec::qwen3_30b_a3b();
  else if (a.has("preset")) throw Error("unknown preset '" + a.get("preset") + "' (qwen3-30b-a3b)");
  apply_synth_overrides(base, a.get("set"));
  return base;
}

std::unique_ptr<Model> load_model(const Args& a) {
  std::string path = a.get("model");
  if (!path.empty()) {
    std::fprintf(stderr, "loading %s\n", path.c_str());
    return Model::load(path);
  }
  SynthSpec s = spec_from_args(a, builtin_spec());
  std::fprintf(stderr, "no -m given: using the built-in synthetic model (%s)\n", describe(s).c_str());
  return Model::from_gguf(GgufFile::from_memory(synth_model_bytes(s), "<built-in synthetic model>"));
}

int context_size(const Args& a, const Model& m) {
  return static_cast<int>(std::min<long long>(a.num("ctx", 4096, 1, kMaxTokens), m.config().n_ctx_train));
}

int device_index(const Args& a) { return static_cast<int>(a.num("device", -1, 0, INT_MAX)); }

// --vram-budget; absent or 0: the device's free memory.
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
  o.cpu_q8 = a.has("cpu-q8");
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print_model(const Model& m) {
  const ModelConfig& c = m.config();
  std::printf("model: %s, %d layers, embd %d, heads %d/%d x %d, vocab %d", arch_name(c.arch), c.n_layer,
              c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_vocab);
  if (c.is_moe()) std::printf(", experts %d/%d x ff %d", c.n_expert_used, c.n_expert, c.n_ff_exp);
  else std::printf(", ff %d", c.n_ff);
  if (c.n_ff_shexp) std::printf(", shared expert ff %d", c.n_ff_shexp);
  std::printf("\n");
}

int cmd_run(const Args& a) {
  SamplerParams sp;
  sp.temperature = static_cast<float>(a.real("temp", 0.0, 0, 1e6));
  sp.top_k = static_cast<int>(a.num("top-k", 40, 0, INT_MAX));
  sp.top_p = static_cast<float>(a.real("top-p", 0.95, 0, 1));
  sp.min_p = static_cast<float>(a.real("min-p", 0.0, 0, 1));
  sp.repeat_penalty = static_cast<float>(a.real("repeat-penalty", 1.0, 1e-3, 1e3));
  sp.seed = static_cast<uint64_t>(a.num("seed", 0, 0, LLONG_MAX));
  Sampler sampler(sp);
  const std::string prompt = a.get("prompt", "Once upon a time");
  const long n_predict = static_cast<long>(a.num("n-predict", 32, 0, kMaxTokens));
  auto model = load_model(a);
  auto tok = Tokenizer::from_gguf(model->gguf());
  auto engine = make_engine(*model, engine_options(a, *model));
  std::vector<int32_t> ids = tok->encode(prompt, true);
  if (ids.empty()) throw Error("the prompt encodes to no tokens");
  if (static_cast<long>(ids.size()) + n_predict > engine->n_ctx())
    throw Error("prompt (" + std::to_string(ids.size()) + " tokens) + -n " + std::to_string(n_predict) +
                " exceeds the context of " + std::to_string(engine->n_ctx()) + "; raise --ctx");
  std::fprintf(stderr, "backend: %s\n", engine->describe().c_str());
  std::printf("%s", prompt.c_str());
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = engine->eval(ids);
  double t_prompt = seconds_since(t0);
  for (int32_t id : ids) sampler.accept(id);
  auto t1 = std::chrono::steady_clock::now();
  long generated = 0;
  for (; generated < n_predict; ++generated) {
    int32_t id = sampler.sample(logits.data(), static_cast<int>(logits.size()));
    sampler.accept(id);
    if (tok->is_eog(id)) break;
    std::printf("%s", tok->piece(id).c_str());
    std::fflush(stdout);
    if (generated + 1 < n_predict) logits = engine->eval({id});
  }
  double t_gen = seconds_since(t1);
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.2f tokens/s)\n", ids.size(), t_prompt,
               ids.size() / t_prompt);
  std::fprintf(stderr, "generation: %ld tokens in %.3f s (%.2f tokens/s)\n", generated, t_gen,
               generated > 0 ? generated / t_gen : 0.0);
  if (a.has("expert-stats")) std::fprintf(stderr, "%s", engine->stats_report().c_str());
  return 0;
}

BenchParams bench_params(const Args& a) {
  BenchParams p;
  p.n_prompt = parse_int_list(a.label("n-prompt"), a.get("n-prompt", "512"), 0, kMaxBenchTokens);
  p.n_gen = parse_int_list(a.label("n-gen"), a.get("n-gen", "128"), 0, kMaxBenchTokens);
  p.n_depth = parse_int_list(a.label("n-depth"), a.get("n-depth", "0"), 0, kMaxBenchTokens);
  if (a.has("pg")) p.pg.push_back(parse_pg(a.get("pg")));
  p.repetitions = static_cast<int>(a.num("repetitions", p.repetitions, 1, 1 << 20));
  p.output = parse_bench_output(a.get("output", "md"));
  p.model_path = a.get("model");
  p.expert_stats = a.has("expert-stats");
  return p;
}

int cmd_bench(const Args& a) {
  const BenchParams p = bench_params(a);
  auto model = load_model(a);
  EngineOptions o = engine_options(a, *model);
  o.n_ctx = bench_context_size(p, a.num("ctx", 0, 1, kMaxTokens), model->config().n_ctx_train);
  run_bench(*model, o, p);
  return 0;
}

int cmd_info(const Args& a) {
  std::printf("%s", describe_devices().c_str());
  if (a.has("model")) print_model(*load_model(a));
  return 0;
}

int cmd_plan(const Args& a) {
  const PlanMode mode = parse_plan_mode(a.get("moe-mode", "auto"));
  const double capacity_ratio = a.real("capacity-ratio", PlanInput().capacity_ratio, 0.01, 1e3);
  const int pinned = static_cast<int>(a.num("pin-experts", 0, 0, INT_MAX));
  const int device = device_index(a);
  uint64_t budget = vram_budget(a);
  auto model = load_model(a);
  print_model(*model);
  if (budget == 0) budget = device_free_vram(device);
  PlanInput in = plan_input_for(*model, context_size(a, *model), budget);
  in.forced = mode;
  in.capacity_ratio = capacity_ratio;
  in.pinned_per_layer = pinned;
  std::printf("%s", format_plan(make_plan(in)).c_str());
  return 0;
}

int cmd_synth(const Args& a) {
  std::string out = a.get("output");
  if (out.empty()) throw Error("synth needs -o FILE");
  SynthSpec s = spec_from_args(a, SynthSpec());
  std::fprintf(stderr, "writing %s: %s\n", out.c_str(), describe(s).c_str());
  auto t0 = std::chrono::steady_clock::now();
  write_synth_model(s, out);
  std::fprintf(stderr, "done in %.1f s\n", seconds_since(t0));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help"))) {
      std::printf("%s", kUsage);
      return 0;
    }
    if (argc >= 2 && !std::strcmp(argv[1], "bench-shaders")) return bench_shaders_main(argc - 1, argv + 1);
    if (argc < 2) throw Error(std::string("no command given\n") + kUsage);
    const struct {
      const char* name;
      std::vector<OptionSpec> options;
      int (*run)(const Args&);
    } commands[] = {{"run", kModelOptions + kEngineOptions + kRunOptions, cmd_run},
                    {"bench", kModelOptions + kEngineOptions + kBenchOptions, cmd_bench},
                    {"info", {{"model", "-m"}}, cmd_info},
                    {"plan", kModelOptions + kPlanOptions, cmd_plan},
                    {"synth", kSynthOptions, cmd_synth}};
    for (const auto& c : commands) {
      if (c.name != std::string(argv[1])) continue;
      const Args a = parse_options(c.name, c.options, argc - 2, argv + 2);
      if (!a.has("help")) return c.run(a);
      std::printf("%s", kUsage);
      return 0;
    }
    throw Error("unknown command '" + std::string(argv[1]) + "'\n" + kUsage);
  } catch (const Error& e) {
    std::fprintf(stderr, "vkmoe: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "vkmoe: error: out of host memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vkmoe: internal error: %s\n", e.what());
    return 2;
  }
}
