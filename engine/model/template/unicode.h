#pragma once
// UTF-8 text as Python's str sees it: code points, whitespace, case mapping.
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and
// the fullwidth Latin letters; other scripts are left as they are.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkmoe::jinja {

// Decodes the code point at s[pos] and returns its byte length (1 for a
// malformed byte, which decodes to itself + 0xDC00 as Python's surrogateescape).
size_t utf8_decode(std::string_view s, size_t pos, uint32_t& cp);
void utf8_append(std::string& out, uint32_t cp);
std::vector<uint32_t> utf8_code_points(std::string_view s);
std::string utf8_encode(const std::vector<uint32_t>& cps);
size_t utf8_length(std::string_view s);  // in code points
// Byte offset of each code point, then s.size().
std::vector<size_t> utf8_starts(std::string_view s);

bool uni_is_space(uint32_t cp);      // str.isspace
bool uni_is_linebreak(uint32_t cp);  // str.splitlines boundaries
bool uni_is_printable(uint32_t cp);  // str.isprintable (approximation outside Latin)
bool uni_is_alpha(uint32_t cp);
bool uni_is_digit(uint32_t cp);
bool uni_is_upper(uint32_t cp);
bool uni_is_lower(uint32_t cp);
void uni_append_upper(std::string& out, uint32_t cp);  // 'ß' -> "SS"
void uni_append_lower(std::string& out, uint32_t cp);

std::string str_upper(std::string_view s);
std::string str_lower(std::string_view s);
std::string str_title(std::string_view s);       // str.title
std::string str_capitalize(std::string_view s);  // str.capitalize

}  // namespace vkmoe::jinja
