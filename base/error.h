#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace vkmoe {

// Every user-facing failure (bad file, unsupported model, no driver, OOM) is
// reported as an Error with a one-line message; the CLI prints it and exits 1.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Text from a file made safe to quote in a one-line message: control bytes and
// backslashes escaped as \xNN, cut after 96 bytes.
inline std::string printable(std::string_view s) {
  constexpr size_t kMax = 96;
  std::string out;
  for (size_t k = 0; k < s.size() && k < kMax; ++k) {
    const auto ch = static_cast<unsigned char>(s[k]);
    if (ch < 0x20 || ch == 0x7F || ch == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace vkmoe
