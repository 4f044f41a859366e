#include "engine/model/template/unicode.h"

#include "engine/model/unicode.h"

namespace vkmoe::jinja {

size_t utf8_decode(std::string_view s, size_t pos, uint32_t& cp) { return unicode::decode(s, pos, cp, 0xDC00); }

void utf8_append(std::string& out, uint32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF)  // an undecodable byte, kept as it came
    out += static_cast<char>(cp - 0xDC00);
  else
    unicode::append_utf8(out, cp);
}

std::vector<uint32_t> utf8_code_points(std::string_view s) {
  std::vector<uint32_t> v;
  v.reserve(s.size());
  for (size_t p = 0; p < s.size();) {
    uint32_t cp;
    p += utf8_decode(s, p, cp);
    v.push_back(cp);
  }
  return v;
}

std::string utf8_encode(const std::vector<uint32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) utf8_append(out, cp);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t p = 0; p < s.size();) {
    uint32_t cp;
    p += utf8_decode(s, p, cp);
    ++n;
  }
  return n;
}

std::vector<size_t> utf8_starts(std::string_view s) {
  std::vector<size_t> v;
  for (size_t p = 0; p < s.size();) {
    v.push_back(p);
    uint32_t cp;
    p += utf8_decode(s, p, cp);
  }
  v.push_back(s.size());
  return v;
}

bool uni_is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool uni_is_linebreak(uint32_t c) {
  return c == 0x0A || c == 0x0B || c == 0x0C || c == 0x0D || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

bool uni_is_printable(uint32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F))
    return false;
  if (c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xD800 && c <= 0xDFFF)) return false;
  if ((c >= 0xE000 && c <= 0xF8FF) || c >= 0xF0000 || c == 0xFFFE || c == 0xFFFF) return false;
  return c <= 0x10FFFF;
}

namespace {

// Upper-case partner of a lower-case letter, or 0.
uint32_t upper_of(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return 0;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
      return (c & 1) ? c - 1 : 0;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? 0 : c - 1;
    return 0;
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c >= 0x3AC && c <= 0x3AF) return c == 0x3AC ? 0x386 : c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x460 && c <= 0x4FF && c != 0x482 && !(c >= 0x483 && c <= 0x489)) return (c & 1) ? c - 1 : 0;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return 0;
}

// Lower-case partner of an upper-case letter, or 0.
uint32_t lower_of(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return 0;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';  // (uni_append_lower adds the combining dot)
    if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
      return (c & 1) ? 0 : c + 1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c & 1) ? c + 1 : 0;
    return 0;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x460 && c <= 0x4FF && c != 0x482 && !(c >= 0x483 && c <= 0x489)) return (c & 1) ? 0 : c + 1;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return 0;
}

}  // namespace

bool uni_is_upper(uint32_t c) { return lower_of(c) != 0; }
bool uni_is_lower(uint32_t c) { return upper_of(c) != 0 || c == 0xDF || c == 0x138 || c == 0x149; }

bool uni_is_alpha(uint32_t c) {
  if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
  if (c == 0xAA || c == 0xB5 || c == 0xBA) return true;
  if (c >= 0xC0 && c <= 0x24F) return c != 0xD7 && c != 0xF7;
  if (uni_is_upper(c) || uni_is_lower(c)) return true;
  // Letters of scripts without case (CJK, kana, Hangul, Arabic, Hebrew, Indic...): treat as alphabetic.
  return (c >= 0x5D0 && c <= 0x5EA) || (c >= 0x620 && c <= 0x64A) || (c >= 0x904 && c <= 0x939) ||
         (c >= 0x3041 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
         (c >= 0xAC00 && c <= 0xD7A3);
}

bool uni_is_digit(uint32_t c) { return (c >= '0' && c <= '9') || (c >= 0xFF10 && c <= 0xFF19); }

void uni_append_upper(std::string& out, uint32_t cp) {
  if (cp == 0xDF) {
    out += "SS";
    return;
  }
  const uint32_t u = upper_of(cp);
  utf8_append(out, u ? u : cp);
}

void uni_append_lower(std::string& out, uint32_t cp) {
  if (cp == 0x130) {  // İ -> i + COMBINING DOT ABOVE
    out += "i\xCC\x87";
    return;
  }
  const uint32_t l = lower_of(cp);
  utf8_append(out, l ? l : cp);
}

namespace {
template <class F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t p = 0; p < s.size();) {
    uint32_t cp;
    p += utf8_decode(s, p, cp);
    f(out, cp);
  }
  return out;
}
bool is_cased(uint32_t c) { return uni_is_upper(c) || uni_is_lower(c); }
}  // namespace

std::string str_upper(std::string_view s) { return map_chars(s, uni_append_upper); }
std::string str_lower(std::string_view s) { return map_chars(s, uni_append_lower); }

std::string str_title(std::string_view s) {
  bool prev_cased = false;
  return map_chars(s, [&](std::string& out, uint32_t cp) {
    if (prev_cased)
      uni_append_lower(out, cp);
    else
      uni_append_upper(out, cp);
    prev_cased = is_cased(cp);
  });
}

std::string str_capitalize(std::string_view s) {
  bool first = true;
  return map_chars(s, [&](std::string& out, uint32_t cp) {
    if (first)
      uni_append_upper(out, cp);
    else
      uni_append_lower(out, cp);
    first = false;
  });
}

}  // namespace vkmoe::jinja
