#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <regex>
#include <set>
#include <unordered_set>

#include "engine/model/gguf.h"
#include "engine/model/tokenizer.h"
#include "engine/model/unicode.h"
#include "tools/synth_vocab.h"
#include "tests/seed.h"

namespace vkmoe {
namespace {

uint64_t fresh_seed() { return test::test_seed(); }

std::string seed_note(uint64_t seed) { return "seed " + std::to_string(seed); }

// Random text mixing ASCII words, punctuation, digit runs, whitespace runs,
// multi-byte UTF-8 (Latin, Cyrillic, CJK) and emoji.
std::string random_text(std::mt19937_64& rng) {
  static const std::vector<std::string> kPieces = {
      "the", "The", "river", " town", "bread", "a", "I", "it's", "they'd", "WE'RE", "x",
      ".", ",", "!", "?", "...", "--", "(", ")", "\"", "'", "<", ">", "|", "<|", "#", "$", "{}",
      " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ",
      "0", "7", "42", "1921", "3.14", "123456",
      "caf\xC3\xA9", "na\xC3\xAFve", "stra\xC3\x9F" "e", "\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
      "\xE4\xBD\xA0\xE5\xA5\xBD", "\xE2\x82\xAC", "\xE2\x80\x94", "\xC2\xA0",
      "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5"};
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  std::uniform_int_distribution<int> count(0, 40), byte(1, 126), coin(0, 9);
  std::string s;
  const int n = count(rng);
  for (int k = 0; k < n; ++k) {
    if (coin(rng) == 0)
      s += static_cast<char>(byte(rng));  // any ASCII byte, control characters included
    else
      s += kPieces[pick(rng)];
  }
  return s;
}

bool contains_special_text(const Tokenizer& tok, const std::string& s) {
  for (int id = 0; id < tok.n_vocab(); ++id) {
    const int32_t t = tok.token_type(id);
    if ((t == kTokControl || t == kTokUserDefined) && s.find(tok.vocab().tokens[id]) != std::string::npos)
      return true;
  }
  return false;
}

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out;
}

void check_round_trips(const Tokenizer& tok, int n_strings) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int k = 0; k < n_strings; ++k) {
    const std::string s = random_text(rng);
    if (contains_special_text(tok, s)) continue;  // those decode without the control tokens
    const std::vector<int32_t> ids = tok.encode(s, false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab());
    ASSERT_EQ(tok.decode(ids), s) << "text: " << printable(s);
    std::string streamed;  // piece() concatenation gives the same bytes, up to the SPM prefix
    for (int32_t id : ids) streamed += tok.piece(id);
    if (tok.kind() == TokenizerKind::Spm && !s.empty()) streamed.erase(0, 1);
    ASSERT_EQ(streamed, s) << "text: " << printable(s);
  }
}

const Tokenizer& synth_tokenizer(TokenizerKind kind) {
  static const Tokenizer bpe(make_synth_vocab(TokenizerKind::Bpe, 2048));
  static const Tokenizer spm(make_synth_vocab(TokenizerKind::Spm, 2048));
  return kind == TokenizerKind::Bpe ? bpe : spm;
}

std::vector<std::string> as_strings(const std::vector<std::string_view>& v) {
  return {v.begin(), v.end()};
}

TEST(TokenizerPre, Gpt2SplitsLikeTheRegex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(as_strings(bpe_pretokenize("Hello world's  test 123abc\n\n  x", BpePre::Gpt2)),
            (V{"Hello", " world", "'s", " ", " test", " 123", "abc", "\n\n ", " x"}));
  EXPECT_EQ(as_strings(bpe_pretokenize("A'LL ok!!\n\nyes ", BpePre::Gpt2)),
            (V{"A", "'", "LL", " ok", "!!", "\n", "\n", "yes", " "}));
}

TEST(TokenizerPre, Qwen2AndLlama3SplitsLikeTheRegex) {
  using V = std::vector<std::string>;
  EXPECT_EQ(as_strings(bpe_pretokenize("Hello world's  test 123abc\n\n  x", BpePre::Qwen2)),
            (V{"Hello", " world", "'s", " ", " test", " ", "1", "2", "3", "abc", "\n\n", " ", " x"}));
  EXPECT_EQ(as_strings(bpe_pretokenize("A'LL ok!!\n\nyes (x) 12345", BpePre::Llama3)),
            (V{"A", "'LL", " ok", "!!\n\n", "yes", " (", "x", ")", " ", "123", "45"}));
  // Non-ASCII letters join words, emoji are punctuation-like.
  EXPECT_EQ(as_strings(bpe_pretokenize("caf\xC3\xA9 \xF0\x9F\x98\x80!", BpePre::Qwen2)),
            (V{"caf\xC3\xA9", " \xF0\x9F\x98\x80!"}));
}

TEST(TokenizerPre, Qwen35JoinsMarksToLetters) {
  using V = std::vector<std::string>;
  const std::string s = "e\xCC\x81t\xC3\xA9 x";  // e, combining acute, t, e-acute
  EXPECT_EQ(as_strings(bpe_pretokenize(s, BpePre::Qwen2)), (V{"e", "\xCC\x81t\xC3\xA9", " x"}));
  EXPECT_EQ(as_strings(bpe_pretokenize(s, BpePre::Qwen35)), (V{"e\xCC\x81t\xC3\xA9", " x"}));
}

// Pre-tokenizers made of several split passes: each pass cuts the pieces the
// previous ones left (the expected pieces follow the regexes in pretokenize.h).
TEST(TokenizerPre, MultiPassSplits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(as_strings(bpe_pretokenize("Hello, world!! 12345 x$y", BpePre::Default)),
            (V{"Hello", ",", " world", "!!", " ", "123", "45", " x", "$", "y"}));
  EXPECT_EQ(as_strings(bpe_pretokenize("a+b 1234\n =", BpePre::Falcon)),
            (V{"a", "+", "b", " ", "123", "4", "\n ", "="}));
  EXPECT_EQ(as_strings(bpe_pretokenize("ied 4 \xC2\xBD months", BpePre::Starcoder)),
            (V{"ied", " ", "4", " ", "\xC2\xBD", " months"}));
  EXPECT_EQ(as_strings(bpe_pretokenize("Hello \xE4\xB8\x96\xE7\x95\x8C" "123\nfoo.bar", BpePre::DeepseekCoder)),
            (V{"Hello", " ", "\xE4\xB8\x96\xE7\x95\x8C", "1", "2", "3", "\n", "foo", ".", "bar"}));
  // DeepSeek LLM: the ASCII punctuation class spans the letters, so a word with a
  // non-ASCII letter is cut around it (as llama.cpp does).
  EXPECT_EQ(as_strings(bpe_pretokenize("Stra\xC3\x9F" "e  x\n", BpePre::DeepseekLlm)),
            (V{"Stra", "\xC3\x9F", "e", " ", " x", "\n"}));
  EXPECT_EQ(as_strings(bpe_pretokenize("Hello world's 12345 .NET \xE6\x97\xA5\xE6\x9C\xAC\xE3\x83\x86\n\n",
                                       BpePre::Deepseek3)),
            (V{"Hello", " world", "'s", " ", "123", "45", " .", "NET", " ", "\xE6\x97\xA5\xE6\x9C\xAC\xE3\x83\x86",
               "\n\n"}));
}

// llama.cpp's own way of applying the GPT-4o regex: each code point collapsed to
// one byte (ASCII as is, else a byte per category, non-ASCII space as \v) and
// std::regex run over that with the regex's \p{..} rewritten to those bytes
// (unicode_regex_split in llama.cpp's unicode.cpp).
std::vector<std::string> gpt4o_std_regex(const std::string& text) {
  // LLAMA_VOCAB_PRE_TYPE_GPT4O's regex_exprs in llama.cpp's llama-vocab.cpp, verbatim.
  static const std::string kRegex =
      "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'["
      "lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'["
      "vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static const std::regex expr = [] {
    std::string out;
    bool inside = false;
    for (size_t i = 0; i < kRegex.size(); ++i) {
      if (kRegex[i] == '[' && (i == 0 || kRegex[i - 1] != '\\')) inside = true;
      if (inside && kRegex[i] == ']' && kRegex[i - 1] != '\\') inside = false;
      if (kRegex.compare(i, 5, "\\p{L}") == 0 || kRegex.compare(i, 5, "\\p{N}") == 0) {
        const bool letter = kRegex[i + 3] == 'L';
        if (!inside) out += '[';
        out += static_cast<char>(letter ? 0xD2 : 0xD1);
        out += letter ? "A-Za-z" : "0-9";
        if (!inside) out += ']';
        i += 4;
        continue;
      }
      out += kRegex[i];
    }
    return std::regex(out, std::regex_constants::optimize | std::regex_constants::nosubs);
  }();
  std::string collapsed;
  std::vector<size_t> offs;  // byte offset of each code point
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const size_t len = unicode::decode(text, pos, cp);
    offs.push_back(pos);
    pos += len;
    if (cp < 128) {
      collapsed += static_cast<char>(cp);
      continue;
    }
    switch (unicode::category(cp)) {
      case unicode::Cat::Space: collapsed += '\v'; break;
      case unicode::Cat::Letter: collapsed += '\xD2'; break;
      case unicode::Cat::Number: collapsed += '\xD1'; break;
      case unicode::Cat::Punct: collapsed += '\xD3'; break;
      case unicode::Cat::Mark: collapsed += '\xD4'; break;
      case unicode::Cat::Symbol: collapsed += '\xD5'; break;
      default: collapsed += '\xD0'; break;
    }
  }
  offs.push_back(text.size());
  std::vector<std::string> pieces;
  size_t last = 0;
  auto cut = [&](size_t b, size_t e) { pieces.push_back(text.substr(offs[b], offs[e] - offs[b])); };
  for (auto it = std::sregex_iterator(collapsed.begin(), collapsed.end(), expr); it != std::sregex_iterator(); ++it) {
    const auto b = static_cast<size_t>(it->position()), e = b + static_cast<size_t>(it->length());
    if (b > last) cut(last, b);
    cut(b, e);
    last = e;
  }
  if (last < collapsed.size()) cut(last, collapsed.size());
  return pieces;
}

// GPT-4o (o200k) as llama.cpp runs it: letter case is ASCII-only (a non-ASCII
// letter counts as upper and lower case), marks are not letters. The expected
// pieces are read off the regex in pretokenize.cpp by hand.
TEST(TokenizerPre, Gpt4oSplitsLikeTheRegex) {
  using V = std::vector<std::string>;
  const std::pair<std::string, V> cases[] = {
      // Contractions are suffixes of a word, in either case.
      {"it's IT'S It'S they'RE we'Ve I'm YOU'LL he'D don't",
       {"it's", " IT'S", " It'S", " they'RE", " we'Ve", " I'm", " YOU'LL", " he'D", " don't"}},
      {"'s 'S x 's rock'n'roll y'all'd 'LL",
       {"'s", " '", "S", " x", " '", "s", " rock", "'n", "'roll", " y", "'all'd", " '", "LL"}},
      {"A'LL ok!!\n\nyes (x) 12345", {"A'LL", " ok", "!!\n\n", "yes", " (", "x", ")", " ", "123", "45"}},
      // Cased words: upper* lower+ first, else upper+.
      {"CamelCase HTTPServer XMLHttpRequest iPhone ABC aBC",
       {"Camel", "Case", " HTTPServer", " XMLHttp", "Request", " i", "Phone", " ABC", " a", "BC"}},
      // Digits in threes.
      {"1 12 123 1234 12345 123456 1234567 x2 abc123def $100",
       {"1", " ", "12", " ", "123", " ", "123", "4", " ", "123", "45", " ", "123", "456", " ", "123", "456", "7",
        " x", "2", " abc", "123", "def", " $", "100"}},
      {"x\u00B2\u00B3\u2074\u2075", {"x", "\u00B2\u00B3\u2074", "\u2075"}},
      // Punctuation takes the newlines and slashes after it.
      {"a.\n/b foo!!\r\n\r\nbar http://x.com/a //\n//x",
       {"a", ".\n/", "b", " foo", "!!\r\n\r\n", "bar", " http", "://", "x", ".com", "/a", " //\n//", "x"}},
      {"x/\n\n/y end.\n  next", {"x", "/\n\n/", "y", " end", ".\n", " ", " next"}},
      // White space: up to the last newline, all but the last before a word, all at the end.
      {"a  \n  b", {"a", "  \n", " ", " b"}},
      {"end  \n \t", {"end", "  \n", " \t"}},
      {"\n\nfoo\r\n", {"\n\n", "foo", "\r\n"}},
      {"\t\tfoo x   ", {"\t", "\tfoo", " x", "   "}},
      {" \n x", {" \n", " x"}},
      {"a\u3000b\u00A0c", {"a", "\u3000b", "\u00A0c"}},
      // Non-ASCII letters are both cases; marks are not letters.
      {"Ελληνικά ΑΒΓ δέλτα", {"Ελληνικά", " ΑΒΓ", " δέλτα"}},
      {"École ÉCOLE NAÏVE naïve", {"École", " É", "COLE", " NAÏ", "VE", " naïve"}},
      {"नमस्ते", {"नमस", "्त", "े"}},
      {"สวัสดี", {"สว", "ัสด", "ี"}},
      {"e\u0301t\u00E9 x e\u0301 y", {"e", "\u0301t\u00E9", " x", " e", "\u0301", " y"}},
      {"你好，世界。日本語テキスト", {"你好", "，世界", "。日本語テキスト"}},
      {"مرحبا بالعالم", {"مرحبا", " بالعالم"}},
      // Emoji are punctuation-like: a word's prefix, or a run.
      {"hi 😀😀! 😀abc 👍🏽ok 👨‍👩‍👧 🇯🇵\n",
       {"hi", " 😀😀!", " 😀", "abc", " 👍🏽", "ok", " 👨‍👩‍👧", " 🇯🇵\n"}},
      {"😀abc👍🏽ok", {"😀abc", "👍🏽", "ok"}},
  };
  for (const auto& [text, want] : cases) {
    EXPECT_EQ(as_strings(bpe_pretokenize(text, BpePre::Gpt4o)), want) << text;
    EXPECT_EQ(gpt4o_std_regex(text), want) << "the std::regex reference on " << text;
  }
  EXPECT_TRUE(bpe_pretokenize("", BpePre::Gpt4o).empty());
}

// Random text from the characters the regex tells apart.
std::string gpt4o_fuzz_text(std::mt19937_64& rng) {
  static const std::vector<std::string> kPieces = {
      "a", "z", "q", "A", "Z", "Q", "'", "'s", "'S", "'t", "'re", "'RE", "'Ve", "'m", "'ll", "'LL", "'d", "'x",
      "0", "5", "9", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "/", "//", ".", "!", "$", "-", "\x01",
      "\xC3\xA9", "\xC3\x89", "\xCE\xB1", "\xCE\x91", "\xC7\x85", "\xCA\xB0", "\xE4\xBD\xA0",  // é É α Α ǅ ʰ 你
      "\xCC\x81", "\xE0\xA5\x8D", "\xE0\xA4\xA8",                                             // marks, न
      "\xC2\xB2", "\xD9\xA3", "\xE2\x85\xA0",                                                 // ² ٣ Ⅰ
      "\xC2\xA0", "\xE3\x80\x80", "\xC2\x85", "\xE2\x80\xA8",                                 // spaces
      "\xE2\x80\x8D", "\xF0\x9F\x98\x80", "\xF0\x9F\x8F\xBD", "\xEF\xBC\x8C", "\xE2\x82\xAC",  // ZWJ 😀 🏽 ， €
      "\xC3", "\xFF"};                                                                        // malformed
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  std::uniform_int_distribution<int> count(0, 24);
  std::string s;
  for (int k = count(rng); k > 0; --k) s += kPieces[pick(rng)];
  return s;
}

// The hand-written splitter against that reference, on fuzzed and mixed text.
TEST(TokenizerPre, Gpt4oMatchesStdRegexReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int k = 0; k < 4000; ++k) {
    const std::string s = k % 4 == 3 ? random_text(rng) : gpt4o_fuzz_text(rng);
    ASSERT_EQ(as_strings(bpe_pretokenize(s, BpePre::Gpt4o)), gpt4o_std_regex(s)) << printable(s);
  }
}

constexpr BpePre kAllPre[] = {BpePre::Default, BpePre::Gpt2, BpePre::Llama3, BpePre::Qwen2, BpePre::Qwen35,
                              BpePre::DeepseekLlm, BpePre::DeepseekCoder, BpePre::Deepseek3, BpePre::Falcon,
                              BpePre::Starcoder, BpePre::Gpt4o};

TEST(TokenizerPre, NamesMapToPreTokenizers) {
  EXPECT_EQ(bpe_pre_from_name("")->pre, BpePre::Default);
  EXPECT_EQ(bpe_pre_from_name("default")->pre, BpePre::Default);
  EXPECT_EQ(bpe_pre_from_name("qwen2")->pre, BpePre::Qwen2);
  EXPECT_TRUE(bpe_pre_from_name("llama-bpe")->ignore_merges);
  EXPECT_FALSE(bpe_pre_from_name("dbrx")->ignore_merges);
  EXPECT_EQ(bpe_pre_from_name("command-r")->pre, BpePre::Starcoder);
  // llama.cpp's names for LLAMA_VOCAB_PRE_TYPE_GPT4O, and minimax-m2 (its own type, the same regex).
  for (const char* name : {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}) {
    ASSERT_TRUE(bpe_pre_from_name(name).has_value()) << name;
    EXPECT_EQ(bpe_pre_from_name(name)->pre, BpePre::Gpt4o) << name;
    EXPECT_FALSE(bpe_pre_from_name(name)->ignore_merges) << name;
  }
  EXPECT_FALSE(bpe_pre_from_name("gpt-4").has_value());
  EXPECT_FALSE(bpe_pre_from_name("GPT-4o").has_value());
  EXPECT_FALSE(bpe_pre_from_name("Qwen2").has_value());
  EXPECT_FALSE(bpe_pre_from_name("tekken").has_value());
  EXPECT_NE(bpe_pre_known_names().find("deepseek-coder"), std::string::npos);
}

TEST(TokenizerPre, LongRunsStayLinear) {
  std::string s = std::string(200000, ' ') + "1" + std::string(200000, '\t') + "\xE2\x98\x83";
  for (int k = 0; k < 20000; ++k) s += "\xE3\x80\x80" "a1.";
  // GPT-4o's cased words back off over upper-case runs: long runs of both kinds.
  s += "\xC3\x89" + std::string(200000, 'A') + "'S" + std::string(100000, 'b');
  for (int k = 0; k < 20000; ++k) s += "\xC3\x89" "ABCDEFGH\xC3\x89" "x";
  for (BpePre pre : kAllPre) {
    const auto t0 = std::chrono::steady_clock::now();
    size_t bytes = 0;
    for (std::string_view w : bpe_pretokenize(s, pre)) bytes += w.size();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(bytes, s.size());
    EXPECT_LT(secs, 2.0) << static_cast<int>(pre);
  }
}

TEST(TokenizerPre, PiecesCoverTheInput) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_note(seed));
  std::mt19937_64 rng(seed);
  for (BpePre pre : kAllPre) {
    for (int k = 0; k < 200; ++k) {
      std::string s = random_text(rng);
      if (k % 10 == 0) s += "\xC3";  // truncated UTF-8 must stay covered too
      std::string joined;
      for (std::string_view w : bpe_pretokenize(s, pre)) {
        ASSERT_FALSE(w.empty());
        joined += w;
      }
      ASSERT_EQ(joined, s) << printable(s);
    }
  }
}

TEST(TokenizerBpe, RoundTripsRandomText) { check_round_trips(synth_tokenizer(TokenizerKind::Bpe), 300); }

TEST(TokenizerSpm, RoundTripsRandomText) { check_round_trips(synth_tokenizer(TokenizerKind::Spm), 300); }

TEST(TokenizerBpe, MergesCompressEnglish) {
  const Tokenizer& tok = synth_tokenizer(TokenizerKind::Bpe);
  const std::string text = "The baker and the teacher walked to the river in the morning.";
  const auto ids = tok.encode(text, true);
  EXPECT_LT(ids.size(), text.size() / 2) << "merges learned from English should apply";
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(TokenizerBpe, SpecialTokensAreSingleIds) {
  const Tokenizer& tok = synth_tokenizer(TokenizerKind::Bpe);
  const int32_t start = tok.find_token("<|im_start|>"), end = tok.find_token("<|im_end|>");
  ASSERT_GE(start, 0);
  ASSERT_GE(end, 0);
  const auto ids = tok.encode("<|im_start|>user\nhi there<|im_end|>\n", false);
  std::vector<int32_t> expected = {start};
  for (int32_t id : tok.encode("user\nhi there", false)) expected.push_back(id);
  expected.push_back(end);
  for (int32_t id : tok.encode("\n", false)) expected.push_back(id);
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tok.decode(ids), "user\nhi there\n");  // control tokens print nothing
  EXPECT_TRUE(tok.is_eog(end));
  EXPECT_TRUE(tok.is_eog(tok.eos()));
  EXPECT_TRUE(tok.is_eog(tok.find_token("<|endoftext|>")));
  EXPECT_FALSE(tok.is_eog(start));
  EXPECT_FALSE(tok.is_eog(tok.encode("the", false)[0]));
  EXPECT_EQ(tok.encode("hi", true), tok.encode("hi", false));  // Qwen-style: no BOS
}

TEST(TokenizerSpm, SpecialTokensAndBos) {
  const Tokenizer& tok = synth_tokenizer(TokenizerKind::Spm);
  const auto ids = tok.encode("hello</s>world", true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), tok.bos());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), tok.eos()), 1);
  EXPECT_EQ(tok.decode(ids), "helloworld");
  EXPECT_TRUE(tok.is_eog(tok.eos()));
  EXPECT_EQ(tok.encode("", true), std::vector<int32_t>{tok.bos()});
  EXPECT_TRUE(tok.encode("", false).empty());
  EXPECT_THROW(tok.decode({tok.n_vocab()}), Error);
  EXPECT_THROW(tok.piece(-1), Error);
}

VocabData tiny_bpe(StringList merges) {
  VocabData v;
  v.kind = TokenizerKind::Bpe;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(bpe_byte_to_unicode(static_cast<uint8_t>(b)));
  for (const char* t : {"ab", "bc", "abc", "aa", "\xC4\xA0" "a"}) v.tokens.push_back(t);
  v.merges = std::move(merges);
  return v;
}

TEST(TokenizerBpe, LowestRankMergesFirst) {
  auto id = [](const Tokenizer& t, const char* s) { return t.find_token(s); };
  {  // "b c" outranks "a b": a + bc, and no "a bc" merge exists
    const Tokenizer t(tiny_bpe({"b c", "a b", "ab c"}));
    EXPECT_EQ(t.encode("abc", false), (std::vector<int32_t>{'a', id(t, "bc")}));
  }
  {  // "a b" first, then "ab c"
    const Tokenizer t(tiny_bpe({"a b", "b c", "ab c"}));
    EXPECT_EQ(t.encode("abc", false), (std::vector<int32_t>{id(t, "abc")}));
  }
  {  // equal pairs merge left to right; " aa" is one word whose space is "Ġ"
    const Tokenizer t(tiny_bpe({"a a", "Ġ a"}));
    EXPECT_EQ(t.encode("aaa aa", false), (std::vector<int32_t>{id(t, "aa"), 'a', ' ', id(t, "aa")}));
    EXPECT_EQ(t.decode(t.encode("aaa aa", false)), "aaa aa");
  }
  {
    const Tokenizer t(tiny_bpe({"Ġ a", "a a"}));
    EXPECT_EQ(t.encode("aaa aa", false), (std::vector<int32_t>{id(t, "aa"), 'a', id(t, "Ġa"), 'a'}));
  }
  {  // no merges: one token per byte, in GPT-2's byte mapping
    const Tokenizer t(tiny_bpe({}));
    EXPECT_EQ(t.encode("a \n", false), (std::vector<int32_t>{'a', ' ', '\n'}));
  }
  {  // Llama 3 ignores merges for a word that is itself a token
    VocabData v = tiny_bpe({"b c", "a b", "ab c"});
    v.pre = "llama-bpe";
    const Tokenizer t(std::move(v));
    EXPECT_EQ(t.encode("abc", false), (std::vector<int32_t>{id(t, "abc")}));
    EXPECT_EQ(t.encode("abcc", false), (std::vector<int32_t>{'a', id(t, "bc"), 'c'}));
  }
}

VocabData tiny_spm(float score_ab, float score_bc);

TEST(TokenizerBpe, UnknownPreTokenizerIsAnError) {
  VocabData v = tiny_bpe({});
  v.pre = "no-such-pre";
  try {
    const Tokenizer t(std::move(v));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-pre'"), std::string::npos) << e.what();
  }
  VocabData spm = tiny_spm(-1.f, -1.f);
  spm.pre = "no-such-pre";  // SentencePiece has no pre-tokenizer: ignored
  EXPECT_NO_THROW(Tokenizer{spm});
}

VocabData tiny_spm(float score_ab, float score_bc) {
  VocabData v;
  v.kind = TokenizerKind::Spm;
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {kTokUnknown, kTokControl, kTokControl};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.tokens.push_back(name);
    v.token_types.push_back(kTokByte);
  }
  for (const char* t : {"\xE2\x96\x81", "a", "b", "c", "ab", "bc", "\xE2\x96\x81" "c"}) {
    v.tokens.push_back(t);
    v.token_types.push_back(kTokNormal);
  }
  v.scores.assign(v.tokens.size(), -100.f);
  v.scores[263] = score_ab;
  v.scores[264] = score_bc;
  v.scores[265] = -1.f;
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  return v;
}

TEST(TokenizerSpm, HighestScoreMergesFirstAndBytesFallBack) {
  constexpr int32_t kSpace = 259, kA = 260, kB = 261, kC = 262, kAB = 263, kBC = 264, kSpaceC = 265;
  {
    const Tokenizer t(tiny_spm(-2.f, -0.5f));  // "bc" scores higher than "ab"
    EXPECT_EQ(t.encode("abc", true), (std::vector<int32_t>{1, kSpace, kA, kBC}));
  }
  {
    const Tokenizer t(tiny_spm(-0.5f, -2.f));
    EXPECT_EQ(t.encode("abc", false), (std::vector<int32_t>{kSpace, kAB, kC}));
    // Spaces become U+2581 and merge like any character; "é" is not in the
    // vocabulary and falls back to its UTF-8 bytes.
    const auto ids = t.encode("ab c\xC3\xA9", false);
    EXPECT_EQ(ids, (std::vector<int32_t>{kSpace, kAB, kSpaceC, 3 + 0xC3, 3 + 0xA9}));
    EXPECT_EQ(t.decode(ids), "ab c\xC3\xA9");
    EXPECT_EQ(t.piece(kSpaceC), " c");
    EXPECT_EQ(t.piece(3 + 0xC3), "\xC3");
    EXPECT_EQ(t.piece(1), "");
    EXPECT_EQ(kB, t.find_token("b"));
  }
}

TEST(TokenizerSpm, SynthVocabUsesByteFallbackForUnseenCharacters) {
  const Tokenizer& tok = synth_tokenizer(TokenizerKind::Spm);
  const int32_t space = tok.find_token("\xE2\x96\x81");
  ASSERT_GE(space, 0);
  for (const char* ch : {"\xE2\x82\xAC", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\x01"}) {
    const std::string s(ch);
    ASSERT_LT(tok.find_token(s), 0) << "test character unexpectedly in the vocabulary";
    std::vector<int32_t> expected = {space};
    for (unsigned char b : s) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      expected.push_back(tok.find_token(name));
      EXPECT_EQ(tok.token_type(expected.back()), kTokByte);
    }
    EXPECT_EQ(tok.encode(s, false), expected);
    EXPECT_EQ(tok.decode(expected), s);
  }
}

TEST(TokenizerSynth, VocabulariesAreExactAndConsistent) {
  for (TokenizerKind kind : {TokenizerKind::Bpe, TokenizerKind::Spm}) {
    for (int n : {512, 777, 4096, 40000}) {
      SCOPED_TRACE(std::to_string(n) + (kind == TokenizerKind::Bpe ? " bpe" : " spm"));
      const VocabData v = make_synth_vocab(kind, n);
      ASSERT_EQ(v.tokens.size(), static_cast<size_t>(n));
      ASSERT_EQ(v.token_types.size(), static_cast<size_t>(n));
      const std::unordered_set<std::string_view> unique(v.tokens.begin(), v.tokens.end());
      EXPECT_EQ(unique.size(), v.tokens.size()) << "duplicate tokens";
      EXPECT_TRUE(v.bos >= 0 && v.eos >= 0 && v.bos != v.eos);
      if (kind == TokenizerKind::Bpe) {
        EXPECT_TRUE(v.scores.empty());
        EXPECT_EQ(v.tokens[n - 3], "<|endoftext|>");
        EXPECT_EQ(v.tokens[n - 2], "<|im_start|>");
        EXPECT_EQ(v.tokens[n - 1], "<|im_end|>");
        EXPECT_EQ(v.eos, n - 1);
        EXPECT_GE(v.merges.size(), static_cast<size_t>(n - 259));
        for (std::string_view m : v.merges) {  // both halves and the result are tokens
          const size_t sp = m.find(' ', 1);
          ASSERT_NE(sp, std::string::npos);
          const std::string joined = std::string(m.substr(0, sp)) + std::string(m.substr(sp + 1));
          ASSERT_TRUE(unique.count(m.substr(0, sp)) && unique.count(m.substr(sp + 1)) && unique.count(joined)) << m;
        }
      } else {
        ASSERT_EQ(v.scores.size(), static_cast<size_t>(n));
        EXPECT_EQ(v.tokens[0], "<unk>");
        EXPECT_EQ(v.tokens[1], "<s>");
        EXPECT_EQ(v.tokens[2], "</s>");
        EXPECT_EQ(v.tokens[3 + 0x41], "<0x41>");
      }
      EXPECT_EQ(v, make_synth_vocab(kind, n)) << "must be deterministic";
    }
  }
  EXPECT_THROW(make_synth_vocab(TokenizerKind::Bpe, 511), Error);
}

TEST(TokenizerSynth, LargeBpeVocabularyIsQuickToBuildAndUse) {
  const auto t0 = std::chrono::steady_clock::now();
  const Tokenizer tok(make_synth_vocab(TokenizerKind::Bpe, 151936));  // Qwen3 size
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
  EXPECT_EQ(tok.n_vocab(), 151936);
  const std::string s = "Hello world, this is a test of 123 tokens.\n";
  EXPECT_EQ(tok.decode(tok.encode(s, false)), s);
}

GgufWriter minimal_vocab_writer(const char* model) {
  GgufWriter w;
  w.add_str("tokenizer.ggml.model", model);
  w.add_arr_str("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.add_arr_str("tokenizer.ggml.merges", {"a b"});
  return w;
}

void expect_read_error(const GgufWriter& w, const std::vector<std::string>& fragments) {
  const auto f = GgufFile::from_memory(w.to_bytes(), "vocab.gguf");
  try {
    Tokenizer::read_vocab(*f);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const std::string& frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << msg;
  }
}

TEST(TokenizerGguf, ReadVocabErrors) {
  {
    GgufWriter w;
    w.add_arr_str("tokenizer.ggml.tokens", {"a"});
    expect_read_error(w, {"vocab.gguf", "tokenizer.ggml.model"});
  }
  expect_read_error(minimal_vocab_writer("xyz"), {"vocab.gguf", "'xyz'", "gpt2", "llama"});
  {
    GgufWriter w;
    w.add_str("tokenizer.ggml.model", "gpt2");
    expect_read_error(w, {"tokenizer.ggml.tokens"});
  }
  {
    GgufWriter w;
    w.add_str("tokenizer.ggml.model", "gpt2");
    w.add_arr_str("tokenizer.ggml.tokens", {"a", "b"});
    expect_read_error(w, {"tokenizer.ggml.merges"});
  }
  {
    GgufWriter w = minimal_vocab_writer("llama");
    w.add_arr_f32("tokenizer.ggml.scores", {0.f, 1.f});
    expect_read_error(w, {"tokenizer.ggml.scores", "2", "3"});
  }
  {
    GgufWriter w = minimal_vocab_writer("gpt2");
    w.add_arr_i32("tokenizer.ggml.token_type", {1, 1, 1, 1});
    expect_read_error(w, {"tokenizer.ggml.token_type", "4"});
  }
  {
    GgufWriter w = minimal_vocab_writer("gpt2");
    w.add_u32("tokenizer.ggml.eos_token_id", 3);
    expect_read_error(w, {"tokenizer.ggml.eos_token_id", "out of range"});
  }
  {
    GgufWriter w;
    w.add_str("tokenizer.ggml.model", "gpt2");
    w.add_arr_str("tokenizer.ggml.tokens", {"a", "b", "ab"});
    w.add_arr_str("tokenizer.ggml.merges", {"ab"});
    const auto f = GgufFile::from_memory(w.to_bytes(), "vocab.gguf");
    EXPECT_THROW(Tokenizer::from_gguf(*f), Error);  // malformed merge
  }
  {  // plain-vector constructor validates as well
    VocabData v;
    EXPECT_THROW(Tokenizer{v}, Error);
    v.tokens = {"a"};
    v.bos = 1;
    EXPECT_THROW(Tokenizer{v}, Error);
  }
}

TEST(TokenizerGguf, SynthVocabRoundTripsThroughGguf) {
  for (TokenizerKind kind : {TokenizerKind::Bpe, TokenizerKind::Spm}) {
    GgufWriter w;
    add_synth_tokenizer(w, kind, 1500);
    const auto f = GgufFile::from_memory(w.to_bytes());
    const VocabData read = Tokenizer::read_vocab(*f);
    EXPECT_EQ(read, make_synth_vocab(kind, 1500));
    const auto tok = Tokenizer::from_gguf(*f);
    EXPECT_EQ(tok->kind(), kind);
    EXPECT_EQ(tok->n_vocab(), 1500);
    const std::string s = "The river town, 1921: caf\xC3\xA9 \xE2\x82\xAC\n";
    EXPECT_EQ(tok->decode(tok->encode(s, true)), s);
    EXPECT_EQ(tok->encode(s, true).front() == tok->bos(), kind == TokenizerKind::Spm);
  }
}

}  // namespace
}  // namespace vkmoe
