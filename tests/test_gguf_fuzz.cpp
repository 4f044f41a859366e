// Randomized mutation test of the GGUF reader and everything a parsed file
// reaches (tests/gguf_pipeline.h): every mutated file must either load or be
// rejected with vkmoe::Error.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/model/gguf.h"
#include "tests/gguf_pipeline.h"
#include "tools/synth_model.h"
#include "tests/seed.h"

namespace vkmoe {
namespace {

// A tiny model (the shapes of the fuzzer's seeds, fuzz/make_corpus.sh).
SynthSpec tiny_model_spec() {
  SynthSpec s;
  apply_synth_overrides(s, "n_layer=1,n_embd=32,n_head=1,n_head_kv=1,head_dim=32,n_ff=32,n_expert=4,n_expert_used=2,"
                           "n_ff_exp=32,n_ff_shexp=32,n_vocab=512,tied_output=1,quant=Q8_0");
  return s;
}

std::vector<uint8_t> seed_file(std::mt19937_64& rng) {
  GgufWriter w;
  w.add_str("general.architecture", "qwen3moe");
  w.add_u32("qwen3moe.block_count", 2);
  w.add_f32("qwen3moe.rope.freq_base", 1e6f);
  w.add_bool("flag", true);
  w.add_u64("big", 1ull << 40);
  w.add_arr_str("tokenizer.ggml.tokens", {"a", "", "\xE2\x96\x81the"});
  w.add_arr_f32("scores", {0.5f, -1.f});
  w.add_arr_i32("types", {1, 2, 3});
  w.add_arr("bytes", GgufArray::of_ints(GgufType::UINT8, {0, 255}));
  auto random_data = [&](size_t n) {
    std::vector<uint8_t> d(n);
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    return d;
  };
  w.add_tensor("a", {32, 2}, GgmlType::Q8_0, random_data(68));
  w.add_tensor("b", {4}, GgmlType::F32, random_data(16));
  w.add_tensor("c", {2, 1, 2}, GgmlType::F16, random_data(8));
  return w.to_bytes();
}

// Values a corrupt count or offset is likely to take.
uint64_t interesting(std::mt19937_64& rng) {
  static const uint64_t v[] = {0,
                               1,
                               2,
                               3,
                               4,
                               7,
                               8,
                               9,
                               12,
                               13,
                               31,
                               32,
                               33,
                               255,
                               256,
                               4096,
                               0x7FFFFFFF,
                               0x80000000,
                               0xFFFFFFFF,
                               1ull << 32,
                               1ull << 60,
                               0x7FFFFFFFFFFFFFFF,
                               0x8000000000000000,
                               ~0ull};
  return v[rng() % std::size(v)];
}

void mutate(std::vector<uint8_t>& b, std::mt19937_64& rng, size_t header_end) {
  // Mostly aim at the header, where the structure lives.
  auto pos = [&](size_t extra = 0) -> size_t {
    size_t limit = (rng() % 5 != 0 ? std::min(header_end, b.size()) : b.size()) + extra;
    return limit ? rng() % limit : 0;
  };
  switch (rng() % 8) {
    case 0:
      if (!b.empty()) b[pos()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      break;
    case 1:
      if (!b.empty()) b[pos()] = static_cast<uint8_t>(rng());
      break;
    case 2: {  // overwrite a little-endian word with an interesting value
      size_t width = (rng() % 2) ? 4 : 8;
      if (b.size() < width) break;
      size_t at = pos() % (b.size() - width + 1);
      uint64_t x = interesting(rng);
      std::memcpy(b.data() + at, &x, width);
      break;
    }
    case 3: {  // insert random bytes
      size_t at = pos(1);
      size_t n = 1 + rng() % 16;
      std::vector<uint8_t> ins(n);
      for (auto& x : ins) x = static_cast<uint8_t>(rng());
      b.insert(b.begin() + std::min(at, b.size()), ins.begin(), ins.end());
      break;
    }
    case 4: {  // delete a range
      if (b.empty()) break;
      size_t at = pos();
      size_t n = std::min<size_t>(1 + rng() % 16, b.size() - at);
      b.erase(b.begin() + at, b.begin() + at + n);
      break;
    }
    case 5:  // truncate
      b.resize(pos());
      break;
    case 6: {  // duplicate a chunk elsewhere
      if (b.size() < 2) break;
      size_t from = pos(), to = pos(1);
      size_t n = std::min<size_t>(1 + rng() % 32, b.size() - from);
      std::vector<uint8_t> chunk(b.begin() + from, b.begin() + from + n);
      b.insert(b.begin() + std::min(to, b.size()), chunk.begin(), chunk.end());
      break;
    }
    default:  // small arithmetic change to a byte
      if (!b.empty()) b[pos()] += static_cast<uint8_t>(rng() % 5) - 2;
      break;
  }
}

// Mutates `base` `iterations` times: every mutant must parse into a consistent
// file and go through load_parsed(), or be rejected with a one-line Error.
struct Outcome {
  int parsed = 0, rejected = 0, tokenizer = 0, model = 0, planned = 0;
};
Outcome run_mutations(const std::vector<uint8_t>& base, int iterations, std::mt19937_64& rng) {
  const size_t header_end = GgufFile::from_memory(base)->data_offset();
  Outcome o;
  for (int it = 0; it < iterations; ++it) {
    std::vector<uint8_t> b = base;
    const int n_mut = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < n_mut; ++m) mutate(b, rng, header_end);
    std::unique_ptr<GgufFile> f;
    try {
      f = GgufFile::from_memory(std::move(b), "mutant");
    } catch (const Error& e) {
      ++o.rejected;
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("mutant: ", 0), 0u) << "iteration " << it << ": " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      continue;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << it << ": non-Error exception from the parser: " << e.what();
      return o;
    }
    ++o.parsed;
    try {
      test::check_parsed(*f);
      const test::Reach r = test::load_parsed(std::move(f));
      o.tokenizer += r.tokenizer;
      o.model += r.model;
      o.planned += r.planned;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << it << ": " << e.what();
      return o;
    }
  }
  return o;
}

uint64_t fresh_seed() { return test::test_seed(); }

TEST(GgufFuzz, RandomMutationsParseOrThrowError) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int kIterations = 50000;
  const Outcome o = run_mutations(seed_file(rng), kIterations, rng);
  std::printf("GgufFuzz: %d mutants parsed, %d rejected (seed %llu)\n", o.parsed, o.rejected,
              static_cast<unsigned long long>(seed));
  // The mutations must exercise both outcomes.
  EXPECT_GT(o.parsed, kIterations / 50);
  EXPECT_GT(o.rejected, kIterations / 4);
}

// A whole (tiny) model: mutants also reach the tokenizer, the model checks and the planner.
TEST(GgufFuzz, MutatedModelsLoadOrThrowError) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<uint8_t> base = synth_model_bytes(tiny_model_spec());
  ASSERT_TRUE(test::load_parsed(GgufFile::from_memory(base)).planned);
  const int kIterations = 20000;
  const Outcome o = run_mutations(base, kIterations, rng);
  std::printf("GgufFuzz: %d model mutants parsed (%d tokenizers, %d models, %d plans), %d rejected (seed %llu)\n",
              o.parsed, o.tokenizer, o.model, o.planned, o.rejected, static_cast<unsigned long long>(seed));
  EXPECT_GT(o.tokenizer, kIterations / 100);
  EXPECT_GT(o.planned, kIterations / 100);
  EXPECT_GT(o.rejected, kIterations / 10);
}

}  // namespace
}  // namespace vkmoe
