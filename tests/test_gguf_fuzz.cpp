// Randomized mutation test of the GGUF reader: every mutated file must either
// parse into a self-consistent result or throw vkmoe::Error.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/model/gguf.h"

namespace vkmoe {
namespace {

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
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.arr_type = GgufType::UINT8;
  v.arr_int = {0, 255};
  w.add_value("bytes", v);
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

bool same_number(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// A successful parse must be internally consistent, and writing it back out
// must give a file that parses to the same values and bytes.
void check_consistent(const GgufFile& f) {
  const uint64_t a = f.alignment();
  ASSERT_TRUE(a != 0 && (a & (a - 1)) == 0);
  ASSERT_EQ(f.data_offset() % a, 0u);
  ASSERT_TRUE(f.version() == 2 || f.version() == 3);
  for (const auto& k : f.keys()) {
    const GgufValue* v = f.find(k);
    ASSERT_NE(v, nullptr) << k;
    if (v->is_array() && v->arr_type == GgufType::STRING) {
      ASSERT_EQ(v->array_size(), v->arr_str.size());
    }
  }
  for (const auto& t : f.tensors()) {
    ASSERT_EQ(f.tensor(t.name), &t);
    ASSERT_TRUE(t.ne.size() >= 1 && t.ne.size() <= 4);
    for (int64_t d : t.ne) ASSERT_GT(d, 0);
    ASSERT_EQ(t.offset % a, 0u);
    ASSERT_GT(t.nbytes, 0u);
    ASSERT_EQ(t.nbytes, row_bytes(t.type, t.ne[0]) * static_cast<size_t>(t.nrows()));
    ASSERT_GE(t.data, f.base() + f.data_offset());
    ASSERT_LE(t.data + t.nbytes, f.base() + f.file_size());
  }

  if (a > 65536) return;  // rewriting would pad to a huge alignment
  GgufWriter w(a);
  for (const auto& k : f.keys()) {
    const GgufValue& v = *f.find(k);
    if (k == "general.alignment" && a != 32) continue;            // the writer adds its own
    if (v.is_array() && v.arr_type == GgufType::ARRAY) continue;  // not writable
    w.add_value(k, v);
  }
  for (const auto& t : f.tensors())
    w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  auto g = GgufFile::from_memory(w.to_bytes(), "rewritten");
  ASSERT_EQ(g->tensors().size(), f.tensors().size());
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const GgufTensor& x = f.tensors()[k];
    const GgufTensor& y = g->tensors()[k];
    ASSERT_EQ(x.name, y.name);
    ASSERT_EQ(x.ne, y.ne);
    ASSERT_EQ(x.type, y.type);
    ASSERT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0);
  }
  for (const auto& k : f.keys()) {
    const GgufValue& x = *f.find(k);
    const GgufValue* y = g->find(k);
    if (k == "general.alignment" || (x.is_array() && x.arr_type == GgufType::ARRAY)) continue;
    ASSERT_NE(y, nullptr) << k;
    ASSERT_EQ(x.type, y->type) << k;
    ASSERT_EQ(x.arr_type == y->arr_type || !x.is_array(), true) << k;
    ASSERT_EQ(x.i, y->i) << k;
    ASSERT_EQ(x.u, y->u) << k;
    ASSERT_EQ(x.b, y->b) << k;
    ASSERT_EQ(x.s, y->s) << k;
    ASSERT_TRUE(same_number(x.f, y->f)) << k;
    ASSERT_EQ(x.arr_int, y->arr_int) << k;
    ASSERT_EQ(x.arr_str, y->arr_str) << k;
    ASSERT_EQ(x.arr_float.size(), y->arr_float.size()) << k;
    for (size_t e = 0; e < x.arr_float.size(); ++e)
      ASSERT_TRUE(same_number(x.arr_float[e], y->arr_float[e])) << k;
  }
}

TEST(GgufFuzz, RandomMutationsParseOrThrowError) {
  const uint64_t seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<uint8_t> base = seed_file(rng);
  const size_t header_end = GgufFile::from_memory(base)->data_offset();

  const int kIterations = 50000;
  const auto t0 = std::chrono::steady_clock::now();
  int parsed = 0, rejected = 0;
  for (int it = 0; it < kIterations; ++it) {
    std::vector<uint8_t> b = base;
    const int n_mut = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < n_mut; ++m) mutate(b, rng, header_end);
    try {
      auto f = GgufFile::from_memory(b, "mutant");
      ++parsed;
      check_consistent(*f);
      if (::testing::Test::HasFatalFailure()) FAIL() << "inconsistent parse at iteration " << it;
    } catch (const Error& e) {
      ++rejected;
      const std::string msg = e.what();
      ASSERT_EQ(msg.rfind("mutant: ", 0), 0u) << "iteration " << it << ": " << msg;
      ASSERT_EQ(msg.find('\n'), std::string::npos) << msg;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << it << ": non-Error exception: " << e.what();
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("GgufFuzz: %d mutants parsed, %d rejected in %.2f s (seed %llu)\n", parsed, rejected,
              secs, static_cast<unsigned long long>(seed));
  // The mutations must exercise both outcomes.
  EXPECT_GT(parsed, kIterations / 50);
  EXPECT_GT(rejected, kIterations / 4);
}

}  // namespace
}  // namespace vkmoe
