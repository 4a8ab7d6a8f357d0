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

void AppendErrorVerbatim(std::string* out, std::string_view msg) {
  out->push_back('-');
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

void AppendNull(std::string* out, Proto p) { out->append(p == Proto::kResp3 ? "_\r\n" : "$-1\r\n"); }

void AppendNullArray(std::string* out, Proto p) { out->append(p == Proto::kResp3 ? "_\r\n" : "*-1\r\n"); }

void AppendBool(std::string* out, bool b) { out->append(b ? "#t\r\n" : "#f\r\n"); }

void AppendMapHeader(std::string* out, size_t pairs, Proto p) {
  if (p == Proto::kResp3) {
    absl::StrAppend(out, "%", pairs, "\r\n");
  } else {
    AppendArrayHeader(out, 2 * pairs);
  }
}

void AppendSetHeader(std::string* out, size_t n, Proto p) {
  if (p == Proto::kResp3) {
    absl::StrAppend(out, "~", n, "\r\n");
  } else {
    AppendArrayHeader(out, n);
  }
}

void AppendVerbatim(std::string* out, std::string_view text, Proto p) {
  if (p != Proto::kResp3) return AppendBulk(out, text);
  absl::StrAppend(out, "=", text.size() + 4, "\r\ntxt:");
  out->append(text);
  out->append("\r\n");
}

}  // namespace pollen::resp
