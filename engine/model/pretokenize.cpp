#include "engine/model/pretokenize.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "engine/model/unicode.h"

// A pre-tokenizer is a list of passes, each standing for one split regex of
// llama.cpp (LLAMA_VOCAB_PRE_TYPE_*): a pass cuts every fragment the previous
// passes left into its leftmost non-overlapping matches and the gaps between
// them, and a fragment's end is the end of the text for its matches (so \s+$
// and (?!\S) look no further). Character classes follow llama.cpp too: Unicode
// general categories, with its white-space list taking precedence.

namespace vkmoe {
namespace {

using unicode::Cat;

struct Cp {
  uint32_t cp;
  Cat cat;
};

// The code points of one fragment; positions at or past `e` read as nothing.
struct Span {
  const Cp* c;
  size_t e;
  uint32_t cp(size_t k) const { return k < e ? c[k].cp : UINT32_MAX; }
  bool is(size_t k, Cat x) const { return k < e && c[k].cat == x; }
  bool L(size_t k) const { return is(k, Cat::Letter); }
  bool N(size_t k) const { return is(k, Cat::Number); }
  bool S(size_t k) const { return is(k, Cat::Space); }
  bool M(size_t k) const { return is(k, Cat::Mark); }
  bool newline(size_t k) const { return k < e && (c[k].cp == '\r' || c[k].cp == '\n'); }
  template <class Pred>
  size_t run(size_t k, Pred p, size_t max = SIZE_MAX) const {  // end of the run of p from k
    const size_t first = k;
    while (k < e && k - first < max && p(k)) ++k;
    return k;
  }
};

using Cuts = std::vector<size_t>;  // fragment ends (code point indices), ascending

// Leftmost-first search: match(span, pos) returns the end of the match at pos,
// or pos when nothing matches there.
template <class Match>
void scan(const Cp* c, size_t b, size_t e, Cuts& cuts, Match match) {
  const Span s{c, e};
  size_t gap = b;
  for (size_t pos = b; pos < e;) {
    const size_t end = match(s, pos);
    if (end == pos) {
      ++pos;
      continue;
    }
    if (pos > gap) cuts.push_back(pos);
    cuts.push_back(end);
    pos = gap = end;
  }
  if (gap < e) cuts.push_back(e);
}

bool in(uint32_t c, uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; }
bool ascii_digit(uint32_t c) { return in(c, '0', '9'); }
bool ascii_letter(uint32_t c) { return in(c | 0x20, 'a', 'z'); }
bool ascii_punct(uint32_t c) { return in(c, 0x21, 0x2F) || in(c, 0x3A, 0x40) || in(c, 0x5B, 0x60) || in(c, 0x7B, 0x7E); }
uint32_t ascii_lower(uint32_t c) { return in(c, 'A', 'Z') ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when `fold`); returns i if none.
size_t contraction(const Span& s, size_t i, bool fold) {
  if (s.c[i].cp != '\'') return i;
  const uint32_t a = fold ? ascii_lower(s.cp(i + 1)) : s.cp(i + 1);
  const uint32_t b = fold ? ascii_lower(s.cp(i + 2)) : s.cp(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return i;
}

// At white space: \s*[\r\n]+ (when `newlines`: up to the run's last newline),
// then \s+(?!\S) (all but the last of a run that a non-space follows), then \s+.
size_t whitespace(const Span& s, size_t i, bool newlines) {
  const size_t j = s.run(i, [&](size_t k) { return s.S(k); });
  if (newlines)
    for (size_t k = j; k > i; --k)
      if (s.newline(k - 1)) return k;
  return j - i >= 2 && j < s.e ? j - 1 : j;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t gpt2_word(const Span& s, size_t i) {
  if (size_t e = contraction(s, i, false); e != i) return e;
  const size_t k = s.c[i].cp == ' ' && i + 1 < s.e && !s.S(i + 1) ? i + 1 : i;
  if (s.L(k)) return s.run(k, [&](size_t x) { return s.L(x); });
  if (s.N(k)) return s.run(k, [&](size_t x) { return s.N(x); });
  if (!s.S(k)) return s.run(k, [&](size_t x) { return !s.S(x) && !s.L(x) && !s.N(x); });
  return whitespace(s, i, false);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// With `marks`, [\p{L}\p{M}]+ for the letter run and \p{M} out of the punctuation class.
template <size_t kMaxDigits, bool kMarks>
size_t llama3_word(const Span& s, size_t i) {
  if (size_t e = contraction(s, i, true); e != i) return e;
  auto letter = [&](size_t k) { return s.L(k) || (kMarks && s.M(k)); };
  {
    const size_t k = !s.newline(i) && !s.L(i) && !s.N(i) && letter(i + 1) ? i + 1 : i;
    if (letter(k)) return s.run(k, letter);
  }
  if (s.N(i)) return s.run(i, [&](size_t k) { return s.N(k); }, kMaxDigits);
  auto punct = [&](size_t k) { return k < s.e && !s.S(k) && !s.L(k) && !s.N(k) && !(kMarks && s.M(k)); };
  {
    const size_t k = s.c[i].cp == ' ' && punct(i + 1) ? i + 1 : i;
    if (punct(k)) return s.run(s.run(k, punct), [&](size_t x) { return s.newline(x); });
  }
  return whitespace(s, i, true);
}

// GPT-4o (o200k). tokenizer.json's regex is
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// but llama.cpp (LLAMA_VOCAB_PRE_TYPE_GPT4O) runs its rewrite
//   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|
//   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:...same...)?|
//   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with std::regex over its one-byte-per-code-point collapsed text, and this follows
// that: "upper" is a letter other than a-z and "lower" a letter other than A-Z, so
// a non-ASCII letter is both; marks are not letters (they fall in the punctuation
// class, or prefix a following word like any [^\r\n\p{L}\p{N}]).
size_t gpt4o_word(const Span& s, size_t i) {
  auto upper = [&](size_t k) { return s.L(k) && !in(s.c[k].cp, 'a', 'z'); };
  auto lower = [&](size_t k) { return s.L(k) && !in(s.c[k].cp, 'A', 'Z'); };
  const size_t w = !s.newline(i) && !s.L(i) && !s.N(i) && s.L(i + 1) ? i + 1 : i;
  if (s.L(w)) {
    // First alternative: upper* backs off from the whole run to the last place
    // lower+ can start. The run it gives back (A-Z only) is the next word, so each
    // code point is looked at a bounded number of times.
    const size_t u = s.run(w, upper);
    size_t k = u;
    while (k > w && !lower(k)) --k;
    size_t end;
    if (lower(k))
      end = s.run(k, lower);
    else
      end = u;  // second alternative: upper+ (all of the run: A-Z only), lower* (nothing)
    return end < s.e ? contraction(s, end, true) : end;
  }
  if (s.N(i)) return s.run(i, [&](size_t k) { return s.N(k); }, 3);
  auto punct = [&](size_t k) { return k < s.e && !s.S(k) && !s.L(k) && !s.N(k); };
  {
    const size_t k = s.c[i].cp == ' ' && punct(i + 1) ? i + 1 : i;
    if (punct(k))
      return s.run(s.run(k, punct), [&](size_t x) { return s.newline(x) || s.c[x].cp == '/'; });
  }
  return whitespace(s, i, true);
}

// DeepSeek V3: [ASCII punctuation][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//  ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// As in llama.cpp, '~' is not in \p{S} (its ASCII symbol list lacks it).
size_t deepseek3_word(const Span& s, size_t i) {
  if (ascii_punct(s.c[i].cp) && ascii_letter(s.cp(i + 1)))
    return s.run(i + 1, [&](size_t k) { return ascii_letter(s.c[k].cp); });
  auto letter = [&](size_t k) { return s.L(k) || s.M(k); };
  auto punct = [&](size_t k) {
    return (s.is(k, Cat::Punct) || s.is(k, Cat::Symbol)) && s.c[k].cp != '~';
  };
  {
    const size_t k = !s.newline(i) && !s.L(i) && !punct(i) && letter(i + 1) ? i + 1 : i;
    if (letter(k)) return s.run(k, letter);
  }
  {
    const size_t k = s.c[i].cp == ' ' && punct(i + 1) ? i + 1 : i;
    if (punct(k)) return s.run(s.run(k, punct), [&](size_t x) { return s.newline(x); });
  }
  return s.S(i) ? whitespace(s, i, true) : i;
}

// DeepSeek LLM's cased-letter class (its tokenizer's regex, code point ranges).
constexpr uint32_t kDeepseekLetters[][2] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

constexpr bool ranges_sorted() {
  for (size_t k = 1; k < std::size(kDeepseekLetters); ++k)
    if (kDeepseekLetters[k][0] <= kDeepseekLetters[k - 1][1]) return false;
  return true;
}
static_assert(ranges_sorted());

bool deepseek_letter(const Cp& c) {
  if (c.cp < 0x80) return ascii_letter(c.cp);
  const auto* end = std::end(kDeepseekLetters);
  const auto* it = std::upper_bound(std::begin(kDeepseekLetters), end, c.cp,
                                    [](uint32_t v, const uint32_t(&r)[2]) { return v < r[0]; });
  return it != std::begin(kDeepseekLetters) && c.cp <= it[-1][1];
}

// [!-/:-~！-／：-～‘-‟　-。] (non-ASCII white space never matches: llama.cpp turns it into \v)
bool deepseek_punct(const Cp& c) {
  return c.cat != Cat::Space && (in(c.cp, 0x21, 0x2F) || in(c.cp, 0x3A, 0x7E) || in(c.cp, 0xFF01, 0xFF0F) ||
                                 in(c.cp, 0xFF1A, 0xFF5E) || in(c.cp, 0x2018, 0x201F) || in(c.cp, 0x3000, 0x3002));
}

// [一-龥ࠀ-一가-퟿]
bool deepseek_cjk(const Cp& c) {
  return c.cat != Cat::Space && (in(c.cp, 0x800, 0x9FA5) || in(c.cp, 0xAC00, 0xD7FF));
}

// [一-龥぀-ゟ゠-ヿ]
bool deepseek3_cjk(const Cp& c) { return in(c.cp, 0x4E00, 0x9FA5) || in(c.cp, 0x3040, 0x30FF); }

// [\p{P}\$\+<=>\^~\|`] (Falcon) and [\p{P}\$\+<=>\^~\|] (default)
template <bool kBacktick>
bool punct_or_ascii_symbol(const Cp& c) {
  if (c.cat == Cat::Punct) return true;
  switch (c.cp) {
    case '$': case '+': case '<': case '=': case '>': case '^': case '~': case '|': return true;
    case '`': return kBacktick;
    default: return false;
  }
}

bool is_newline(const Cp& c) { return c.cp == '\r' || c.cp == '\n'; }
bool is_number(const Cp& c) { return c.cat == Cat::Number; }
bool is_letter(const Cp& c) { return c.cat == Cat::Letter; }
bool is_punct(const Cp& c) { return c.cat == Cat::Punct; }

using Pass = void (*)(const Cp*, size_t, size_t, Cuts&);

template <size_t (*kWord)(const Span&, size_t)>
void word_pass(const Cp* c, size_t b, size_t e, Cuts& cuts) {
  scan(c, b, e, cuts, kWord);
}

// [set]{1,kMax}
template <bool (*kSet)(const Cp&), size_t kMax = SIZE_MAX>
void run_pass(const Cp* c, size_t b, size_t e, Cuts& cuts) {
  scan(c, b, e, cuts, [](const Span& s, size_t i) { return s.run(i, [&](size_t k) { return kSet(s.c[k]); }, kMax); });
}

// \s?[set]+
template <bool (*kSet)(const Cp&)>
void space_run_pass(const Cp* c, size_t b, size_t e, Cuts& cuts) {
  scan(c, b, e, cuts, [](const Span& s, size_t i) {
    auto set = [&](size_t k) { return k < s.e && kSet(s.c[k]); };
    const size_t k = s.S(i) && set(i + 1) ? i + 1 : i;
    return set(k) ? s.run(k, set) : i;
  });
}

// [0-9][0-9][0-9]
void digit3_pass(const Cp* c, size_t b, size_t e, Cuts& cuts) {
  scan(c, b, e, cuts, [](const Span& s, size_t i) {
    return ascii_digit(s.c[i].cp) && ascii_digit(s.cp(i + 1)) && ascii_digit(s.cp(i + 2)) ? i + 3 : i;
  });
}

// \s+$
void trailing_space_pass(const Cp* c, size_t b, size_t e, Cuts& cuts) {
  size_t t = e;
  while (t > b && c[t - 1].cat == Cat::Space) --t;
  if (t > b) cuts.push_back(t);
  if (t < e) cuts.push_back(e);
}

struct PassList {
  const Pass* passes;
  size_t n;
};

template <size_t N>
constexpr PassList list(const Pass (&p)[N]) { return {p, N}; }

constexpr Pass kDefault[] = {run_pass<punct_or_ascii_symbol<false>>, word_pass<gpt2_word>, run_pass<is_number>,
                             digit3_pass};
constexpr Pass kGpt2[] = {word_pass<gpt2_word>};
constexpr Pass kLlama3[] = {word_pass<llama3_word<3, false>>};
constexpr Pass kQwen2[] = {word_pass<llama3_word<1, false>>};
constexpr Pass kQwen35[] = {word_pass<llama3_word<1, true>>};
constexpr Pass kDeepseekLlm[] = {run_pass<is_newline, 1>,      space_run_pass<deepseek_letter>,
                                 space_run_pass<deepseek_punct>, trailing_space_pass,
                                 run_pass<deepseek_cjk>,        run_pass<is_number>};
constexpr Pass kDeepseekCoder[] = {run_pass<is_newline, 1>, space_run_pass<is_letter>, space_run_pass<is_punct>,
                                   run_pass<deepseek_cjk>, run_pass<is_number, 1>};
constexpr Pass kDeepseek3[] = {run_pass<is_number, 3>, run_pass<deepseek3_cjk>, word_pass<deepseek3_word>};
constexpr Pass kFalcon[] = {run_pass<punct_or_ascii_symbol<true>>, word_pass<gpt2_word>, digit3_pass};
constexpr Pass kStarcoder[] = {run_pass<is_number, 1>, word_pass<gpt2_word>};
constexpr Pass kGpt4o[] = {word_pass<gpt4o_word>};

PassList passes_of(BpePre pre) {
  switch (pre) {
    case BpePre::Default: return list(kDefault);
    case BpePre::Gpt2: return list(kGpt2);
    case BpePre::Llama3: return list(kLlama3);
    case BpePre::Qwen2: return list(kQwen2);
    case BpePre::Qwen35: return list(kQwen35);
    case BpePre::DeepseekLlm: return list(kDeepseekLlm);
    case BpePre::DeepseekCoder: return list(kDeepseekCoder);
    case BpePre::Deepseek3: return list(kDeepseek3);
    case BpePre::Falcon: return list(kFalcon);
    case BpePre::Starcoder: return list(kStarcoder);
    case BpePre::Gpt4o: return list(kGpt4o);
  }
  return list(kGpt2);
}

struct NamedPre {
  const char* name;
  BpePre pre;
  bool ignore_merges;
};

// tokenizer.ggml.pre values (as written by llama.cpp's converter) and their pre-tokenizers.
constexpr NamedPre kNames[] = {
    {"default", BpePre::Default, false},
    {"gpt-2", BpePre::Gpt2, false},
    {"phi-2", BpePre::Gpt2, false},
    {"mpt", BpePre::Gpt2, false},
    {"olmo", BpePre::Gpt2, false},
    {"jais", BpePre::Gpt2, false},
    {"llama3", BpePre::Llama3, true},
    {"llama-v3", BpePre::Llama3, true},
    {"llama-bpe", BpePre::Llama3, true},
    {"falcon3", BpePre::Llama3, true},
    {"pixtral", BpePre::Llama3, true},
    {"dbrx", BpePre::Llama3, false},
    {"smaug-bpe", BpePre::Llama3, false},
    {"glm4", BpePre::Llama3, false},
    {"chatglm-bpe", BpePre::Llama3, false},
    {"qwen2", BpePre::Qwen2, false},
    {"deepseek-r1-qwen", BpePre::Qwen2, false},
    {"stablelm2", BpePre::Qwen2, false},
    {"megrez", BpePre::Qwen2, false},
    {"qwen35", BpePre::Qwen35, false},
    {"deepseek-llm", BpePre::DeepseekLlm, false},
    {"deepseek-coder", BpePre::DeepseekCoder, false},
    {"deepseek-v3", BpePre::Deepseek3, false},
    {"falcon", BpePre::Falcon, false},
    {"starcoder", BpePre::Starcoder, false},
    {"refact", BpePre::Starcoder, false},
    {"command-r", BpePre::Starcoder, false},
    {"smollm", BpePre::Starcoder, false},
    {"codeshell", BpePre::Starcoder, false},
    {"exaone", BpePre::Starcoder, false},
    {"minerva-7b", BpePre::Starcoder, false},
    {"gpt-4o", BpePre::Gpt4o, false},
    {"llama4", BpePre::Gpt4o, false},
    {"kanana2", BpePre::Gpt4o, false},
    {"talkie", BpePre::Gpt4o, false},
    {"minimax-m2", BpePre::Gpt4o, false},  // its own type in llama.cpp, the same regex
};

}  // namespace

std::optional<BpePreInfo> bpe_pre_from_name(std::string_view name) {
  if (name.empty()) return BpePreInfo{BpePre::Default, false};
  for (const NamedPre& n : kNames)
    if (name == n.name) return BpePreInfo{n.pre, n.ignore_merges};
  return std::nullopt;
}

std::string bpe_pre_known_names() {
  std::string s;
  for (const NamedPre& n : kNames) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

std::vector<std::string_view> bpe_pretokenize(std::string_view text, BpePre pre) {
  std::vector<Cp> cps;
  std::vector<size_t> offs;  // byte offset of each code point, then text.size()
  cps.reserve(text.size());
  offs.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const size_t len = unicode::decode(text, pos, cp);
    cps.push_back({cp, unicode::category(cp)});
    offs.push_back(pos);
    pos += len;
  }
  offs.push_back(text.size());
  std::vector<std::string_view> words;
  if (cps.empty()) return words;

  Cuts cuts = {cps.size()}, next;
  const PassList pl = passes_of(pre);
  for (size_t p = 0; p < pl.n; ++p) {
    next.clear();
    next.reserve(cuts.size() * 2);
    size_t b = 0;
    for (size_t e : cuts) {
      pl.passes[p](cps.data(), b, e, next);
      b = e;
    }
    cuts.swap(next);
  }
  words.reserve(cuts.size());
  size_t b = 0;
  for (size_t e : cuts) {
    words.push_back(text.substr(offs[b], offs[e] - offs[b]));
    b = e;
  }
  return words;
}

}  // namespace vkmoe
