// vkmoe command-line interface.
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
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
#include "tools/chat_cmd.h"
#include "tools/cli_args.h"
#include "tools/command_setup.h"
#include "tools/serve/serve_cmd.h"
#include "tools/synth_model.h"

using namespace vkmoe;

namespace {

const char* kUsage =
    "usage: vkmoe <command> [options]\n"
    "commands:\n"
    "  run            generate text (no -m: the built-in synthetic MoE model)\n"
    "  chat           interactive chat with the model's chat template; -sys TEXT, -n N per reply,\n"
    "                 plus the run options except -p\n"
    "  serve          OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, ...):\n"
    "                 --host ADDR (127.0.0.1), --port N (8080; 0: any free), --max-body SIZE (1MiB),\n"
    "                 --max-queue N (waiting requests, 64), plus -m and the engine options of run\n"
    "  bench          prompt-processing and generation tokens/s, llama-bench style (see below)\n"
    "  info           Vulkan devices (and a summary of the -m model)\n"
    "  plan           where each tensor goes for a VRAM budget; takes -m, --set, --preset, -c,\n"
    "                 --device, --vram-budget, --moe-mode, --pin-experts, --capacity-ratio R\n"
    "  synth          write a synthetic GGUF model; takes -o FILE, --set, --preset\n"
    "  logits         write the logits of every position of --tokens ID,... to -o FILE\n"
    "                 (n_tokens x n_vocab float32, as llama.cpp's logits dumps)\n"
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
    "                         with VKMOE_PROFILE=1; =2 also each prompt ubatch's GPU and host time)\n"
    "  --pin-experts N        pin the N most-used experts per layer in VRAM after the prompt\n"
    "  --cpu-f32              CPU experts on f32 activations: the GPU path's result to rounding, but\n"
    "                         several times slower than the default Q8-quantized activations\n"
    "  --gpu-f32              GPU one-token products on f32 activations (the CPU reference to rounding)\n"
    "                         instead of int8 ones where the device accelerates integer dot products\n"
    "  -t, --threads N        CPU threads, 1 to 1024 (default: all cores)\n"
    "  --poll N               CPU threads poll 4*N us for work before sleeping, 0 to 100 (default 50)\n"
    "  --cpu-strict 0|1       pin CPU thread i to the (i+1)-th allowed CPU (default 1)\n"
    "  --temp T --top-k K --top-p P --min-p P --repeat-penalty R --seed S\n"
    "                         sampling (run; default greedy)\n"
    "  --check-tensors        before running, check every tensor's data for NaN/Inf (for quantized\n"
    "                         blocks, their scales)\n"
    "  --set k=v,...          synth/default-model shape (arch, n_layer, n_embd, n_expert, quant, ...)\n"
    "  --preset NAME          synth/default-model shapes of a real model: qwen3-30b-a3b, glm-4.5-air,\n"
    "                         gpt-oss-20b, gpt-oss-120b, deepseek-v2-lite, deepseek-v3\n"
    "bench options (each test starts on an empty context; 1 warm-up run, then -r timed runs):\n"
    "  -p, --n-prompt N,...   ppN tests: N prompt tokens in one batched eval (default 512; 0: none)\n"
    "  -n, --n-gen N,...      tgN tests: N tokens generated one at a time (default 128; 0: none)\n"
    "  -pg P,G                a ppP+tgG test: prompt then generation, t/s over both\n"
    "  -d, --n-depth N,...    run every test after N untimed context tokens (default 0)\n"
    "  -r, --repetitions N    timed runs per test (default 5)\n"
    "  -o, --output FORMAT    md (default), json, jsonl or csv (with all samples)\n"
    "  --progress             print each run and its time to stderr as it ends\n";

// The options of each command (see kUsage); the shared ones are in command_setup.h.
const std::vector<OptionSpec> kRunOptions = {{"prompt", "-p"}, {"n-predict", "-n"}};
const std::vector<OptionSpec> kBenchOptions = {{"n-prompt", "-p"}, {"n-gen", "-n"}, {"pg", "-pg"},
                                               {"n-depth", "-d"}, {"repetitions", "-r"}, {"output", "-o"},
                                               {"progress", "", true}};
const std::vector<OptionSpec> kPlanOptions = {{"ctx", "-c"}, {"device"}, {"vram-budget"},
                                              {"moe-mode"}, {"pin-experts"}, {"capacity-ratio"}};
const std::vector<OptionSpec> kSynthOptions = {{"output", "-o"}, {"set"}, {"preset"}};
const std::vector<OptionSpec> kLogitsOptions = {{"output", "-o"}, {"tokens"}};

int cmd_run(const Args& a) {
  Sampler sampler(sampler_params(a));
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
  print_startup_summary(*model, *engine);
  std::printf("%s", prompt.c_str());
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  std::span<const float> logits = engine->eval_view(ids);
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
    if (generated + 1 < n_predict) logits = engine->eval_view({id});
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
  p.progress = a.has("progress");
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

// Logits of every position, each evaluated after the previous ones (the
// format of llama.cpp's logits dumps: n_tokens x n_vocab float32), for
// comparing with other implementations.
int cmd_logits(const Args& a) {
  const std::string out = a.get("output");
  if (out.empty()) throw Error("logits needs -o FILE");
  if (!a.has("tokens")) throw Error("logits needs --tokens ID,ID,...");
  const std::vector<int> tokens = parse_int_list(a.label("tokens"), a.get("tokens"), 0, INT32_MAX);
  auto model = load_model(a);
  EngineOptions o = engine_options(a, *model);
  o.n_ctx = std::max<int>(o.n_ctx, int(tokens.size()));
  auto engine = make_engine(*model, o);
  std::vector<float> all;
  for (int t : tokens) {
    const std::span<const float> l = engine->eval_view({t});
    all.insert(all.end(), l.begin(), l.end());
  }
  std::FILE* f = std::fopen(out.c_str(), "wb");
  if (!f || std::fwrite(all.data(), 4, all.size(), f) != all.size() || std::fclose(f) != 0)
    throw Error("cannot write " + out);
  std::fprintf(stderr, "wrote %zu x %zu logits to %s\n", tokens.size(), all.size() / tokens.size(), out.c_str());
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
  auto model = load_model(a, /*shapes_only=*/true);
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
    } commands[] = {{"run", kModelOptions + kEngineOptions + kSamplingOptions + kRunOptions, cmd_run},
                    {"chat", kModelOptions + kEngineOptions + kSamplingOptions + kChatOptions, cmd_chat},
                    {"serve", kModelOptions + kEngineOptions + kServeOptions, cmd_serve},
                    {"bench", kModelOptions + kEngineOptions + kBenchOptions, cmd_bench},
                    {"info", {{"model", "-m"}}, cmd_info},
                    {"logits", kModelOptions + kEngineOptions + kLogitsOptions, cmd_logits},
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
