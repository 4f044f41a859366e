// llama.cpp-style tokenizer test vectors: for each ggml-vocab-NAME.gguf in the
// fixtures folder, NAME.gguf.inp holds inputs separated by
// "\n__ggml_vocab_test__\n" and NAME.gguf.out the expected ids (without BOS),
// one line per input. The folder is $VKMOE_FIXTURES (the fixtures folder or its
// vocab/ subfolder) or ../shared/fixtures/vocab beside the repository root,
// found from this source file's path, the test binary's path or the working
// directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/model/tokenizer.h"
#include "tests/fixtures.h"

namespace vkmoe {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSeparator = "\n__ggml_vocab_test__\n";


// Vocabulary names (NAME of ggml-vocab-NAME.gguf) that have .inp and .out files.
std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  const fs::path dir = test::fixtures_dir("vocab");
  if (dir.empty()) return {"none"};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (!f.starts_with("ggml-vocab-") || !f.ends_with(".gguf")) continue;
    if (!fs::exists(e.path().string() + ".inp") || !fs::exists(e.path().string() + ".out")) continue;
    names.push_back(f.substr(11, f.size() - 11 - 5));
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("none");
  return names;
}

std::vector<std::string> split_inputs(const std::string& s) {
  std::vector<std::string> out;
  const std::string sep = kSeparator;
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(sep, pos);
    if (hit == std::string::npos) break;
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  if (pos < s.size()) out.push_back(s.substr(pos));  // no trailing separator
  return out;
}

std::vector<std::vector<int32_t>> parse_outputs(const std::string& s) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream lines(s);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    for (long id; ids >> id;) v.push_back(static_cast<int32_t>(id));
    out.push_back(std::move(v));
  }
  return out;
}

std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (c >= 32 && c != 127) out += static_cast<char>(c);  // UTF-8 passes through
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t id : v) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

class VocabFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabFixture, EncodesEveryInput) {
  const fs::path dir = test::fixtures_dir("vocab");
  if (dir.empty())
    GTEST_SKIP() << "../shared/fixtures/vocab not found (set VKMOE_FIXTURES to the fixtures folder)";
  if (GetParam() == "none") GTEST_SKIP() << dir.string() << " holds no ggml-vocab-*.gguf with .inp/.out";
  const std::string base = (dir / ("ggml-vocab-" + GetParam() + ".gguf")).string();
  const auto file = GgufFile::open(base);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = Tokenizer::from_gguf(*file);
  } catch (const Error& e) {
    // Only BPE and SentencePiece are supported: other types must say which.
    const std::string model = file->get_str_or("tokenizer.ggml.model", "");
    ASSERT_NE(model, "gpt2") << e.what();
    ASSERT_NE(model, "llama") << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + model + "'"), std::string::npos) << e.what();
    std::printf("[ vocab    ] %s: unsupported tokenizer type, rejected with: %s\n", GetParam().c_str(), e.what());
    return;
  }
  const std::vector<std::string> inputs = split_inputs(test::read_file(base + ".inp"));
  const std::vector<std::vector<int32_t>> expected = parse_outputs(test::read_file(base + ".out"));
  ASSERT_EQ(inputs.size(), expected.size()) << base << ": .inp and .out disagree on the number of cases";
  int passed = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::vector<int32_t> got = tok->encode(inputs[k], false);
    if (got == expected[k]) {
      ++passed;
      continue;
    }
    ADD_FAILURE() << GetParam() << " case " << k << "\n  input:    \"" << escaped(inputs[k])
                  << "\"\n  expected: " << join(expected[k]) << "\n  got:      " << join(got);
  }
  std::printf("[ vocab    ] %s: %d/%zu cases pass\n", GetParam().c_str(), passed, inputs.size());
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Vocab, VocabFixture, ::testing::ValuesIn(fixture_names()), param_name);

// gpt-4o (o200k, gpt-oss's tokenizer.ggml.pre): llama.cpp ships no
// ggml-vocab-gpt-4o.gguf test vectors, so this says whether the fixtures folder
// has one; when it does, Vocab/VocabFixture.EncodesEveryInput/gpt_4o runs it.
TEST(VocabGpt4o, FixtureRunsWhenPresent) {
  const fs::path dir = test::fixtures_dir("vocab");
  const fs::path base = dir.empty() ? fs::path() : dir / "ggml-vocab-gpt-4o.gguf";
  if (base.empty() || !fs::exists(base) || !fs::exists(base.string() + ".inp") ||
      !fs::exists(base.string() + ".out"))
    GTEST_SKIP() << "no ggml-vocab-gpt-4o.gguf with .inp/.out in "
                 << (dir.empty() ? std::string("../shared/fixtures/vocab (not found)") : dir.string())
                 << " (llama.cpp's models/ has none either): the gpt-4o pre-tokenizer is checked by "
                    "TokenizerPre.Gpt4o* only";
  const std::vector<std::string> names = fixture_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "gpt-4o"), names.end());
}

// Tokenizer types other than BPE ("gpt2") and SentencePiece ("llama"), and
// unknown pre-tokenizers, are one-line errors that name them.
void expect_error_naming(const GgufWriter& w, const std::string& what) {
  const auto f = GgufFile::from_memory(w.to_bytes(), "vocab.gguf");
  try {
    Tokenizer::from_gguf(*f);
    ADD_FAILURE() << "expected an Error naming " << what;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find("'" + what + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vocab.gguf"), std::string::npos) << msg;
  }
}

GgufWriter small_vocab(const char* model, const char* pre) {
  GgufWriter w;
  w.add_str("tokenizer.ggml.model", model);
  if (pre) w.add_str("tokenizer.ggml.pre", pre);
  w.add_arr_str("tokenizer.ggml.tokens", {"[UNK]", "a", "b", "ab", "##b"});
  w.add_arr_f32("tokenizer.ggml.scores", {0.f, 0.f, 0.f, 0.f, 0.f});
  w.add_arr_str("tokenizer.ggml.merges", {"a b"});
  return w;
}

TEST(VocabTypes, UnsupportedTokenizerModelsAreNamed) {
  for (const char* model : {"bert", "t5", "rwkv", "gemma4", "no_vocab", "ugm"})
    expect_error_naming(small_vocab(model, nullptr), model);
}

TEST(VocabTypes, UnknownPreTokenizerIsNamed) {
  expect_error_naming(small_vocab("gpt2", "not-a-real-pre"), "not-a-real-pre");
  // Known names and the defaults load.
  for (const char* pre : {"default", "gpt-2", "llama-bpe", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder",
                          "falcon", "starcoder", "refact", "command-r", "mpt", "gpt-4o", "llama4"}) {
    const auto f = GgufFile::from_memory(small_vocab("gpt2", pre).to_bytes(), "vocab.gguf");
    EXPECT_NO_THROW(Tokenizer::from_gguf(*f)) << pre;
  }
  const auto f = GgufFile::from_memory(small_vocab("gpt2", nullptr).to_bytes(), "vocab.gguf");
  EXPECT_NO_THROW(Tokenizer::from_gguf(*f)) << "a missing tokenizer.ggml.pre means 'default'";
  const auto spm = GgufFile::from_memory(small_vocab("llama", "default").to_bytes(), "vocab.gguf");
  EXPECT_NO_THROW(Tokenizer::from_gguf(*spm));
}

}  // namespace
}  // namespace vkmoe
