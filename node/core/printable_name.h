// PrintableName: a filter name (binary-safe: any bytes) as text that is safe
// in a log line, an INFO field or a Prometheus label, and reversible:
//   printable ASCII and valid UTF-8 sequences stay as they are;
//   a backslash becomes "\\";
//   any other byte (controls, DEL, bytes of invalid UTF-8) becomes "\xNN".
// So two different names never print the same.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pollen::node {

// Length of the valid UTF-8 sequence of 2 to 4 bytes at s[i], or 0.
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  }
  // No overlong 3- and 4-byte forms, no surrogates, nothing above U+10FFFF.
  if (c == 0xE0 && b(i + 1) < 0xA0) return 0;
  if (c == 0xED && b(i + 1) > 0x9F) return 0;
  if (c == 0xF0 && b(i + 1) < 0x90) return 0;
  if (c == 0xF4 && b(i + 1) > 0x8F) return 0;
  return n;
}

inline std::string PrintableName(std::string_view name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = c >= 0x80 ? Utf8SequenceLength(name, i) : 0; n > 0) {
      out.append(name.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  return out;
}

}  // namespace pollen::node
