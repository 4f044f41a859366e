#pragma once
// Tokenizers stored in GGUF metadata: GPT-2 style byte-level BPE
// (tokenizer.ggml.model == "gpt2", pre-tokenizer from tokenizer.ggml.pre) and
// SentencePiece (== "llama"). Other types (WordPiece "bert", Unigram "t5", ...)
// and unknown pre-tokenizers are errors that name them.
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "engine/model/pretokenize.h"

namespace vkmoe {

class GgufFile;

enum class TokenizerKind { Bpe /* "gpt2" */, Spm /* "llama" */ };

// llama.cpp's tokenizer.ggml.token_type values.
enum TokenType : int32_t {
  kTokNormal = 1, kTokUnknown = 2, kTokControl = 3, kTokUserDefined = 4, kTokUnused = 5, kTokByte = 6,
};

// Strings back to back in one buffer (vocabularies run to millions of short
// strings; a std::string each would cost several times their bytes).
class StringList {
 public:
  StringList() = default;
  StringList(std::initializer_list<std::string_view> v) {
    for (std::string_view s : v) push_back(s);
  }
  void reserve(size_t n, size_t chars) { end_.reserve(n), chars_.reserve(chars); }
  void push_back(std::string_view s);  // throws Error past 4 GiB of text
  size_t size() const { return end_.size(); }
  bool empty() const { return end_.empty(); }
  std::string_view operator[](size_t i) const {
    const uint32_t b = i ? end_[i - 1] : 0;
    return std::string_view(chars_).substr(b, end_[i] - b);
  }
  struct iterator {
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;
    const StringList* list = nullptr;
    size_t i = 0;
    std::string_view operator*() const { return (*list)[i]; }
    iterator& operator++() { return ++i, *this; }
    iterator operator++(int) { return {list, i++}; }
    bool operator==(const iterator& o) const { return i == o.i; }
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size()}; }
  bool operator==(const StringList&) const = default;

 private:
  std::string chars_;
  std::vector<uint32_t> end_;  // end offset of each string in chars_
};

// Open-addressing hash index over a StringList: text -> first position.
class StringIndex {
 public:
  void build(const StringList& list);
  int32_t find(const StringList& list, std::string_view s) const;  // -1 if absent
 private:
  std::vector<int32_t> slots_;  // positions, -1 when empty; a power of two long
};

struct VocabData {
  TokenizerKind kind = TokenizerKind::Bpe;
  StringList tokens;                 // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (SPM; may be empty)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (may be empty: inferred)
  StringList merges;                 // tokenizer.ggml.merges ("a b"), BPE only
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false;              // tokenizer.ggml.add_bos_token (default: Spm true, Bpe false)
  std::string pre;                   // tokenizer.ggml.pre ("qwen2", "llama-bpe", "default", ...; "" = default)
  bool add_space_prefix = true;      // tokenizer.ggml.add_space_prefix (SPM only; default true)
  bool operator==(const VocabData&) const = default;
};

// GPT-2 byte -> printable code point mapping, as UTF-8 (e.g. ' ' -> "Ġ").
const std::string& bpe_byte_to_unicode(uint8_t b);

class Tokenizer {
 public:
  explicit Tokenizer(VocabData v);  // throws Error on an inconsistent vocabulary
  // Reads tokenizer.ggml.*; throws Error for a missing/unsupported vocabulary
  // (naming an unsupported tokenizer.ggml.model or tokenizer.ggml.pre).
  static VocabData read_vocab(const GgufFile& f);
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& f);

  // Control and user-defined token texts in `text` (e.g. "<|im_start|>") become
  // their single ids. add_special: prepend BOS when the vocabulary asks for it.
  std::vector<int32_t> encode(std::string_view text, bool add_special) const;
  // Control tokens print nothing; SPM drops the space prefix encode() added.
  std::string decode(const std::vector<int32_t>& ids) const;
  // Text of one token for streaming (byte tokens may be partial UTF-8).
  std::string piece(int32_t id) const;

  int32_t bos() const { return v_.bos; }
  int32_t eos() const { return v_.eos; }
  bool is_eog(int32_t id) const;  // eos and end-of-turn control tokens
  int n_vocab() const { return static_cast<int>(v_.tokens.size()); }
  TokenizerKind kind() const { return v_.kind; }
  const VocabData& vocab() const { return v_; }
  int32_t token_type(int32_t id) const { return v_.token_types[id]; }
  int32_t find_token(std::string_view text) const;  // -1 if absent

 private:
  struct Fragment {
    std::string_view text;
    int32_t special = -1;  // id when the fragment is a literal special token
  };
  std::vector<Fragment> split_specials(std::string_view text) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  void push_bytes_fallback(std::string_view bytes, std::vector<int32_t>& out) const;

  VocabData v_;
  BpePreInfo pre_;  // BPE only
  StringIndex token_id_;    // over v_.tokens
  StringIndex merge_rank_;  // over v_.merges ("left right" -> rank)
  std::vector<int32_t> specials_by_first_byte_[256];     // longest first
  std::vector<bool> eog_;
  int32_t byte_token_[256];  // id of each byte's token, -1 if absent
};

}  // namespace vkmoe
