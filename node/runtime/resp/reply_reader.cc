#include "node/runtime/resp/reply_reader.h"

#include <algorithm>
#include <charconv>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pollen::resp {
namespace {

constexpr size_t kMaxLineBytes = 64u << 10;

struct Cursor {
  std::string_view in;
  size_t pos = 0;
  size_t total_elements = 0;
  const ReplyLimits* limits;
};

// 1: complete, 0: incomplete, -1: error (message in *err).
int ReadLine(Cursor* c, std::string_view* line, std::string* err) {
  const size_t end = c->in.find("\r\n", c->pos);
  if (end == std::string_view::npos) {
    if (c->in.size() - c->pos > kMaxLineBytes) {
      *err = "reply line too long";
      return -1;
    }
    return 0;
  }
  if (end - c->pos > kMaxLineBytes) {
    *err = "reply line too long";
    return -1;
  }
  *line = c->in.substr(c->pos, end - c->pos);
  c->pos = end + 2;
  return 1;
}

bool ToInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

int ReadValue(Cursor* c, Reply* r, size_t depth, std::string* err) {
  if (depth > c->limits->max_depth) {
    *err = "reply nested too deeply";
    return -1;
  }
  if (c->pos >= c->in.size()) return 0;
  const char type = c->in[c->pos++];
  std::string_view line;
  const int got = ReadLine(c, &line, err);
  if (got <= 0) return got;
  switch (type) {
    case '+':
      r->type = Reply::Type::kSimple;
      r->str.assign(line);
      return 1;
    case '-':
      r->type = Reply::Type::kError;
      r->str.assign(line);
      return 1;
    case ':':
      r->type = Reply::Type::kInteger;
      if (!ToInt(line, &r->integer)) {
        *err = "bad integer reply";
        return -1;
      }
      return 1;
    case '_':
      if (!line.empty()) {
        *err = "bad null reply";
        return -1;
      }
      r->type = Reply::Type::kNull;
      return 1;
    case '#':
      if (line != "t" && line != "f") {
        *err = "bad boolean reply";
        return -1;
      }
      r->type = Reply::Type::kBool;
      r->integer = line == "t";
      return 1;
    case ',':
    case '(':
      r->type = type == ',' ? Reply::Type::kDouble : Reply::Type::kBigNumber;
      r->str.assign(line);
      return 1;
    case '!':  // blob error
    case '=':  // verbatim string: "fmt:" then the text
    case '$': {
      int64_t len = 0;
      if (!ToInt(line, &len) || len < -1 || (len >= 0 && static_cast<uint64_t>(len) > c->limits->max_bulk_bytes)) {
        *err = "bad bulk length";
        return -1;
      }
      if (len == -1) {
        r->type = Reply::Type::kNull;
        return 1;
      }
      const size_t n = static_cast<size_t>(len);
      if (c->in.size() - c->pos < n + 2) return 0;
      if (c->in[c->pos + n] != '\r' || c->in[c->pos + n + 1] != '\n') {
        *err = "bulk not terminated by CRLF";
        return -1;
      }
      r->type = type == '$' ? Reply::Type::kBulk : type == '!' ? Reply::Type::kError : Reply::Type::kVerbatim;
      r->str.assign(c->in.substr(c->pos, n));
      c->pos += n + 2;
      if (type == '=') {
        if (n < 4 || r->str[3] != ':') {
          *err = "verbatim string without a format";
          return -1;
        }
        r->str.erase(0, 4);
      }
      return 1;
    }
    case '%':
    case '~':
    case '>':
    case '*': {
      int64_t count = 0;
      if (!ToInt(line, &count) || count < -1 || (count >= 0 && static_cast<uint64_t>(count) > c->limits->max_elements)) {
        *err = "bad array length";
        return -1;
      }
      if (count == -1 && type == '*') {
        r->type = Reply::Type::kNull;
        return 1;
      }
      if (count < 0) {
        *err = "bad aggregate length";
        return -1;
      }
      if (type == '%') {
        if (static_cast<uint64_t>(count) > c->limits->max_elements / 2) {
          *err = "bad map length";
          return -1;
        }
        count *= 2;  // keys and values
      }
      c->total_elements += static_cast<size_t>(count);
      if (c->total_elements > c->limits->max_elements) {
        *err = "too many elements in reply";
        return -1;
      }
      r->type = type == '%' ? Reply::Type::kMap : type == '~' ? Reply::Type::kSet
                : type == '>' ? Reply::Type::kPush : Reply::Type::kArray;
      r->elements.clear();
      // Reserved once, bounded by the bytes there (each element needs at
      // least 3): growing by doubling was 27% of fuzz_resp_dispatcher's time
      // (COMMAND's nested arrays; perf, ASan build).
      r->elements.reserve(std::min<size_t>(static_cast<size_t>(count), (c->in.size() - c->pos) / 3));
      for (int64_t i = 0; i < count; ++i) {
        // Each element needs at least 3 bytes: do not allocate for data not there.
        if (c->in.size() - c->pos < 3) return 0;
        Reply child;
        const int g = ReadValue(c, &child, depth + 1, err);
        if (g <= 0) return g;
        r->elements.push_back(std::move(child));
      }
      return 1;
    }
    default:
      *err = "unknown reply type byte";
      return -1;
  }
}

}  // namespace

absl::Status ParseReply(std::string_view input, Reply* reply, size_t* consumed, const ReplyLimits& limits) {
  Cursor c{input, 0, 0, &limits};
  std::string err;
  Reply r;
  const int got = ReadValue(&c, &r, 0, &err);
  if (got < 0) return absl::DataLossError(absl::StrCat("protocol error: ", err));
  if (got == 0) {
    *consumed = 0;
    return absl::OkStatus();
  }
  *reply = std::move(r);
  *consumed = c.pos;
  return absl::OkStatus();
}

std::string Reply::DebugString() const {
  switch (type) {
    case Type::kSimple: return str;
    case Type::kError: return absl::StrCat("(error) ", str);
    case Type::kInteger: return absl::StrCat("(integer) ", integer);
    case Type::kBulk: return absl::StrCat("\"", str, "\"");
    case Type::kNull: return "(nil)";
    case Type::kBool: return integer ? "(true)" : "(false)";
    case Type::kDouble: return absl::StrCat("(double) ", str);
    case Type::kBigNumber: return absl::StrCat("(big number) ", str);
    case Type::kVerbatim: return absl::StrCat("\"", str, "\"");
    case Type::kMap:
    case Type::kSet:
    case Type::kPush:
    case Type::kArray: {
      std::string s = "[";
      for (size_t i = 0; i < elements.size(); ++i) {
        if (i) s += ", ";
        s += elements[i].DebugString();
      }
      return s + "]";
    }
  }
  return "";
}

}  // namespace pollen::resp
