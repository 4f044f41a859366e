// GGUF reader/writer: round trips, hand-built files and rejection of corrupt input.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>

#include "engine/model/gguf.h"
#include "tests/test_util.h"

namespace vkmoe {
namespace {

uint64_t fresh_seed() { return test::test_seed(); }

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Runs fn, expects a vkmoe::Error whose message contains every word in `words`.
void expect_error(const std::function<void()>& fn, std::vector<std::string> words) {
  try {
    fn();
    ADD_FAILURE() << "no Error thrown (expected words: " << (words.empty() ? "" : words[0]) << ")";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "message: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line message: " << msg;
  }
}

// Little-endian builder for hand-made GGUF files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return put<uint32_t>(0x46554747)
        .put<uint32_t>(version)
        .put<uint64_t>(n_tensors)
        .put<uint64_t>(n_kv);
  }
  Bytes& kv_u32(const std::string& k, uint32_t v) {
    return str(k).put<uint32_t>(4).put<uint32_t>(v);
  }
  Bytes& tensor_info(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                     uint64_t off) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(off);
  }
  Bytes& pad_to(size_t a) {
    b.resize((b.size() + a - 1) / a * a, 0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

std::unique_ptr<GgufFile> parse(const std::vector<uint8_t>& b) {
  return GgufFile::from_memory(b, "test.gguf");
}

// ------------------------------------------------------------------ round trips

TEST(GgufRoundTrip, EveryValueType) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto rnd_str = [&](size_t n) {
    std::string s;
    for (size_t k = 0; k < n; ++k) s.push_back(static_cast<char>('a' + rng() % 26));
    return s;
  };

  GgufWriter w;
  const uint32_t u32 = static_cast<uint32_t>(rng());
  const int32_t i32 = static_cast<int32_t>(rng());
  const uint64_t u64 = rng() | (1ull << 63);  // above INT64_MAX
  const float f32 = std::ldexp(static_cast<float>(rng() % 100000) - 50000.f, -7);
  const std::string utf8 =
      "\xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80 " + rnd_str(5);
  w.add_u32("a.u32", u32);
  w.add_i32("a.i32", i32);
  w.add_u64("a.u64", u64);
  w.add_f32("a.f32", f32);
  w.add_bool("a.true", true);
  w.add_bool("a.false", false);
  w.add_str("a.str", utf8);
  w.add_str("a.empty", "");

  // The remaining scalar types through add_value.
  struct Scalar {
    GgufType t;
    int64_t lo, hi;
  };
  const Scalar ints[] = {{GgufType::UINT8, 0, 255},
                         {GgufType::INT8, -128, 127},
                         {GgufType::UINT16, 0, 65535},
                         {GgufType::INT16, -32768, 32767},
                         {GgufType::INT64, INT64_MIN, INT64_MAX}};
  std::vector<int64_t> int_vals;
  for (const auto& s : ints) {
    GgufValue v;
    v.type = s.t;
    std::uniform_int_distribution<int64_t> d(s.lo, s.hi);
    v.i = d(rng);
    if (v.i >= 0) v.u = static_cast<uint64_t>(v.i);
    int_vals.push_back(v.i);
    w.add_value(std::string("b.") + gguf_type_name(s.t), v);
  }
  GgufValue f64;
  f64.type = GgufType::FLOAT64;
  f64.f = std::uniform_real_distribution<double>(-1e300, 1e300)(rng);
  w.add_value("b.f64", f64);

  // Arrays of every element type.
  const GgufType arr_types[] = {GgufType::UINT8,  GgufType::INT8,   GgufType::UINT16,
                                GgufType::INT16,  GgufType::UINT32, GgufType::INT32,
                                GgufType::UINT64, GgufType::INT64,  GgufType::BOOL};
  std::vector<std::vector<int64_t>> arr_vals;
  for (GgufType t : arr_types) {
    std::vector<int64_t> vals;
    size_t n = 1 + rng() % 40;
    for (size_t k = 0; k < n; ++k) {
      int64_t x = static_cast<int64_t>(rng());
      switch (t) {
        case GgufType::UINT8: x &= 0xFF; break;
        case GgufType::INT8: x = static_cast<int8_t>(x); break;
        case GgufType::UINT16: x &= 0xFFFF; break;
        case GgufType::INT16: x = static_cast<int16_t>(x); break;
        case GgufType::UINT32: x &= 0xFFFFFFFF; break;
        case GgufType::INT32: x = static_cast<int32_t>(x); break;
        case GgufType::BOOL: x &= 1; break;
        default: break;  // 64-bit: any bit pattern
      }
      vals.push_back(x);
    }
    arr_vals.push_back(vals);
    w.add_arr(std::string("c.") + gguf_type_name(t), GgufArray::of_ints(t, vals));
  }
  std::vector<float> af32;
  for (int k = 0; k < 17; ++k)
    af32.push_back(std::ldexp(static_cast<float>(rng() % 2001) - 1000.f, -4));
  w.add_arr_f32("c.float32", af32);
  std::vector<double> af64;
  for (int k = 0; k < 9; ++k) af64.push_back(std::normal_distribution<double>()(rng));
  w.add_arr("c.float64", GgufArray::of_floats(GgufType::FLOAT64, af64));
  const std::vector<std::string> astr = {rnd_str(3), "", utf8, rnd_str(1 + rng() % 64), ""};
  w.add_arr_str("c.string", astr);
  std::vector<int32_t> ai32 = {static_cast<int32_t>(rng()), -1, 0, INT32_MIN, INT32_MAX};
  w.add_arr_i32("c.i32_helper", ai32);
  w.add_arr_str("c.empty", {});

  auto f = parse(w.to_bytes());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->keys().size(), 8u + 5 + 1 + 9 + 5);
  EXPECT_EQ(f->keys()[0], "a.u32");  // insertion order
  EXPECT_EQ(f->keys()[7], "a.empty");
  EXPECT_EQ(f->keys().back(), "c.empty");

  EXPECT_EQ(f->find("a.u32")->type, GgufType::UINT32);
  EXPECT_EQ(f->find("a.u32")->u, u32);
  EXPECT_EQ(f->get_int("a.u32"), static_cast<int64_t>(u32));
  EXPECT_EQ(f->get_int("a.i32"), i32);
  EXPECT_EQ(f->find("a.u64")->u, u64);
  EXPECT_EQ(f->find("a.f32")->type, GgufType::FLOAT32);
  EXPECT_EQ(f->get_float("a.f32"), f32);
  EXPECT_TRUE(f->get_bool_or("a.true", false));
  EXPECT_FALSE(f->get_bool_or("a.false", true));
  EXPECT_EQ(f->get_str("a.str"), utf8);
  EXPECT_EQ(f->get_str("a.empty"), "");
  for (size_t k = 0; k < std::size(ints); ++k) {
    const GgufValue* v = f->find(std::string("b.") + gguf_type_name(ints[k].t));
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->type, ints[k].t);
    EXPECT_EQ(v->i, int_vals[k]);
  }
  EXPECT_EQ(f->find("b.f64")->type, GgufType::FLOAT64);
  EXPECT_EQ(f->get_float("b.f64"), f64.f);
  for (size_t k = 0; k < std::size(arr_types); ++k) {
    const GgufValue* v = f->find(std::string("c.") + gguf_type_name(arr_types[k]));
    ASSERT_NE(v, nullptr);
    EXPECT_TRUE(v->is_array());
    EXPECT_EQ(v->arr.type(), arr_types[k]);
    EXPECT_EQ(v->arr.ints(), arr_vals[k]) << gguf_type_name(arr_types[k]);
  }
  const std::vector<double> rf32 = f->get_arr_float("c.float32").floats();
  ASSERT_EQ(rf32.size(), af32.size());
  for (size_t k = 0; k < af32.size(); ++k) EXPECT_EQ(rf32[k], af32[k]);
  EXPECT_EQ(f->get_arr_float("c.float64").floats(), af64);
  EXPECT_EQ(f->get_arr_str("c.string").strings(), astr);
  EXPECT_EQ(f->get_arr_str("c.string").str_at(2), utf8);
  EXPECT_EQ(f->get_arr_int("c.i32_helper").ints(), std::vector<int64_t>(ai32.begin(), ai32.end()));
  EXPECT_EQ(f->get_arr_str("c.empty").size(), 0u);
  EXPECT_THROW(f->get_arr_str("c.string").str_at(astr.size()), Error);
  EXPECT_THROW(f->get_arr_str("c.string").int_at(0), Error);
  EXPECT_TRUE(f->tensors().empty());
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType type;
};

TEST(GgufRoundTrip, TensorsByteForByteThroughFile) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int r = 1 + static_cast<int>(rng() % 5);
  const std::vector<TensorSpec> specs = {
      {"token_embd.weight", {64, r + 2}, GgmlType::F32},
      {"blk.0.attn_q.weight", {32, 3, 2}, GgmlType::F16},
      {"blk.0.attn_k.weight", {96, r}, GgmlType::BF16},
      {"blk.0.ffn_up.weight", {64, r, 1, 2}, GgmlType::Q8_0},
      {"blk.0.ffn_gate_exps.weight", {256, 2, r}, GgmlType::Q4_K},
      {"blk.0.ffn_down_exps.weight", {512, r, 2}, GgmlType::Q5_K},
      {"output.weight", {256, 3}, GgmlType::Q6_K},
      {"odd", {7}, GgmlType::F32},
  };
  GgufWriter w;
  w.add_str("general.architecture", "test");
  std::vector<std::vector<uint8_t>> datas;
  for (const auto& s : specs) {
    int64_t rows = 1;
    for (size_t k = 1; k < s.ne.size(); ++k) rows *= s.ne[k];
    datas.push_back(random_bytes(rng, row_bytes(s.type, s.ne[0]) * rows));
    w.add_tensor(s.name, s.ne, s.type, datas.back());
  }
  const std::string path = test::temp_path("gguf_tensors", ".gguf");
  w.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto f = GgufFile::open(path);
  std::filesystem::remove(path);  // the mapping stays valid after unlink
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  std::vector<uint8_t> whole(f->base(), f->base() + f->file_size());
  EXPECT_EQ(whole, w.to_bytes());
  ASSERT_EQ(f->tensors().size(), specs.size());
  for (size_t k = 0; k < specs.size(); ++k) {
    const GgufTensor& t = f->tensors()[k];
    EXPECT_EQ(t.name, specs[k].name);
    EXPECT_EQ(f->tensor(specs[k].name), &t);
    EXPECT_EQ(t.ne, specs[k].ne);
    EXPECT_EQ(t.type, specs[k].type);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(t.nrows() * t.ne[0], t.nelements());
    EXPECT_EQ(t.nbytes, row_bytes(t.type, t.ne[0]) * t.nrows());
    ASSERT_EQ(t.nbytes, datas[k].size());
    EXPECT_EQ(t.data, f->base() + f->data_offset() + t.offset);
    EXPECT_EQ(std::memcmp(t.data, datas[k].data(), t.nbytes), 0) << t.name;
  }
  EXPECT_EQ(f->tensor("missing"), nullptr);
}

// The pages spanning [data, data + n) and how many of them are in memory, by
// mincore (resident SIZE_MAX when it fails).
struct PageCount {
  size_t resident = 0, total = 0;
};
PageCount resident_pages(const uint8_t* data, size_t n) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) / page * page;
  PageCount c;
  c.total = (reinterpret_cast<uintptr_t>(data) + n - first + page - 1) / page;
  std::vector<unsigned char> in(c.total);
  if (mincore(reinterpret_cast<void*>(first), c.total * page, in.data()) != 0) return {SIZE_MAX, c.total};
  for (unsigned char b : in) c.resident += b & 1;
  return c;
}

TEST(GgufReader, PrefetchBringsATensorsPagesIntoMemory) {
  std::mt19937_64 rng(fresh_seed());
  GgufWriter w;
  w.add_str("general.architecture", "test");
  const std::vector<uint8_t> big = random_bytes(rng, size_t(8) << 20);
  w.add_tensor("token_embd.weight", {1024, int64_t(big.size() / 4096)}, GgmlType::F32, big);
  const std::string path = test::temp_path("gguf_prefetch", ".gguf");
  w.write(path);
  // The file's pages out of the page cache (written back first).
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fsync(fd), 0);
  ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  ::close(fd);
  auto f = GgufFile::open(path);
  std::filesystem::remove(path);
  const GgufTensor& t = *f->tensor("token_embd.weight");
  const PageCount before = resident_pages(t.data, t.nbytes);
  ASSERT_NE(before.resident, SIZE_MAX) << "mincore failed";
  if (before.resident == before.total)
    GTEST_SKIP() << "the file's pages stayed in memory (e.g. tmpfs): nothing to observe";
  f->prefetch(t);
  EXPECT_EQ(resident_pages(t.data, t.nbytes).resident, before.total)
      << before.resident << " of " << before.total << " pages were in memory before";
  EXPECT_EQ(std::memcmp(t.data, big.data(), big.size()), 0);
  // A file held in memory: nothing to do.
  auto m = GgufFile::from_memory(w.to_bytes());
  m->prefetch(*m->tensor("token_embd.weight"));
}

TEST(GgufRoundTrip, CustomAlignment) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (uint64_t align : {1u, 8u, 64u, 4096u}) {
    GgufWriter w(align);
    w.add_str("general.name", "aligned");
    std::vector<std::vector<uint8_t>> datas;
    for (int k = 0; k < 3; ++k) {
      int64_t n = 1 + static_cast<int64_t>(rng() % 13);  // odd sizes exercise the padding
      datas.push_back(random_bytes(rng, n * 2));
      w.add_tensor("t" + std::to_string(k), {n}, GgmlType::F16, datas.back());
    }
    auto f = parse(w.to_bytes());
    EXPECT_EQ(f->alignment(), align);
    if (align != 32) {
      EXPECT_EQ(f->get_int("general.alignment"), static_cast<int64_t>(align));
    }
    EXPECT_EQ(f->data_offset() % align, 0u);
    for (size_t k = 0; k < 3; ++k) {
      const GgufTensor& t = f->tensors()[k];
      EXPECT_EQ((t.data - f->base()) % align, 0);
      EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), datas[k]);
    }
  }
  EXPECT_THROW(GgufWriter(48), Error);
  EXPECT_THROW(GgufWriter(0), Error);
}

TEST(GgufRoundTrip, HandBuiltVersion2AndNestedArray) {
  Bytes f;
  f.header(2, 1, 3);
  f.kv_u32("x.n", 7);
  // Array of 2 arrays (u16[2], string[1]): stored as skipped, bounds-checked.
  f.str("x.nested").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(2);
  f.put<uint32_t>(2).put<uint64_t>(2).put<uint16_t>(1).put<uint16_t>(2);
  f.put<uint32_t>(8).put<uint64_t>(1).str("hi");
  f.str("x.s").put<uint32_t>(8).str("after");
  f.tensor_info("w", {4, 2}, 0, 0).pad_to(32);
  const size_t data_at = f.b.size();
  for (int k = 0; k < 8; ++k) f.put<float>(k * 0.5f);
  auto g = parse(f.b);
  EXPECT_EQ(g->version(), 2u);
  EXPECT_EQ(g->get_int("x.n"), 7);
  EXPECT_EQ(g->find("x.nested")->arr.type(), GgufType::ARRAY);
  EXPECT_EQ(g->find("x.nested")->arr.size(), 0u);
  GgufWriter w;
  expect_error([&] { w.add_value("x", *g->find("x.nested")); }, {"'x'", "nested"});
  EXPECT_EQ(g->get_str("x.s"), "after");
  EXPECT_EQ(g->data_offset(), data_at);
  const GgufTensor* t = g->tensor("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->nbytes, 32u);
  float v;
  std::memcpy(&v, t->data + 7 * 4, 4);
  EXPECT_EQ(v, 3.5f);

  // Two levels of nesting are rejected.
  Bytes d;
  d.header(3, 0, 1).str("deep").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1);
  d.put<uint32_t>(9).put<uint64_t>(1).put<uint32_t>(4).put<uint64_t>(0);
  expect_error([&] { parse(d.b); }, {"test.gguf: ", "nested"});
}

// ------------------------------------------------------------------ rejection

// A small valid file with metadata and two tensors.
std::vector<uint8_t> small_file(std::mt19937_64& rng) {
  GgufWriter w;
  w.add_str("general.architecture", "llama");
  w.add_u32("llama.block_count", 2);
  w.add_arr_str("tokenizer.ggml.tokens", {"a", "bc", ""});
  w.add_arr_f32("s", {1.f, 2.f});
  w.add_tensor("blk.0.w", {32, 2}, GgmlType::Q8_0, random_bytes(rng, 68));
  w.add_tensor("blk.3.ffn_down_exps.weight", {8}, GgmlType::F32, random_bytes(rng, 32));
  return w.to_bytes();
}

TEST(GgufReader, TruncationAtEveryOffset) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<uint8_t> full = small_file(rng);
  auto ok = parse(full);
  const GgufTensor& last = ok->tensors().back();
  const size_t needed = static_cast<size_t>(last.data - ok->base()) + last.nbytes;
  ASSERT_LE(needed, full.size());
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + len);
    if (len >= needed) {
      EXPECT_NO_THROW(parse(cut)) << "len " << len;  // only trailing padding is missing
      continue;
    }
    try {
      parse(cut);
      ADD_FAILURE() << "truncated to " << len << " of " << full.size() << " bytes parsed";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind("test.gguf: ", 0), 0u) << msg;
      if (len >= ok->data_offset()) {
        EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
        EXPECT_NE(msg.find("re-download"), std::string::npos) << msg;
        EXPECT_NE(msg.find("the file has " + std::to_string(len)), std::string::npos) << msg;
      }
    }
  }
  // The message names the tensor and the bytes it needs.
  std::vector<uint8_t> cut(full.begin(), full.begin() + needed - 1);
  expect_error([&] { parse(cut); },
               {"test.gguf: truncated: tensor 'blk.3.ffn_down_exps.weight' needs bytes up to " +
                    std::to_string(needed) + " but the file has " + std::to_string(needed - 1),
                "re-download"});
}

TEST(GgufReader, RejectsBadHeaders) {
  std::mt19937_64 rng(fresh_seed());
  const std::vector<uint8_t> good = small_file(rng);
  auto with_u32 = [&](size_t at, uint32_t v) {
    auto b = good;
    std::memcpy(b.data() + at, &v, 4);
    return b;
  };
  auto with_u64 = [&](size_t at, uint64_t v) {
    auto b = good;
    std::memcpy(b.data() + at, &v, 8);
    return b;
  };
  expect_error([&] { parse(with_u32(4, 1)); }, {"test.gguf: ", "version 1", "not supported"});
  expect_error([&] { parse(with_u32(4, 4)); }, {"version 4"});
  expect_error([&] { parse(with_u32(4, 0x03000000)); }, {"big-endian"});
  expect_error([&] { parse(with_u32(0, 0x4C4D4747)); }, {"not a GGUF file", "bad magic"});
  expect_error([&] { parse({'G', 'G'}); }, {"not a GGUF file"});
  expect_error([&] { parse(with_u64(8, 1ull << 60)); }, {"tensors cannot fit"});
  expect_error([&] { parse(with_u64(16, 1ull << 60)); }, {"metadata entries cannot fit"});
  auto padded = with_u64(16, 70000);
  padded.resize(padded.size() + (1 << 20));
  expect_error([&] { parse(padded); }, {"70000 metadata entries", "at most 65536"});
  expect_error([&] { parse(with_u64(24, 1ull << 62)); }, {"metadata key", "needs"});  // key length
}

TEST(GgufReader, RejectsCorruptMetadata) {
  auto one_kv = [](const std::function<void(Bytes&)>& body) {
    Bytes b;
    b.header(3, 0, 1);
    body(b);
    return b.b;
  };
  // Array count 2^60: an Error before any allocation.
  expect_error(
      [&] {
        parse(one_kv([](Bytes& b) {
          b.str("k").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(1ull << 60);
        }));
      },
      {"key 'k'", "array of", "corrupt length"});
  expect_error(
      [&] {
        parse(one_kv(
            [](Bytes& b) { b.str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(~0ull); }));
      },
      {"key 'k'", "corrupt length"});
  expect_error(
      [&] {
        parse(one_kv(
            [](Bytes& b) { b.str("k").put<uint32_t>(8).put<uint64_t>(1ull << 62).zeros(8); }));
      },
      {"string value", "needs"});
  expect_error([&] { parse(one_kv([](Bytes& b) { b.str("k").put<uint32_t>(13).zeros(8); })); },
               {"key 'k'", "unknown value type 13"});
  expect_error(
      [&] {
        parse(one_kv(
            [](Bytes& b) { b.str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0); }));
      },
      {"unknown value type 77"});
  expect_error(
      [&] {
        parse(one_kv([](Bytes& b) { b.str("k").put<uint32_t>(7).put<uint8_t>(2).zeros(8); }));
      },
      {"bool value 2"});
  // Duplicate key.
  Bytes d;
  d.header(3, 0, 2).kv_u32("dup", 1).kv_u32("dup", 2);
  expect_error([&] { parse(d.b); }, {"duplicate metadata key 'dup'"});
  // Alignment must be a power of two of integer type.
  Bytes a;
  a.header(3, 0, 1).kv_u32("general.alignment", 48);
  expect_error([&] { parse(a.b); }, {"general.alignment", "power of two"});
  Bytes a0;
  a0.header(3, 0, 1).kv_u32("general.alignment", 0);
  expect_error([&] { parse(a0.b); }, {"general.alignment", "power of two"});
  Bytes as;
  as.header(3, 0, 1).str("general.alignment").put<uint32_t>(8).str("32");
  expect_error([&] { parse(as.b); }, {"general.alignment", "string"});
}

TEST(GgufReader, RejectsCorruptTensorInfos) {
  // One tensor with the given info and enough zero data after it.
  auto one_tensor = [](std::vector<uint64_t> ne, uint32_t type, uint64_t off, size_t data = 4096) {
    Bytes b;
    b.header(3, 1, 0).tensor_info("t", ne, type, off).pad_to(32).zeros(data);
    return b.b;
  };
  EXPECT_NO_THROW(parse(one_tensor({256, 2}, 12, 0)));
  expect_error([&] { parse(one_tensor({8, 0}, 0, 0)); }, {"tensor 't'", "invalid dimension 0"});
  expect_error([&] { parse(one_tensor({~0ull}, 0, 0)); }, {"tensor 't'", "invalid dimension -1"});
  expect_error(
      [&] {
        parse(one_tensor({1ull << 40, 1ull << 40}, 0, 0));
      },
      {"tensor 't'", "overflows"});
  expect_error([&] { parse(one_tensor({1ull << 62, 2}, 0, 0)); }, {"tensor 't'", "overflows"});
  expect_error([&] { parse(one_tensor({1ull << 62}, 0, 0)); }, {"tensor 't'", "overflows"});
  expect_error([&] { parse(one_tensor({1, 1, 1, 1, 1}, 0, 0)); }, {"tensor 't'", "5 dimensions"});
  expect_error([&] { parse(one_tensor({}, 0, 0)); }, {"tensor 't'", "0 dimensions"});
  expect_error([&] { parse(one_tensor({32}, 4, 0)); }, {"tensor 't'", "Q4_2", "id 4"});
  expect_error([&] { parse(one_tensor({32}, 1000, 0)); },
               {"tensor 't'", "unknown ggml type id 1000"});
  expect_error(
      [&] {
        parse(one_tensor({100, 2}, 12, 0));
      },
      {"tensor 't'", "row length 100", "block size 256"});
  expect_error([&] { parse(one_tensor({8}, 0, 16)); }, {"tensor 't'", "offset 16", "alignment 32"});
  expect_error([&] { parse(one_tensor({8}, 0, 4096)); },
               {"truncated: tensor 't' needs bytes up to"});
  expect_error([&] { parse(one_tensor({8}, 0, ~0ull - 31)); }, {"tensor 't'"});
  expect_error([&] { parse(one_tensor({8}, 0, 0, 31)); }, {"truncated", "re-download"});
  // Duplicate tensor names.
  Bytes d;
  d.header(3, 2, 0).tensor_info("w", {8}, 0, 0).tensor_info("w", {8}, 0, 32).pad_to(32).zeros(64);
  expect_error([&] { parse(d.b); }, {"duplicate tensor name 'w'"});
}

TEST(GgufReader, TypedGetters) {
  GgufWriter w;
  w.add_u32("u", 5);
  w.add_u64("big", 1ull << 63);
  w.add_u64("small64", 12);
  w.add_f32("f", 0.25f);
  w.add_str("s", "text");
  w.add_bool("b", true);
  w.add_arr_i32("ai", {1, 2});
  w.add_arr_str("as", {"x"});
  w.add_arr_f32("af", {1.5f});
  GgufValue i8;
  i8.type = GgufType::INT8;
  i8.i = -3;
  w.add_value("i8", i8);
  auto f = parse(w.to_bytes());
  EXPECT_EQ(f->get_int("u"), 5);
  EXPECT_EQ(f->get_int("small64"), 12);
  EXPECT_EQ(f->get_int("i8"), -3);
  EXPECT_EQ(f->get_float("u"), 5.0);
  EXPECT_EQ(f->get_float("i8"), -3.0);
  EXPECT_EQ(f->get_float("big"), std::ldexp(1.0, 63));
  EXPECT_EQ(f->get_int_or("none", 9), 9);
  EXPECT_EQ(f->get_float_or("none", 1.5), 1.5);
  EXPECT_EQ(f->get_str_or("none", "fb"), "fb");
  EXPECT_TRUE(f->get_bool_or("none", true));
  EXPECT_EQ(f->get_int_or("u", 9), 5);
  EXPECT_FALSE(f->has("none"));
  EXPECT_EQ(f->find("none"), nullptr);

  expect_error([&] { f->get_int("none"); }, {"test.gguf: ", "missing", "'none'"});
  expect_error([&] { f->get_str("none"); }, {"missing", "'none'"});
  expect_error([&] { f->get_arr_str("none"); }, {"missing", "'none'"});
  expect_error([&] { f->get_int("big"); }, {"'big'", "out of range"});
  expect_error([&] { f->get_int("f"); }, {"'f'", "float32", "integer"});
  expect_error([&] { f->get_int("b"); }, {"'b'", "bool"});
  expect_error([&] { f->get_int_or("s", 1); }, {"'s'", "string"});
  expect_error([&] { f->get_float("s"); }, {"'s'", "string"});
  expect_error([&] { f->get_float_or("ai", 0); }, {"'ai'", "array of int32"});
  expect_error([&] { f->get_str("u"); }, {"'u'", "uint32", "expected string"});
  expect_error([&] { f->get_str_or("as", ""); }, {"'as'", "array of string"});
  expect_error([&] { f->get_bool_or("u", false); }, {"'u'", "bool"});
  expect_error([&] { f->get_arr_str("ai"); }, {"'ai'", "array of string"});
  expect_error([&] { f->get_arr_int("af"); }, {"'af'", "array of float32"});
  expect_error([&] { f->get_arr_float("as"); }, {"'as'", "array of string"});
  expect_error([&] { f->get_arr_int("u"); }, {"'u'", "uint32"});
}

TEST(GgufReader, OpenErrors) {
  const std::string missing = test::temp_path("gguf_missing", ".gguf");
  expect_error([&] { GgufFile::open(missing); }, {missing + ": cannot open"});
  expect_error([&] { GgufFile::open(std::filesystem::temp_directory_path().string()); },
               {"not a regular file"});
  const std::string empty = test::temp_path("gguf_empty", ".gguf");
  std::ofstream(empty).close();
  expect_error([&] { GgufFile::open(empty); }, {empty + ": empty file"});
  std::filesystem::remove(empty);
  const std::string bad = test::temp_path("gguf_bad", ".gguf");
  std::ofstream(bad) << "GGJT and some more bytes";
  expect_error([&] { GgufFile::open(bad); }, {bad + ": not a GGUF file"});
  std::filesystem::remove(bad);
}

TEST(GgufWriter, RejectsInvalidInput) {
  GgufWriter w;
  w.add_u32("k", 1);
  expect_error([&] { w.add_str("k", "again"); }, {"'k'", "duplicate key"});
  w.add_tensor("t", {32}, GgmlType::Q8_0, std::vector<uint8_t>(34));
  expect_error([&] { w.add_tensor("t", {32}, GgmlType::Q8_0, std::vector<uint8_t>(34)); },
               {"'t'", "duplicate"});
  expect_error([&] { w.add_tensor("u", {32}, GgmlType::Q8_0, std::vector<uint8_t>(33)); },
               {"'u'", "33 bytes", "expected 34"});
  expect_error([&] { w.add_tensor("u", {0}, GgmlType::F32, {}); }, {"'u'", "not positive"});
  expect_error(
      [&] {
        w.add_tensor("u", {1, 1, 1, 1, 1}, GgmlType::F32, std::vector<uint8_t>(4));
      },
      {"'u'", "dimensions"});
  EXPECT_THROW(w.add_tensor("u", {33}, GgmlType::Q8_0, std::vector<uint8_t>(34)), Error);
  GgufValue v;
  v.type = GgufType::UINT8;
  v.u = 256;
  expect_error([&] { w.add_value("v", v); }, {"'v'", "does not fit"});
  expect_error([&] { GgufArray::of_ints(GgufType::INT16, {1, 40000}); }, {"40000", "int16"});
  expect_error([&] { GgufArray::of_ints(GgufType::FLOAT32, {1}); }, {"float32", "not an integer type"});
  EXPECT_FALSE(parse(w.to_bytes())->has("v"));

  const std::string dir_missing = test::temp_path("gguf_nodir", ".gguf") + "/x.gguf";
  expect_error([&] { w.write(dir_missing); }, {dir_missing});
  // write() replaces an existing file and leaves no temporary behind.
  const std::string path = test::temp_path("gguf_replace", ".gguf");
  std::ofstream(path) << "old";
  w.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(GgufFile::open(path)->get_int("k"), 1);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vkmoe
