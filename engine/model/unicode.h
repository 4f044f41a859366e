#pragma once
// The few Unicode facts the tokenizers need: UTF-8 decoding and the character
// classes that pre-tokenizer regexes test (\p{L}, \p{M}, \p{N}, \p{P}, \p{S}, \s).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vkmoe::unicode {

// General category by its first letter, with white space (llama.cpp's list:
// \t..\r, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000) taking precedence. Other: C*, Z* that is not white
// space (none), unassigned, and the invalid code points decode() returns.
enum class Cat : uint8_t { Other = 0, Letter = 1, Mark = 2, Number = 3, Punct = 4, Symbol = 5, Space = 6 };

Cat category(uint32_t cp);

// Decodes one UTF-8 sequence at s[pos] and returns its byte length. A malformed
// byte decodes alone to malformed_base + byte; the default 0x110000 + byte is
// category Other, so every byte stays covered.
constexpr uint32_t kMalformedBase = 0x110000;
size_t decode(std::string_view s, size_t pos, uint32_t& cp, uint32_t malformed_base = kMalformedBase);
void append_utf8(std::string& out, uint32_t cp);

}  // namespace vkmoe::unicode
