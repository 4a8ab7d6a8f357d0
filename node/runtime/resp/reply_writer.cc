#include "node/runtime/resp/reply_writer.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace pollen::resp {
namespace {

void AppendLineSafe(std::string* out, std::string_view s) {
  for (char c : s) out->push_back(c == '\r' || c == '\n' ? ' ' : c);
}

bool HasErrorCode(std::string_view msg) {
  size_t i = 0;
  while (i < msg.size() && msg[i] >= 'A' && msg[i] <= 'Z') ++i;
  return i > 0 && (i == msg.size() || msg[i] == ' ');
}

}  // namespace

void AppendSimple(std::string* out, std::string_view s) {
  out->push_back('+');
  AppendLineSafe(out, s);
  out->append("\r\n");
}

void AppendError(std::string* out, std::string_view msg) {
  out->push_back('-');
  if (!HasErrorCode(msg)) out->append("ERR ");
  AppendLineSafe(out, msg);
  out->append("\r\n");
}

void AppendInteger(std::string* out, int64_t v) { absl::StrAppend(out, ":", v, "\r\n"); }

void AppendBulk(std::string* out, std::string_view s) {
  absl::StrAppend(out, "$", s.size(), "\r\n");
  out->append(s);
  out->append("\r\n");
}

void AppendNullBulk(std::string* out) { out->append("$-1\r\n"); }

void AppendArrayHeader(std::string* out, size_t n) { absl::StrAppend(out, "*", n, "\r\n"); }

void AppendDouble(std::string* out, double v) {
  char buf[64];
  const int n = std::snprintf(buf, sizeof(buf), "%.17g", v);
  AppendBulk(out, std::string_view(buf, n > 0 ? static_cast<size_t>(n) : 0));
}

}  // namespace pollen::resp
