// --check-tensors: find_non_finite_block on every type against injected
// NaN/Inf at a random block and field; check_tensor_data names the tensor,
// block and row of a rewritten model file; the option wires it into loading.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "cpu/finite_check.h"
#include "engine/model/model.h"
#include "engine/model/tensor_check.h"
#include "tests/test_util.h"
#include "tools/command_setup.h"

namespace vkmoe {
namespace {

struct Field {
  size_t offset;  // byte offset in the block
  int width;      // 1: E8M0, 2: fp16/bf16, 4: f32
  const char* name;
};
struct TypeCase {
  GgmlType type;
  std::vector<Field> fields;
};

const std::vector<TypeCase> kTypes = {
    {GgmlType::F32, {{0, 4, "value"}}},
    {GgmlType::F16, {{0, 2, "value"}}},
    {GgmlType::BF16, {{0, 2, "value"}}},
    {GgmlType::Q8_0, {{offsetof(BlockQ8_0, d), 2, "scale d"}}},
    {GgmlType::Q4_K, {{offsetof(BlockQ4_K, d), 2, "scale d"}, {offsetof(BlockQ4_K, dmin), 2, "min scale dmin"}}},
    {GgmlType::Q5_K, {{offsetof(BlockQ5_K, d), 2, "scale d"}, {offsetof(BlockQ5_K, dmin), 2, "min scale dmin"}}},
    {GgmlType::Q6_K, {{offsetof(BlockQ6_K, d), 2, "scale d"}}},
    {GgmlType::Q8_K, {{offsetof(BlockQ8_K, d), 4, "value"}}},  // read by dequantizing
    {GgmlType::Q4_0, {{offsetof(BlockQ4_0, d), 2, "scale d"}}},
    {GgmlType::Q4_1, {{offsetof(BlockQ4_1, d), 2, "scale d"}, {offsetof(BlockQ4_1, m), 2, "min m"}}},
    {GgmlType::Q5_0, {{offsetof(BlockQ5_0, d), 2, "scale d"}}},
    {GgmlType::Q5_1, {{offsetof(BlockQ5_1, d), 2, "scale d"}, {offsetof(BlockQ5_1, m), 2, "min m"}}},
    {GgmlType::IQ4_NL, {{offsetof(BlockIQ4_NL, d), 2, "scale d"}}},
    {GgmlType::IQ4_XS, {{offsetof(BlockIQ4_XS, d), 2, "scale d"}}},
    {GgmlType::Q2_K, {{offsetof(BlockQ2_K, d), 2, "scale d"}, {offsetof(BlockQ2_K, dmin), 2, "min scale dmin"}}},
    {GgmlType::Q3_K, {{offsetof(BlockQ3_K, d), 2, "scale d"}}},
    {GgmlType::MXFP4, {{offsetof(BlockMXFP4, e), 1, "scale e"}}},
};

// A non-finite pattern of the field's width: NaN or ±Inf, picked at random.
void poison(uint8_t* p, const Field& f, GgmlType t, std::mt19937& rng) {
  if (f.width == 1) {  // E8M0: 0xFF is not a number
    *p = 0xFF;
    return;
  }
  if (f.width == 4) {
    const float v[] = {NAN, INFINITY, -INFINITY};
    std::memcpy(p, &v[rng() % 3], 4);
    return;
  }
  const bool bf16 = t == GgmlType::BF16;
  const uint16_t v[] = {uint16_t(bf16 ? 0x7FC0 : 0x7E00), uint16_t(bf16 ? 0x7F80 : 0x7C00),
                        uint16_t(bf16 ? 0xFF80 : 0xFC00)};
  std::memcpy(p, &v[rng() % 3], 2);
}

TEST(FindNonFiniteBlock, FindsTheInjectedBlockAndFieldInEveryType) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0, 3);
  for (const TypeCase& tc : kTypes) {
    SCOPED_TRACE(type_name(tc.type));
    const TypeTraits& tt = type_traits(tc.type);
    const int64_t n_blocks = 1 + rng() % 40;
    std::vector<float> x(n_blocks * tt.block_size);
    for (float& v : x) v = nd(rng);
    std::vector<uint8_t> data(row_bytes(tc.type, x.size()));
    quantize_row(tc.type, x.data(), data.data(), x.size());
    EXPECT_FALSE(find_non_finite_block(tc.type, data.data(), 0, n_blocks));
    for (const Field& f : tc.fields) {
      const int64_t bad = rng() % n_blocks;
      std::vector<uint8_t> d = data;
      poison(d.data() + bad * tt.type_size + f.offset, f, tc.type, rng);
      const auto found = find_non_finite_block(tc.type, d.data(), 0, n_blocks);
      ASSERT_TRUE(found) << f.name << " of block " << bad;
      EXPECT_EQ(found->block, bad);
      EXPECT_STREQ(found->field, f.name);
      EXPECT_FALSE(find_non_finite_block(tc.type, d.data(), 0, bad));  // ranges are honoured
      EXPECT_FALSE(find_non_finite_block(tc.type, d.data(), bad + 1, n_blocks));
    }
  }
}

// The synthetic model with one Q8_0 expert block of blk.1.ffn_up_exps given an
// infinite scale.
std::vector<uint8_t> model_with_bad_scale(int64_t* bad_block, int64_t* row) {
  SynthSpec s;
  s.n_layer = 2;
  s.n_vocab = 512;
  s.quant = "Q8_0";
  const auto base = synth_model_bytes(s);
  const auto f = GgufFile::from_memory(base);
  const char* name = "blk.1.ffn_up_exps.weight";
  const GgufTensor& t = *f->tensor(name);
  std::vector<uint8_t> data(t.data, t.data + t.nbytes);
  *bad_block = static_cast<int64_t>(t.nbytes / sizeof(BlockQ8_0)) * 2 / 3;
  *row = *bad_block * QK8_0 / t.ne[0];
  const uint16_t inf = 0x7C00;
  std::memcpy(data.data() + *bad_block * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, d), &inf, 2);
  return test::rewrite_gguf(base, {name}, [&](GgufWriter& w) { w.add_tensor(name, t.ne, t.type, data); });
}

TEST(CheckTensorData, NamesTensorBlockAndRow) {
  SynthSpec s;
  s.n_vocab = 512;
  s.quant = "Q4_K_M";
  EXPECT_NO_THROW(check_tensor_data(*GgufFile::from_memory(synth_model_bytes(s)), 2));
  int64_t block = 0, row = 0;
  const auto f = GgufFile::from_memory(model_with_bad_scale(&block, &row));
  for (int threads : {1, 3}) {
    try {
      check_tensor_data(*f, threads);
      ADD_FAILURE() << "no error with " << threads << " threads";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "tensor 'blk.1.ffn_up_exps.weight' holds a NaN or infinity (scale d of Q8_0 block " +
                                           std::to_string(block) + ", row " + std::to_string(row) + ")");
    }
  }
}

TEST(CheckTensorData, OptionChecksTheFileBeforeRunning) {
  int64_t block = 0, row = 0;
  const std::string path = test::temp_path("check_tensors", ".gguf");
  {
    std::FILE* fp = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(fp);
    const auto bytes = model_with_bad_scale(&block, &row);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), fp), bytes.size());
    std::fclose(fp);
  }
  const std::vector<OptionSpec> spec = kModelOptions + kEngineOptions;
  const char* with[] = {"-m", path.c_str(), "--check-tensors", "-t", "2"};
  const char* without[] = {"-m", path.c_str()};
  EXPECT_NO_THROW(load_model(parse_options("run", spec, 2, without)));  // the structure is fine
  try {
    load_model(parse_options("run", spec, 5, with));
    ADD_FAILURE() << "--check-tensors let the file through";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'blk.1.ffn_up_exps.weight' holds a NaN or infinity"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vkmoe
