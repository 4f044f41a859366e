#include "engine/model/tokenizer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <queue>

#include "engine/model/gguf.h"
#include "engine/model/unicode.h"

namespace vkmoe {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

bool in(uint32_t c, uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; }

struct ByteUnicodeTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> to_byte;  // code point -> byte, -1 if none
  ByteUnicodeTables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = in(b, 33, 126) || in(b, 161, 172) || in(b, 174, 255);
      const uint32_t cp = printable ? b : 256 + extra++;
      unicode::append_utf8(to_unicode[b], cp);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteUnicodeTables& byte_tables() {
  static const ByteUnicodeTables t;
  return t;
}

int parse_byte_token(std::string_view t) {  // "<0xNN>" -> NN, else -1
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (size_t k = 3; k < 5; ++k) {
    const char c = t[k];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string byte_token_name(int b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

// Symbols of a word being merged (a doubly linked list over byte ranges).
struct Symbol {
  int prev, next;
  uint32_t start, len;  // len == 0: merged into its left neighbour
};

// A candidate merge of symbol `left` with its right neighbour; `size` is their
// combined length when queued (lengths only grow, so a mismatch means stale).
struct Candidate {
  double priority;  // larger first
  int left;
  uint32_t size;
  bool operator<(const Candidate& o) const {
    return priority != o.priority ? priority < o.priority : left > o.left;
  }
};

// Runs the merge loop: `priority_of(l, r)` returns false if the pair cannot merge.
template <typename PriorityFn>
void merge_symbols(std::vector<Symbol>& sym, PriorityFn priority_of) {
  std::priority_queue<Candidate> queue;
  auto add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    double p;
    if (priority_of(sym[l], sym[r], p)) queue.push({p, l, sym[l].len + sym[r].len});
  };
  for (int k = 0; k + 1 < static_cast<int>(sym.size()); ++k) add(k, k + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    if (l.len == 0 || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (l.len + r.len != c.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) sym[l.next].prev = c.left;
    add(l.prev, c.left);
    add(c.left, l.next);
  }
}

bool is_special_type(int32_t t) { return t == kTokControl || t == kTokUserDefined; }

// What llama.cpp calls the tokenizer models it knows that this engine does not support.
std::string tokenizer_model_note(const std::string& model) {
  if (model == "bert") return ", a WordPiece tokenizer,";
  if (model == "t5") return ", a Unigram tokenizer,";
  if (model == "rwkv") return ", an RWKV greedy tokenizer,";
  if (model == "plamo2") return ", a PLaMo-2 Aho-Corasick tokenizer,";
  if (model == "no_vocab" || model == "none") return ", a model without a vocabulary,";
  return "";
}

}  // namespace

const std::string& bpe_byte_to_unicode(uint8_t b) { return byte_tables().to_unicode[b]; }

void StringList::push_back(std::string_view s) {
  if (s.size() > UINT32_MAX - chars_.size()) throw Error("tokenizer: more than 4 GiB of token text");
  chars_.append(s);
  end_.push_back(static_cast<uint32_t>(chars_.size()));
}

void StringIndex::build(const StringList& list) {
  size_t cap = 2;
  while (cap < 2 * list.size()) cap *= 2;
  slots_.assign(cap, -1);
  for (size_t i = 0; i < list.size(); ++i) {
    size_t k = std::hash<std::string_view>{}(list[i]) & (cap - 1);
    while (slots_[k] >= 0 && list[slots_[k]] != list[i]) k = (k + 1) & (cap - 1);
    if (slots_[k] < 0) slots_[k] = static_cast<int32_t>(i);  // duplicates keep the first
  }
}

int32_t StringIndex::find(const StringList& list, std::string_view s) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t k = std::hash<std::string_view>{}(s) & mask; slots_[k] >= 0; k = (k + 1) & mask)
    if (list[slots_[k]] == s) return slots_[k];
  return -1;
}

Tokenizer::Tokenizer(VocabData v) : v_(std::move(v)) {
  const size_t n = v_.tokens.size();
  if (n == 0) throw Error("tokenizer: empty vocabulary");
  if (n > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer: vocabulary too large");
  if (!v_.scores.empty() && v_.scores.size() != n)
    throw Error("tokenizer: " + std::to_string(v_.scores.size()) + " scores for " +
                std::to_string(n) + " tokens");
  if (!v_.token_types.empty() && v_.token_types.size() != n)
    throw Error("tokenizer: " + std::to_string(v_.token_types.size()) + " token types for " +
                std::to_string(n) + " tokens");
  const std::pair<const char*, int32_t> special_ids[] = {
      {"bos", v_.bos}, {"eos", v_.eos}, {"unk", v_.unk}, {"pad", v_.pad}};
  for (auto [name, id] : special_ids)
    if (id < -1 || id >= static_cast<int32_t>(n))
      throw Error(std::string("tokenizer: ") + name + " token id " + std::to_string(id) +
                  " is out of range (vocabulary has " + std::to_string(n) + " tokens)");
  for (size_t id = 0; id < v_.scores.size(); ++id)  // scores order merges: NaN has no order
    if (std::isnan(v_.scores[id])) throw Error("tokenizer: the score of token " + std::to_string(id) + " is NaN");
  if (v_.scores.empty()) v_.scores.assign(n, 0.f);
  if (v_.token_types.empty()) {  // infer what the file did not say
    v_.token_types.assign(n, kTokNormal);
    for (size_t id = 0; id < n; ++id) {
      const std::string_view t = v_.tokens[id];
      if (v_.kind == TokenizerKind::Spm && parse_byte_token(t) >= 0) v_.token_types[id] = kTokByte;
      if (t.size() > 4 && t.starts_with("<|") && t.ends_with("|>")) v_.token_types[id] = kTokControl;
    }
    for (int32_t id : {v_.bos, v_.eos, v_.pad})
      if (id >= 0) v_.token_types[id] = kTokControl;
    if (v_.unk >= 0) v_.token_types[v_.unk] = kTokUnknown;
  }
  for (int32_t& t : v_.token_types)
    if (t < kTokNormal || t > kTokByte) t = kTokNormal;

  token_id_.build(v_.tokens);
  if (v_.kind == TokenizerKind::Bpe) {
    if (v_.merges.size() > static_cast<size_t>(INT32_MAX)) throw Error("tokenizer: too many merges");
    for (size_t r = 0; r < v_.merges.size(); ++r) {
      const std::string_view m = v_.merges[r];
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (sp == std::string::npos || sp + 1 >= m.size())
        throw Error("tokenizer: malformed BPE merge #" + std::to_string(r) + " '" + printable(m) + "'");
    }
    merge_rank_.build(v_.merges);
    const std::optional<BpePreInfo> pre = bpe_pre_from_name(v_.pre);
    if (!pre)
      throw Error("tokenizer: unknown pre-tokenizer tokenizer.ggml.pre = '" + printable(v_.pre) +
                  "' (known: " + bpe_pre_known_names() + ")");
    pre_ = *pre;
  }

  for (int b = 0; b < 256; ++b) {
    const std::string name = v_.kind == TokenizerKind::Spm ? byte_token_name(b)
                                                           : bpe_byte_to_unicode(static_cast<uint8_t>(b));
    byte_token_[b] = find_token(name);
  }

  static const char* const kEogNames[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>",
                                          "<|eom_id|>", "<|end|>", "<end_of_turn>",
                                          "<|end_of_text|>", "</s>"};
  eog_.assign(n, false);
  if (v_.eos >= 0) eog_[v_.eos] = true;
  for (size_t id = 0; id < n; ++id) {
    if (!is_special_type(v_.token_types[id]) || v_.tokens[id].empty()) continue;
    const std::string_view t = v_.tokens[id];
    specials_by_first_byte_[static_cast<uint8_t>(t[0])].push_back(static_cast<int32_t>(id));
    for (const char* name : kEogNames)
      if (t == name) eog_[id] = true;
  }
  for (auto& list : specials_by_first_byte_)
    std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) {
      return v_.tokens[a].size() > v_.tokens[b].size();
    });
}

int32_t Tokenizer::find_token(std::string_view text) const { return token_id_.find(v_.tokens, text); }

bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && eog_[id];
}

std::vector<Tokenizer::Fragment> Tokenizer::split_specials(std::string_view text) const {
  std::vector<Fragment> frags;
  size_t text_start = 0, pos = 0;
  while (pos < text.size()) {
    int32_t hit = -1;
    for (int32_t id : specials_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos).starts_with(v_.tokens[id])) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++pos;
      continue;
    }
    if (pos > text_start) frags.push_back({text.substr(text_start, pos - text_start), -1});
    frags.push_back({{}, hit});
    pos += v_.tokens[hit].size();
    text_start = pos;
  }
  if (text_start < text.size()) frags.push_back({text.substr(text_start), -1});
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<int32_t> out;
  if (add_special && v_.add_bos && v_.bos >= 0) out.push_back(v_.bos);
  bool prev_special = true;  // SPM: a space prefix starts each text run after a special token
  for (const Fragment& f : split_specials(text)) {
    if (f.special >= 0) {
      out.push_back(f.special);
      prev_special = true;
      continue;
    }
    if (v_.kind == TokenizerKind::Bpe) {
      encode_bpe(f.text, out);
    } else {
      std::string s = v_.add_space_prefix && prev_special ? " " : "";
      s.append(f.text);
      encode_spm(replace_all(s, " ", kSpmSpace), out);
    }
    prev_special = false;
  }
  return out;
}

void Tokenizer::push_bytes_fallback(std::string_view bytes, std::vector<int32_t>& out) const {
  for (char c : bytes) {
    const int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id >= 0)
      out.push_back(id);
    else if (v_.unk >= 0)
      out.push_back(v_.unk);
  }
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  const auto& tables = byte_tables();
  std::string mapped, key;
  std::vector<Symbol> sym;
  for (std::string_view word : bpe_pretokenize(text, pre_.pre)) {
    mapped.clear();
    sym.clear();
    for (char c : word) {  // one symbol per byte, in its printable form
      const std::string& u = tables.to_unicode[static_cast<uint8_t>(c)];
      const int k = static_cast<int>(sym.size());
      sym.push_back({k - 1, k + 1, static_cast<uint32_t>(mapped.size()), static_cast<uint32_t>(u.size())});
      mapped += u;
    }
    sym.back().next = -1;
    if (pre_.ignore_merges) {  // Llama 3: a word that is a token stays whole
      if (const int32_t id = find_token(mapped); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    merge_symbols(sym, [&](const Symbol& l, const Symbol& r, double& priority) {
      key.assign(mapped, l.start, l.len);
      key += ' ';
      key.append(mapped, r.start, r.len);
      const int32_t rank = merge_rank_.find(v_.merges, key);
      if (rank < 0) return false;
      priority = -static_cast<double>(rank);
      return true;
    });
    for (int k = 0; k >= 0; k = sym[k].next) {
      const std::string_view piece = std::string_view(mapped).substr(sym[k].start, sym[k].len);
      const int32_t id = find_token(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      // Not in the vocabulary: fall back to one token per byte.
      for (size_t pos = 0; pos < piece.size();) {
        uint32_t cp;
        const size_t len = unicode::decode(piece, pos, cp);
        pos += len;
        const int16_t b = cp < 512 ? tables.to_byte[cp] : -1;
        if (b >= 0 && byte_token_[b] >= 0)
          out.push_back(byte_token_[b]);
        else if (v_.unk >= 0)
          out.push_back(v_.unk);
      }
    }
  }
}

void Tokenizer::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const size_t len = unicode::decode(text, pos, cp);
    const int k = static_cast<int>(sym.size());
    sym.push_back({k - 1, k + 1, static_cast<uint32_t>(pos), static_cast<uint32_t>(len)});
    pos += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  merge_symbols(sym, [&](const Symbol& l, const Symbol& r, double& priority) {
    const int32_t id = find_token(text.substr(l.start, l.len + r.len));
    if (id < 0 || v_.token_types[id] != kTokNormal) return false;
    priority = v_.scores[id];
    return true;
  });
  for (int k = 0; k >= 0; k = sym[k].next) {
    const std::string_view piece = text.substr(sym[k].start, sym[k].len);
    const int32_t id = find_token(piece);
    if (id >= 0 && (v_.token_types[id] == kTokNormal || v_.token_types[id] == kTokUserDefined))
      out.push_back(id);
    else
      push_bytes_fallback(piece, out);
  }
}

std::string Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    throw Error("token id " + std::to_string(id) + " is out of range (vocabulary has " +
                std::to_string(n_vocab()) + " tokens)");
  const std::string_view t = v_.tokens[id];
  switch (v_.token_types[id]) {
    case kTokControl:
      return {};
    case kTokUserDefined:
      return std::string(t);
    case kTokByte: {
      const int b = parse_byte_token(t);
      if (b >= 0) return std::string(1, static_cast<char>(b));
      break;
    }
    default:
      break;
  }
  if (v_.kind == TokenizerKind::Spm) return replace_all(t, kSpmSpace, " ");
  const auto& tables = byte_tables();
  std::string out;
  for (size_t pos = 0; pos < t.size();) {
    uint32_t cp;
    const size_t len = unicode::decode(t, pos, cp);
    const int16_t b = cp < 512 ? tables.to_byte[cp] : -1;
    if (b >= 0)
      out += static_cast<char>(b);
    else
      out.append(t, pos, len);
    pos += len;
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  const bool spm_prefix = v_.kind == TokenizerKind::Spm && v_.add_space_prefix;
  bool strip_space = spm_prefix;  // mirrors the prefix encode() adds after specials
  for (int32_t id : ids) {
    std::string p = piece(id);
    if (is_special_type(v_.token_types[id])) {
      out += p;
      strip_space = spm_prefix;
      continue;
    }
    if (strip_space && !p.empty() && p[0] == ' ') p.erase(0, 1);
    strip_space = false;
    out += p;
  }
  return out;
}

VocabData Tokenizer::read_vocab(const GgufFile& f) {
  auto fail = [&](const std::string& msg) { throw Error(f.path() + ": " + msg); };
  if (!f.has("tokenizer.ggml.model")) fail("no tokenizer (tokenizer.ggml.model is missing)");
  VocabData v;
  const std::string model = f.get_str("tokenizer.ggml.model");
  if (model == "gpt2")
    v.kind = TokenizerKind::Bpe;
  else if (model == "llama")
    v.kind = TokenizerKind::Spm;
  else
    fail("unsupported tokenizer model tokenizer.ggml.model = '" + printable(model) + "'" +
         tokenizer_model_note(model) + " (supported: 'gpt2' byte-level BPE, 'llama' SentencePiece)");
  if (!f.has("tokenizer.ggml.tokens")) fail("no vocabulary (tokenizer.ggml.tokens is missing)");
  auto read_strings = [&](const char* key, StringList& out) {
    const GgufArray& a = f.get_arr_str(key);
    out.reserve(a.size(), a.nbytes() - 8 * a.size());
    try {
      for (size_t k = 0; k < a.size(); ++k) out.push_back(a.str_at(k));
    } catch (const Error& e) {
      fail(std::string(key) + ": " + e.what());
    }
  };
  read_strings("tokenizer.ggml.tokens", v.tokens);
  const size_t n = v.tokens.size();
  if (n == 0) fail("tokenizer.ggml.tokens is empty");
  auto check_size = [&](const char* key, size_t got) {
    if (got != n)
      fail(std::string(key) + " has " + std::to_string(got) + " entries but tokenizer.ggml.tokens has " +
           std::to_string(n));
  };
  if (f.has("tokenizer.ggml.scores")) {
    const GgufArray& s = f.get_arr_float("tokenizer.ggml.scores");
    check_size("tokenizer.ggml.scores", s.size());
    v.scores.resize(n);
    for (size_t k = 0; k < n; ++k) v.scores[k] = static_cast<float>(s.float_at(k));
  }
  if (f.has("tokenizer.ggml.token_type")) {
    const GgufArray& t = f.get_arr_int("tokenizer.ggml.token_type");
    check_size("tokenizer.ggml.token_type", t.size());
    v.token_types.resize(n);
    for (size_t k = 0; k < n; ++k) {
      const int64_t x = t.int_at(k);
      v.token_types[k] = x >= kTokNormal && x <= kTokByte ? static_cast<int32_t>(x) : kTokNormal;
    }
  }
  if (v.kind == TokenizerKind::Bpe) {
    if (!f.has("tokenizer.ggml.merges")) fail("BPE tokenizer without tokenizer.ggml.merges");
    read_strings("tokenizer.ggml.merges", v.merges);
  }
  auto read_id = [&](const std::string& key, bool strict) -> int32_t {
    const int64_t id = f.get_int_or(key, -1);
    if (id >= -1 && id < static_cast<int64_t>(n)) return static_cast<int32_t>(id);
    if (!strict) return -1;  // an unusable padding id is harmless: ignore it
    fail(key + " = " + std::to_string(id) + " is out of range (vocabulary has " + std::to_string(n) +
         " tokens)");
    return -1;
  };
  v.bos = read_id("tokenizer.ggml.bos_token_id", true);
  v.eos = read_id("tokenizer.ggml.eos_token_id", true);
  v.unk = read_id("tokenizer.ggml.unknown_token_id", true);
  v.pad = read_id("tokenizer.ggml.padding_token_id", false);
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v.kind == TokenizerKind::Spm);
  v.pre = f.get_str_or("tokenizer.ggml.pre", "default");
  v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  return v;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
  VocabData v = read_vocab(f);
  try {
    return std::make_unique<Tokenizer>(std::move(v));
  } catch (const Error& e) {
    throw Error(f.path() + ": " + e.what());
  }
}

}  // namespace vkmoe
