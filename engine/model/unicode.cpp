#include "engine/model/unicode.h"

#include <algorithm>
#include <array>

namespace vkmoe::unicode {

extern const uint32_t kCategoryRuns[];  // unicode_data.cpp: (first code point << 3) | Cat, ascending
extern const size_t kCategoryRunCount;

namespace {

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

Cat lookup(uint32_t c) {
  if (is_space(c)) return Cat::Space;
  if (c >= 0x110000) return Cat::Other;
  const uint32_t* end = kCategoryRuns + kCategoryRunCount;
  const uint32_t* it = std::upper_bound(kCategoryRuns, end, (c << 3) | 7u);  // first run starting after c
  return static_cast<Cat>(it[-1] & 7u);
}

struct Latin1 {  // the first 256 code points, looked up often
  std::array<Cat, 256> cat;
  Latin1() {
    for (uint32_t c = 0; c < 256; ++c) cat[c] = lookup(c);
  }
};

}  // namespace

Cat category(uint32_t cp) {
  static const Latin1 latin1;
  return cp < 256 ? latin1.cat[cp] : lookup(cp);
}

size_t decode(std::string_view s, size_t pos, uint32_t& cp, uint32_t malformed_base) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  const size_t len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (len == 1) {
    cp = b0;
    return 1;
  }
  if (len == 0 || pos + len > s.size()) {
    cp = malformed_base + b0;
    return 1;
  }
  uint32_t c = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[pos + k]);
    if ((b & 0xC0) != 0x80) {
      cp = malformed_base + b0;
      return 1;
    }
    c = (c << 6) | (b & 0x3F);
  }
  cp = c;
  return len;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace vkmoe::unicode
