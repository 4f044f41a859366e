#include "tools/synth_vocab.h"

#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <unordered_set>

#include "engine/model/chat_format.h"
#include "engine/model/gguf.h"

namespace vkmoe {
namespace {

// Training text for the merges (plain English with a few accented words).
constexpr std::string_view kTrainingText =
    "The river town woke slowly that morning. Fishermen carried their nets down to the water, "
    "and the baker opened his shutters to let the smell of fresh bread drift into the street. "
    "Children were running between the market stalls, laughing at a dog that had stolen a "
    "sausage and would not give it back. Nobody seemed to mind; it was the first warm day of "
    "the spring, and everyone wanted to be outside.\n"
    "At the small cafe near the bridge, an old teacher was reading a letter from his "
    "daughter. She wrote that the city was louder than she had expected, that the trains "
    "were always late, and that she missed the quiet evenings by the river. He smiled, "
    "folded the letter carefully, and ordered another cup of coffee. The naive tourist at the "
    "next table asked him which road led to the castle, and he pointed north, past the "
    "mill and the old stone church.\n"
    "In the afternoon the weather changed. Dark clouds gathered over the hills, the wind "
    "turned cold, and the first heavy drops of rain began to fall. The market closed early. "
    "People hurried home with their baskets, talking about the storm and whether the bridge "
    "would hold if the water kept rising. By evening the streets were empty, and the only "
    "sound was the rain on the roofs and the river running fast under the arches.\n"
    "Everything they needed was there: bread, cheese, apples, and a little wine. It wasn't "
    "much, but they'd learned that a quiet supper with friends is worth more than a feast. "
    "We're told the caf\xC3\xA9 opened in 1921 and that its owner, a na\xC3\xAFve painter, "
    "traded pictures for meals \xE2\x80\x94 today the walls still hold 37 of them.\n";

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    const auto b = static_cast<uint8_t>(s[pos]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
    out.emplace_back(s.substr(pos, len));
    pos += len;
  }
  return out;
}

// Vocabulary under construction: ordered tokens without duplicates.
struct VocabBuilder {
  VocabData v;
  std::unordered_set<std::string> seen;
  size_t limit;
  bool full() const { return v.tokens.size() >= limit; }
  bool add(const std::string& t, float score, int32_t type) {
    if (full() || !seen.insert(t).second) return false;
    v.tokens.push_back(t);
    v.scores.push_back(score);
    v.token_types.push_back(type);
    return true;
  }
};

// Byte-pair training on words (symbol sequences weighted by frequency):
// repeatedly merges the most frequent adjacent pair (ties: smallest pair).
// `on_merge(left, right)` returns false to stop.
template <typename OnMerge>
void learn_merges(std::map<std::vector<std::string>, int> words, OnMerge on_merge) {
  while (true) {
    std::map<std::pair<std::string, std::string>, int> pair_count;
    for (const auto& [syms, freq] : words)
      for (size_t k = 0; k + 1 < syms.size(); ++k) pair_count[{syms[k], syms[k + 1]}] += freq;
    if (pair_count.empty()) return;
    auto best = pair_count.begin();
    for (auto it = pair_count.begin(); it != pair_count.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [left, right] = best->first;
    if (!on_merge(left, right)) return;
    std::map<std::vector<std::string>, int> merged_words;
    for (const auto& [syms, freq] : words) {
      std::vector<std::string> out;
      for (size_t k = 0; k < syms.size(); ++k) {
        if (k + 1 < syms.size() && syms[k] == left && syms[k + 1] == right) {
          out.push_back(left + right);
          ++k;
        } else {
          out.push_back(syms[k]);
        }
      }
      merged_words[out] += freq;
    }
    words = std::move(merged_words);
  }
}

VocabData make_bpe(int n_vocab) {
  const char* const specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  VocabBuilder b{{}, {}, static_cast<size_t>(n_vocab) - 3};
  b.v.kind = TokenizerKind::Bpe;
  for (int c = 0; c < 256; ++c) b.add(bpe_byte_to_unicode(static_cast<uint8_t>(c)), 0.f, kTokNormal);

  std::map<std::vector<std::string>, int> words;
  for (std::string_view w : bpe_pretokenize(kTrainingText, BpePre::Qwen2)) {
    std::vector<std::string> syms;
    for (char c : w) syms.push_back(bpe_byte_to_unicode(static_cast<uint8_t>(c)));
    ++words[syms];
  }
  learn_merges(std::move(words), [&](const std::string& l, const std::string& r) {
    if (b.full()) return false;
    b.v.merges.push_back(l + " " + r);
    b.add(l + r, 0.f, kTokNormal);
    return true;
  });
  // Filler: extend existing tokens by one lowercase letter each.
  for (size_t from = 256; !b.full();) {
    const size_t to = b.v.tokens.size();
    for (size_t id = from; id < to && !b.full(); ++id)
      for (char c = 'a'; c <= 'z' && !b.full(); ++c) {
        const std::string left(b.v.tokens[id]);
        const std::string& right = bpe_byte_to_unicode(static_cast<uint8_t>(c));
        if (b.add(left + right, 0.f, kTokNormal)) b.v.merges.push_back(left + " " + right);
      }
    from = b.v.tokens.size() == to ? 0 : to;  // nothing new: extend every token again
  }
  b.limit = n_vocab;
  for (const char* s : specials)
    if (!b.add(s, 0.f, kTokControl)) throw Error("synthetic BPE vocabulary: duplicate special token");
  VocabData v = std::move(b.v);
  v.scores.clear();  // byte-level BPE files carry no scores
  const int32_t n = static_cast<int32_t>(v.tokens.size());
  v.bos = v.pad = n - 3;  // <|endoftext|>
  v.eos = n - 1;          // <|im_end|>
  v.add_bos = false;
  v.pre = "qwen2";
  return v;
}

VocabData make_spm(int n_vocab) {
  VocabBuilder b{{}, {}, static_cast<size_t>(n_vocab)};
  b.v.kind = TokenizerKind::Spm;
  b.add("<unk>", 0.f, kTokUnknown);
  b.add("<s>", 0.f, kTokControl);
  b.add("</s>", 0.f, kTokControl);
  for (int c = 0; c < 256; ++c) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", c);
    b.add(name, 0.f, kTokByte);
  }
  // Single characters never come out of a merge; their score does not matter.
  constexpr float kCharScore = -1e6f;
  b.add(std::string(kSpmSpace), kCharScore, kTokNormal);
  for (char c = 33; c < 127; ++c) b.add(std::string(1, c), kCharScore, kTokNormal);

  std::map<std::vector<std::string>, int> words;
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    std::vector<std::string> syms = utf8_chars(word);
    syms.insert(syms.begin(), std::string(kSpmSpace));
    for (const std::string& s : syms) b.add(s, kCharScore, kTokNormal);
    ++words[syms];
    word.clear();
  };
  for (char c : kTrainingText) {
    if (c == ' ' || c == '\n') flush();
    else word += c;
  }
  flush();

  float score = 0.f;  // earlier pieces merge first
  learn_merges(std::move(words), [&](const std::string& l, const std::string& r) {
    if (b.full()) return false;
    if (b.add(l + r, score, kTokNormal)) score -= 1.f;
    return true;
  });
  for (size_t from = 259; !b.full();) {
    const size_t to = b.v.tokens.size();
    for (size_t id = from; id < to && !b.full(); ++id)
      for (char c = 'a'; c <= 'z' && !b.full(); ++c)
        if (b.add(std::string(b.v.tokens[id]) + c, score, kTokNormal)) score -= 1.f;
    from = b.v.tokens.size() == to ? 259 : to;
  }
  VocabData v = std::move(b.v);
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.pre = "default";
  return v;
}

}  // namespace

VocabData make_synth_vocab(TokenizerKind kind, int n_vocab) {
  if (n_vocab < 512)
    throw Error("synthetic vocabulary needs n_vocab >= 512 (got " + std::to_string(n_vocab) + ")");
  return kind == TokenizerKind::Bpe ? make_bpe(n_vocab) : make_spm(n_vocab);
}

namespace {
const char* const kSpmChatTemplate =
    "{{- bos_token -}}\n"
    "{%- for message in messages -%}\n"
    "{%- if message['role'] == 'assistant' -%}{{- 'Assistant: ' + message['content'] + eos_token + '\\n' -}}\n"
    "{%- else -%}{{- message['role'] | capitalize + ': ' + message['content'] + '\\n' -}}{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}\n";
}  // namespace

void add_synth_tokenizer(GgufWriter& w, TokenizerKind kind, int n_vocab) {
  const VocabData v = make_synth_vocab(kind, n_vocab);
  w.add_str("tokenizer.ggml.model", kind == TokenizerKind::Bpe ? "gpt2" : "llama");
  w.add_str("tokenizer.ggml.pre", v.pre);
  w.add_arr_str("tokenizer.ggml.tokens", v.tokens);
  if (!v.scores.empty()) w.add_arr_f32("tokenizer.ggml.scores", v.scores);
  w.add_arr_i32("tokenizer.ggml.token_type", v.token_types);
  if (kind == TokenizerKind::Bpe) w.add_arr_str("tokenizer.ggml.merges", v.merges);
  const std::pair<const char*, int32_t> ids[] = {{"tokenizer.ggml.bos_token_id", v.bos},
                                                 {"tokenizer.ggml.eos_token_id", v.eos},
                                                 {"tokenizer.ggml.unknown_token_id", v.unk},
                                                 {"tokenizer.ggml.padding_token_id", v.pad}};
  for (auto [key, id] : ids)
    if (id >= 0) w.add_u32(key, static_cast<uint32_t>(id));
  w.add_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (kind == TokenizerKind::Spm) w.add_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  // ChatML over the BPE vocabulary's <|im_start|>/<|im_end|>; plain turns
  // ended by </s> for SPM.
  w.add_str("tokenizer.chat_template", kind == TokenizerKind::Bpe ? kChatmlTemplate : kSpmChatTemplate);
}

}  // namespace vkmoe
