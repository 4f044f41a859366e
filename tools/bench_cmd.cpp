#include "tools/bench_cmd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>

#include "base/error.h"
#include "tools/cli_args.h"
#include "tools/command_setup.h"

namespace vkmoe {

std::pair<int, int> parse_pg(const std::string& text) {
  std::vector<int> v = parse_int_list("-pg", text, 1, kMaxBenchTokens);
  if (v.size() != 2) throw Error("-pg needs two values PROMPT,GEN, got '" + text + "'");
  return {v[0], v[1]};
}

std::string parse_bench_output(const std::string& text) {
  if (text == "md" || text == "json" || text == "jsonl" || text == "csv") return text;
  throw Error("-o/--output must be md, json, jsonl or csv for bench, got '" + text + "'");
}

namespace {

struct TestCase {
  int n_prompt = 0, n_gen = 0, n_depth = 0;
  // llama-bench names: pp512, tg128, pp512+tg128, with " @ d4096" for depth.
  std::string name() const {
    std::string s = n_gen == 0 ? "pp" + std::to_string(n_prompt)
                    : n_prompt == 0 ? "tg" + std::to_string(n_gen)
                                    : "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen);
    return n_depth > 0 ? s + " @ d" + std::to_string(n_depth) : s;
  }
};

std::vector<TestCase> test_cases(const BenchParams& p) {
  std::vector<TestCase> out;
  for (int d : p.n_depth) {
    for (int n : p.n_prompt)
      if (n > 0) out.push_back({n, 0, d});
    for (int n : p.n_gen)
      if (n > 0) out.push_back({0, n, d});
    for (auto [np, ng] : p.pg) out.push_back({np, ng, d});
  }
  if (out.empty()) throw Error("nothing to bench: -p and -n are all 0 and no -pg is given");
  return out;
}

struct Stats {
  double mean = 0, sd = 0;
};

Stats mean_sd(const std::vector<double>& v) {
  Stats s;
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= v.size();
  if (v.size() < 2) return s;
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(ss / (v.size() - 1));
  return s;
}

struct TestResult {
  TestCase test;
  std::string time;              // ISO 8601, UTC, when the test started
  std::vector<double> ns;        // per repetition: prompt + generation
  std::vector<double> prompt_ns; // per repetition: the prompt alone (time to first token)
  std::vector<double> ts() const {
    std::vector<double> v;
    for (double x : ns) v.push_back(1e9 * (test.n_prompt + test.n_gen) / x);
    return v;
  }
};

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Deterministic pseudo-random token ids (splitmix64) in [0, n_vocab).
std::vector<int32_t> random_tokens(int n, int n_vocab, uint64_t seed) {
  std::vector<int32_t> out(n);
  for (int i = 0; i < n; ++i) {
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    out[i] = static_cast<int32_t>((z ^ (z >> 31)) % static_cast<uint64_t>(n_vocab));
  }
  return out;
}

double ns_since(std::chrono::steady_clock::time_point t0) {
  return std::max(1.0, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
}

// One repetition on an emptied context: `depth` untimed tokens, then the timed
// prompt (one eval call) and generation (one eval call per token). As
// llama-bench, each generated step is fed a random token rather than the
// model's choice: a synthetic model's greedy text falls into loops that would
// make expert routing (and an expert cache) look far more repetitive than a
// real model's.
// warm_up: the prompt and a single generated token, no depth (as llama-bench).
void run_once(Engine& e, const TestCase& t, int rep, int n_vocab, bool warm_up, TestResult* r) {
  const uint64_t seed = (static_cast<uint64_t>(rep + 1) << 32) ^ (t.n_prompt * 31 + t.n_gen);
  e.reset();
  if (t.n_depth > 0 && !warm_up) e.eval_view(random_tokens(t.n_depth, n_vocab, seed ^ 0xd0d0));
  const int n_gen = warm_up ? std::min(t.n_gen, 1) : t.n_gen;
  const std::vector<int32_t> prompt = random_tokens(t.n_prompt, n_vocab, seed);
  const std::vector<int32_t> gen = random_tokens(n_gen, n_vocab, seed ^ 0x9e9e);
  auto t0 = std::chrono::steady_clock::now();
  if (t.n_prompt > 0) {
    e.eval_view(prompt);
    if (!warm_up) r->prompt_ns.push_back(ns_since(t0));
  }
  for (int32_t tok : gen) e.eval_view({tok});
  if (!warm_up) r->ns.push_back(ns_since(t0));
}

// ---- model description (llama-bench's model / size / params columns) ----

// general.file_type (llama_ftype) names.
const char* ftype_name(int64_t ft) {
  static const std::map<int64_t, const char*> k = {
      {0, "F32"},      {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},     {8, "Q5_0"},
      {9, "Q5_1"},     {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"},  {14, "Q4_K_S"},
      {15, "Q4_K_M"},  {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},
      {21, "Q2_K_S"},  {22, "IQ3_XS"}, {23, "IQ3_XXS"}, {24, "IQ1_S"}, {25, "IQ4_NL"},  {26, "IQ3_S"},
      {27, "IQ3_M"},   {28, "IQ2_S"},  {29, "IQ2_M"},  {30, "IQ4_XS"}, {31, "IQ1_M"},   {32, "BF16"},
      {36, "TQ1_0"},   {37, "TQ2_0"},  {38, "MXFP4_MOE"}};
  auto it = k.find(ft & ~int64_t{1024});  // 1024: "guessed" flag
  return it == k.end() ? nullptr : it->second;
}

struct ModelSummary {
  std::string type;      // e.g. "qwen3moe 30B.A3B Q4_K_M"
  uint64_t size = 0;     // tensor bytes
  uint64_t params = 0;   // all parameters
  uint64_t active = 0;   // parameters used per token (MoE: n_expert_used of n_expert)
};

std::string count_label(double n) {
  char buf[32];
  const char* unit = n >= 1e9 ? "B" : n >= 1e6 ? "M" : "K";
  double v = n / (n >= 1e9 ? 1e9 : n >= 1e6 ? 1e6 : 1e3);
  std::snprintf(buf, sizeof buf, v < 10 ? "%.1f%s" : "%.0f%s", v, unit);
  return buf;
}

ModelSummary summarize(const Model& m) {
  const ModelConfig& c = m.config();
  const GgufFile& f = m.gguf();
  ModelSummary s;
  uint64_t expert_params = 0;
  std::map<GgmlType, uint64_t> bytes_by_type;
  for (const GgufTensor& t : f.tensors()) {
    s.size += t.nbytes;
    s.params += t.nelements();
    if (t.ne.size() >= 2) bytes_by_type[t.type] += t.nbytes;
  }
  for (const LayerWeights& l : m.layers())  // routed experts by role, not by name
    for (const Weight* w : {&l.gate_exps, &l.up_exps, &l.down_exps})
      if (*w) expert_params += w->t->nelements();
  s.active = s.params;
  if (c.is_moe()) s.active -= expert_params / c.n_expert * (c.n_expert - c.n_expert_used);
  std::string size = f.get_str_or("general.size_label", "");
  std::replace(size.begin(), size.end(), '-', '.');
  if (size.empty()) size = count_label(s.params) + (c.is_moe() ? ".A" + count_label(s.active) : "");
  const char* ft = ftype_name(f.get_int_or("general.file_type", -1));
  std::string quant = ft ? ft : "";
  if (quant.empty() && !bytes_by_type.empty()) {
    auto dominant = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                     [](auto& a, auto& b) { return a.second < b.second; });
    quant = type_name(dominant->first);
  }
  s.type = c.arch + " " + size + (quant.empty() ? "" : " " + quant);
  return s;
}

// ---- output ----

struct Context {
  const BenchParams& p;
  const EngineOptions& o;
  ModelSummary model;
  std::string engine;  // describe()
  std::string moe;
  uint64_t vram = 0;
};

std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\', out += ch;
    else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else out += ch;
  }
  return out + "\"";
}

std::string csv_str(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string num(double v, const char* fmt = "%.6f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string join(const std::vector<double>& v, const char* fmt, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + num(v[i], fmt);
  return out;
}

// The fields of one result, in llama-bench's order where they match, with
// strings and sample lists rendered for JSON or CSV.
std::vector<std::pair<std::string, std::string>> fields(const Context& c, const TestResult& r, bool json) {
  auto str = [&](const std::string& s) { return json ? json_str(s) : csv_str(s); };
  auto list = [&](const std::vector<double>& v, const char* fmt) {
    return json ? "[" + join(v, fmt, ", ") + "]" : csv_str(join(v, fmt, " "));
  };
  const Stats ns = mean_sd(r.ns), ts = mean_sd(r.ts());
  const std::string null = json ? "null" : "";
  return {
      {"model_filename", str(c.p.model_path)},
      {"model_type", str(c.model.type)},
      {"model_size", std::to_string(c.model.size)},
      {"model_n_params", std::to_string(c.model.params)},
      {"model_n_params_active", std::to_string(c.model.active)},
      {"backend", str(c.o.backend)},
      {"moe_mode", c.moe.empty() ? null : str(c.moe)},
      {"engine", str(c.engine)},
      {"n_ubatch", std::to_string(c.o.n_ubatch)},
      {"type_k", str(c.o.kv_type)},
      {"type_v", str(c.o.kv_type)},
      {"n_ctx", std::to_string(c.o.n_ctx)},
      {"n_prompt", std::to_string(r.test.n_prompt)},
      {"n_gen", std::to_string(r.test.n_gen)},
      {"n_depth", std::to_string(r.test.n_depth)},
      {"test", str(r.test.name())},
      {"test_time", str(r.time)},
      {"vram_bytes", std::to_string(c.vram)},
      {"avg_ns", num(ns.mean, "%.0f")},
      {"stddev_ns", num(ns.sd, "%.0f")},
      {"avg_ts", num(ts.mean)},
      {"stddev_ts", num(ts.sd)},
      {"ttft_ms", r.prompt_ns.empty() ? null : num(mean_sd(r.prompt_ns).mean / 1e6)},
      {"samples_ns", list(r.ns, "%.0f")},
      {"samples_ts", list(r.ts(), "%.6f")},
  };
}

std::string json_object(const Context& c, const TestResult& r, const char* indent, const char* sep) {
  std::string out = "{";
  bool first = true;
  for (auto& [k, v] : fields(c, r, true)) {
    out += (first ? "" : ",") + std::string(sep) + indent + json_str(k) + ": " + v;
    first = false;
  }
  return out + sep + (*indent ? "  }" : "}");
}

const char* kMdHeader =
    "| model | size | params | backend | moe | n_ubatch | type_kv | ttft ms | test | t/s |\n"
    "| ----- | ---: | -----: | ------- | --- | -------: | ------- | ------: | ---: | --: |\n";

std::string md_row(const Context& c, const TestResult& r) {
  const Stats ts = mean_sd(r.ts());
  const double gib = c.model.size / 1073741824.0;
  char size[32], params[32], tps[64];
  if (gib >= 1) std::snprintf(size, sizeof size, "%.2f GiB", gib);
  else std::snprintf(size, sizeof size, "%.2f MiB", c.model.size / 1048576.0);
  if (c.model.params >= 1000000000) std::snprintf(params, sizeof params, "%.2f B", c.model.params / 1e9);
  else std::snprintf(params, sizeof params, "%.2f M", c.model.params / 1e6);
  std::snprintf(tps, sizeof tps, "%.2f ± %.2f", ts.mean, ts.sd);
  std::string ttft = r.prompt_ns.empty() ? "-" : num(mean_sd(r.prompt_ns).mean / 1e6, "%.2f");
  return "| " + c.model.type + " | " + size + " | " + params + " | " + c.o.backend + " | " +
         (c.moe.empty() ? "-" : c.moe) + " | " + std::to_string(c.o.n_ubatch) + " | " + c.o.kv_type + " | " +
         ttft + " | " + r.test.name() + " | " + tps + " |\n";
}

// Prints results as they complete (as llama-bench does).
class Printer {
 public:
  explicit Printer(const Context& c) : c_(c) {}
  void begin() {
    if (c_.p.output == "md") out(kMdHeader);
    if (c_.p.output == "json") out("[");
    if (c_.p.output == "csv") {
      std::string h;
      for (auto& [k, v] : fields(c_, TestResult{}, false)) h += (h.empty() ? "" : ",") + k;
      out(h + "\n");
    }
  }
  void result(const TestResult& r) {
    if (c_.p.output == "md") out(md_row(c_, r));
    if (c_.p.output == "json") out((n_++ ? ",\n  " : "\n  ") + json_object(c_, r, "    ", "\n"));
    if (c_.p.output == "jsonl") out(json_object(c_, r, "", " ") + "\n");
    if (c_.p.output == "csv") {
      std::string row;
      for (auto& [k, v] : fields(c_, r, false)) row += (row.empty() ? "" : ",") + v;
      out(row + "\n");
    }
  }
  void end() {
    if (c_.p.output == "md") out("\nengine: " + c_.engine + "\n");
    if (c_.p.output == "json") out("\n]\n");
  }

 private:
  static void out(const std::string& s) {
    std::fputs(s.c_str(), stdout);
    std::fflush(stdout);
  }
  const Context& c_;
  int n_ = 0;
};

}  // namespace

int bench_context_size(const BenchParams& p, long ctx_option, int n_ctx_train) {
  long need = 0;
  for (const TestCase& t : test_cases(p)) need = std::max<long>(need, t.n_depth + t.n_prompt + t.n_gen);
  if (ctx_option > 0 && ctx_option < need)
    throw Error("-c/--ctx " + std::to_string(ctx_option) + " is smaller than the " + std::to_string(need) +
                " tokens the largest test needs (depth + prompt + generation)");
  if (need > n_ctx_train)
    throw Error("the largest test needs " + std::to_string(need) + " tokens but the model's context is " +
                std::to_string(n_ctx_train));
  return static_cast<int>(ctx_option > 0 ? std::min<long>(ctx_option, n_ctx_train) : need);
}

void run_bench(const Model& m, const EngineOptions& o, const BenchParams& p) {
  const std::vector<TestCase> tests = test_cases(p);
  if (p.repetitions < 1) throw Error("-r/--repetitions must be at least 1, got " + std::to_string(p.repetitions));
  auto engine = make_engine(m, o);
  print_startup_summary(m, *engine);
  Context c{p, o, summarize(m), engine->describe(), "", engine->vram_bytes()};
  c.moe = engine->moe_mode();
  Printer printer(c);
  printer.begin();
  const int n_vocab = m.config().n_vocab;
  for (size_t i = 0; i < tests.size(); ++i) {
    const TestCase& t = tests[i];
    TestResult r{t, utc_now(), {}, {}};
    for (int rep = -1; rep < p.repetitions; ++rep) {  // -1: the warm-up
      const auto t0 = std::chrono::steady_clock::now();
      run_once(*engine, t, rep, n_vocab, rep < 0, &r);
      if (p.progress)
        std::fprintf(stderr, "vkmoe bench: test %zu/%zu: %s %.2f ms\n", i + 1, tests.size(),
                     (rep < 0 ? "warm-up" : "run " + std::to_string(rep + 1) + "/" + std::to_string(p.repetitions))
                         .c_str(),
                     ns_since(t0) / 1e6);
    }
    c.engine = engine->describe();
    c.vram = std::max(c.vram, engine->vram_bytes());
    printer.result(r);
  }
  printer.end();
  if (p.expert_stats) {
    const std::string report = engine->stats_report();
    std::fputs(report.c_str(), p.output == "md" ? stdout : stderr);
  }
}

}  // namespace vkmoe
