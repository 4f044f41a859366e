// Command-line hardening (issue 12): strict options and numbers, a thread pool
// that fails cleanly, synth leaving no temp file behind.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "cpu/thread_pool.h"
#include "tests/test_util.h"
#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "tools/cli_args.h"
#include "tools/command_setup.h"
#include "tools/synth_model.h"

namespace vkmoe {
namespace {

const std::vector<OptionSpec> kSpec = {
    {"n-predict", "-n"}, {"vram-budget"}, {"ubatch-size", "-ub"}, {"temp"}, {"expert-stats", "", true}};

Args parse(std::vector<const char*> argv) { return parse_options("run", kSpec, int(argv.size()), argv.data()); }

// The Error message of f ("" when it does not throw).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CliArgs, ParsesLongShortEqualsAndFlags) {
  const Args a = parse({"-n", "7", "--temp=0.5", "-ub", "64", "--expert-stats"});
  EXPECT_EQ(a.num("n-predict", 0, 0, 100), 7);
  EXPECT_EQ(a.real("temp", 0, 0, 10), 0.5);
  EXPECT_EQ(a.num("ubatch-size", 0, 1, 100), 64);
  EXPECT_TRUE(a.has("expert-stats"));
  EXPECT_FALSE(a.has("vram-budget"));
  EXPECT_EQ(a.num("vram-budget", 3, 0, 100), 3);
  EXPECT_EQ(a.label("n-predict"), "-n/--n-predict");
  EXPECT_TRUE(parse({"-h"}).has("help"));
}

TEST(CliArgs, UnknownOptionsAreErrorsWithASuggestion) {
  EXPECT_EQ(error_of([] { parse({"--n-predcit", "2"}); }),
            "unknown option '--n-predcit' for run (did you mean --n-predict?)");
  EXPECT_EQ(error_of([] { parse({"--vram_budget", "1MiB"}); }),
            "unknown option '--vram_budget' for run (did you mean --vram-budget?)");
  EXPECT_EQ(error_of([] { parse({"--frobnicate=3"}); }), "unknown option '--frobnicate' for run");
  EXPECT_EQ(error_of([] { parse({"-x"}); }), "unknown option '-x' for run");
  EXPECT_EQ(error_of([] { parse({"stray"}); }), "unexpected argument 'stray' (see vkmoe --help)");
  EXPECT_EQ(error_of([] { parse({"-n"}); }), "option -n needs a value");
  EXPECT_EQ(error_of([] { parse({"--expert-stats=1"}); }), "option --expert-stats takes no value");
}

TEST(CliArgs, IntegersAreStrictAndRangeChecked) {
  EXPECT_EQ(parse_int("-t", "12", 1, 1024), 12);
  EXPECT_EQ(parse_int("-n", "-5", -10, 10), -5);
  EXPECT_EQ(error_of([] { parse_int("-n/--n-predict", "-5", 0, 100); }), "-n/--n-predict must be at least 0, got -5");
  EXPECT_EQ(error_of([] { parse_int("-t/--threads", "4294967297", 1, 1024); }),
            "-t/--threads must be at most 1024, got 4294967297");
  EXPECT_EQ(error_of([] { parse_int("--device", "4294967296", 0, 2147483647); }),
            "--device must be at most 2147483647, got 4294967296");
  EXPECT_EQ(error_of([] { parse_int("--seed", "99999999999999999999999", 0, 100); }),
            "--seed must be at most 100, got 99999999999999999999999");
  EXPECT_EQ(error_of([] { parse_int("--seed", "-99999999999999999999999", 0, 100); }),
            "--seed must be at least 0, got -99999999999999999999999");
  for (const char* bad : {"", "many", "12abc", " 12", "12 ", "1e3", "0x10", "+-1", "1.0"})
    EXPECT_EQ(error_of([&] { parse_int("-n", bad, 0, 100); }), std::string("-n needs an integer, got '") + bad + "'");
}

TEST(CliArgs, RealsAreStrictFiniteAndRangeChecked) {
  EXPECT_EQ(parse_real("--temp", "0.7", 0, 10), 0.7);
  EXPECT_EQ(parse_real("--temp", "1e-1", 0, 10), 0.1);
  EXPECT_EQ(error_of([] { parse_real("--temp", "0.7abc", 0, 10); }), "--temp needs a number, got '0.7abc'");
  EXPECT_EQ(error_of([] { parse_real("--temp", "", 0, 10); }), "--temp needs a number, got ''");
  for (const char* bad : {"nan", "inf", "-inf", "1e999"})
    EXPECT_EQ(error_of([&] { parse_real("--temp", bad, 0, 10); }),
              std::string("--temp needs a finite number, got '") + bad + "'");
  EXPECT_EQ(error_of([] { parse_real("--top-p", "1.5", 0, 1); }), "--top-p must be at most 1, got 1.5");
  EXPECT_EQ(error_of([] { parse_real("--temp", "-0.1", 0, 10); }), "--temp must be at least 0, got -0.1");
}

TEST(CliArgs, IntegerLists) {
  EXPECT_EQ(parse_int_list("-p", "512,0,8", 0, 1 << 30), (std::vector<int>{512, 0, 8}));
  EXPECT_EQ(error_of([] { parse_int_list("-n/--n-gen", "4,-3", 0, 100); }), "-n/--n-gen must be at least 0, got -3");
  EXPECT_EQ(error_of([] { parse_int_list("-p", "3000000000", 0, 1 << 30); }),
            "-p must be at most 1073741824, got 3000000000");
  for (const char* bad : {"", "4,,2", "4,", ",4", "1k", "4, 2"})
    EXPECT_EQ(error_of([&] { parse_int_list("-d", bad, 0, 100); }),
              std::string("-d needs comma-separated integers, got '") + bad + "'");
}

// Starts a pool of 1000 threads under an address-space limit that leaves room
// for a few 8 MiB stacks; exits 1 with the Error's message, 0 if it started.
[[noreturn]] void start_pool_without_memory() {
  alarm(30);  // the old pool hung here, waiting in ~condition_variable while unwinding
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  const rlim_t limit = rlim_t(pages) * sysconf(_SC_PAGESIZE) + (64 << 20);
  const rlimit rl{limit, limit};
  if (pages == 0 || setrlimit(RLIMIT_AS, &rl) != 0) std::_Exit(2);
  try {
    ThreadPool pool(1000);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(1);
  }
  std::_Exit(0);
}

// More threads than the process may start: an Error, not a hang.
TEST(ThreadPoolDeathTest, ThreadCreationFailureIsAnError) {
  EXPECT_EXIT(start_pool_without_memory(), testing::ExitedWithCode(1),
              "cannot start CPU thread [0-9]+ of 1000 .*use fewer threads");
}

TEST(SynthWrite, FailedWriteLeavesNoTempFile) {
#ifdef VKMOE_SANITIZED
  GTEST_SKIP() << "AddressSanitizer aborts on an impossible operator new instead of throwing bad_alloc";
#endif
  SynthSpec s;
  s.n_vocab = 512;
  // attn_q of 256 x 2^51 Q4_K: its 2^58-byte buffer can never be allocated.
  apply_synth_overrides(s, "n_head=67108864,head_dim=33554432");
  const std::string path = test::temp_path("vkmoe_synth_fail", ".gguf");
  EXPECT_ANY_THROW(write_synth_model(s, path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove(path + ".tmp");
}


// llama.cpp's --poll and --cpu-strict set the thread pool's polling and pinning;
// an explicit placement wins over the environment.
TEST(ThreadPlacement, CliSpellingsAndEnvironment) {
  auto m = Model::from_gguf(GgufFile::from_memory(synth_model_bytes(builtin_spec()), "builtin"));
  auto opts = [&](std::vector<const char*> argv) {
    return engine_options(parse_options("run", kEngineOptions, int(argv.size()), argv.data()), *m);
  };
  const EngineOptions d = opts({});
  EXPECT_EQ(d.placement.poll_us, -1);
  EXPECT_EQ(d.placement.pin, -1);
  const EngineOptions o = opts({"--poll", "25", "--cpu-strict", "0"});
  EXPECT_EQ(o.placement.poll_us, 100);
  EXPECT_EQ(o.placement.pin, 0);
  EXPECT_EQ(opts({"--poll=0"}).placement.poll_us, 0);
  EXPECT_NE(error_of([&] { opts({"--poll", "101"}); }), "");
  EXPECT_NE(error_of([&] { opts({"--cpu-strict", "2"}); }), "");

  // One thread always has enough CPUs, so the settings take effect as given.
  EXPECT_EQ(ThreadPool(1, {1, 7}).poll_ns(), 7000);
  EXPECT_TRUE(ThreadPool(1, {1, 7}).pinned());
  EXPECT_FALSE(ThreadPool(1, {0, 0}).pinned());
  EXPECT_EQ(ThreadPool(1, {0, 0}).poll_ns(), 0);
  EXPECT_EQ(ThreadPool(1).poll_ns(), 200000);  // the default (no VKMOE_POLL_US in the test environment)
  ::setenv("VKMOE_POLL_US", "9", 1);
  ::setenv("VKMOE_PIN", "0", 1);
  EXPECT_EQ(ThreadPool(1).poll_ns(), 9000);
  EXPECT_FALSE(ThreadPool(1).pinned());
  EXPECT_EQ(ThreadPool(1, {1, 3}).poll_ns(), 3000);
  EXPECT_TRUE(ThreadPool(1, {1, 3}).pinned());
  ::unsetenv("VKMOE_POLL_US");
  ::unsetenv("VKMOE_PIN");
}

}  // namespace
}  // namespace vkmoe
