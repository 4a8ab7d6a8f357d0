// String helpers for std::string_view code. Debian's Abseil has its own
// absl::string_view (not std::string_view), so absl::StrCat and friends do not
// take std::string_view; these do.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "fmt/format.h"

// Lets spdlog/fmt print absl::string_view (e.g. absl::Status::message()).
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

namespace pollen::runtime {

inline absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view SV(absl::string_view s) { return std::string_view(s.data(), s.size()); }

inline void AppendPart(std::string* out, std::string_view s) { out->append(s); }
inline void AppendPart(std::string* out, absl::string_view s) { out->append(s.data(), s.size()); }
inline void AppendPart(std::string* out, const std::string& s) { out->append(s); }
inline void AppendPart(std::string* out, const char* s) { out->append(s); }
inline void AppendPart(std::string* out, char c) { out->push_back(c); }
template <std::integral T>
  requires(!std::same_as<T, char> && !std::same_as<T, bool>)
void AppendPart(std::string* out, T v) {
  out->append(std::to_string(v));
}
inline void AppendPart(std::string* out, double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

// Concatenates strings (either string_view), characters and numbers.
template <typename... T>
std::string Cat(const T&... parts) {
  std::string s;
  (AppendPart(&s, parts), ...);
  return s;
}

inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

inline std::string_view Strip(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

inline bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}
inline bool ConsumeSuffix(std::string_view* s, std::string_view suffix) {
  if (s->size() < suffix.size() || s->substr(s->size() - suffix.size()) != suffix) return false;
  s->remove_suffix(suffix.size());
  return true;
}

// Whole-string unsigned decimal parse (no sign, no spaces).
template <std::unsigned_integral T>
bool ParseUnsigned(std::string_view s, T* out) {
  if (s.empty() || s.size() > 20) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Whole-string decimal floating-point parse.
inline bool ParseDouble(std::string_view s, double* out) {
  if (s.empty() || s.size() > 64) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace pollen::runtime
