#pragma once
// Pre-tokenizers of byte-level BPE: text -> words that merge independently.
// Chosen by the GGUF key tokenizer.ggml.pre; each behaves like llama.cpp's
// sequence of split regexes for that name (hand-written, no regex engine).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vkmoe {

enum class BpePre {
  Default,        // "default" (and a missing key): punctuation runs, GPT-2, digit runs, 3-digit groups
  Gpt2,           // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Llama3,         // Llama 3: case-insensitive contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, ...
  Qwen2,          // as Llama3 with single digits
  Qwen35,         // as Qwen2 with marks (\p{M}) joining letters
  DeepseekLlm,    // [\r\n] | \s?cased letters+ | \s?ASCII/CJK punctuation+ | \s+$ | CJK+ | \p{N}+
  DeepseekCoder,  // [\r\n] | \s?\p{L}+ | \s?\p{P}+ | CJK+ | \p{N}
  Deepseek3,      // \p{N}{1,3} | Han/kana runs | punctuation+ASCII word, letters+marks, ...
  Falcon,         // punctuation runs, GPT-2, 3-digit groups
  Starcoder,      // single digits, then GPT-2 (also refact, command-r, smollm, ...)
  Gpt4o,          // o200k (gpt-oss, Llama 4): cased words with contraction suffixes, \p{N}{1,3},
                  // punctuation+[\r\n/]*; letter case is ASCII-only, as in llama.cpp
};

struct BpePreInfo {
  BpePre pre = BpePre::Default;
  bool ignore_merges = false;  // a word that is itself a token is not merged (Llama 3)
};

// tokenizer.ggml.pre -> pre-tokenizer; nullopt for a name this engine does not know.
// An empty name means "default".
std::optional<BpePreInfo> bpe_pre_from_name(std::string_view name);
// The known names, comma separated (for error messages).
std::string bpe_pre_known_names();

// Splits text into pre-tokens (byte ranges of `text`); their concatenation is `text`.
std::vector<std::string_view> bpe_pretokenize(std::string_view text, BpePre pre);

}  // namespace vkmoe
