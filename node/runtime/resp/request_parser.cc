#include "node/runtime/resp/request_parser.h"

#include <algorithm>
#include <cassert>

namespace pollen::resp {
namespace {

// A "*<n>\r\n" or "$<n>\r\n" header never needs more than this many bytes.
constexpr size_t kMaxHeaderBytes = 32;

// Strict decimal: optional '-', 1..19 digits, nothing else.
bool ParseHeaderInt(std::string_view s, int64_t* out) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = negative ? -v : v;
  return true;
}

// Finds "\r\n" starting at `from`, looking at most kMaxHeaderBytes ahead.
// Returns npos when absent; sets *too_long when it cannot appear in range.
size_t FindHeaderEnd(std::string_view buf, size_t from, bool* too_long) {
  const size_t limit = std::min(buf.size(), from + kMaxHeaderBytes);
  for (size_t i = from; i + 1 < limit; ++i) {
    if (buf[i] == '\r' && buf[i + 1] == '\n') return i;
  }
  *too_long = buf.size() >= from + kMaxHeaderBytes;
  return std::string_view::npos;
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == '\0'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool SplitInline(std::string_view line, std::string* storage, std::vector<std::pair<size_t, size_t>>* spans) {
  size_t i = 0;
  const size_t n = line.size();
  while (true) {
    while (i < n && IsSpace(line[i])) ++i;
    if (i >= n) return true;
    const size_t start = storage->size();
    bool in_double = false, in_single = false;
    while (true) {
      if (in_double) {
        if (i >= n) return false;  // unterminated "
        const char c = line[i];
        if (c == '\\' && i + 3 < n && line[i + 1] == 'x' && HexValue(line[i + 2]) >= 0 &&
            HexValue(line[i + 3]) >= 0) {
          storage->push_back(static_cast<char>(HexValue(line[i + 2]) * 16 + HexValue(line[i + 3])));
          i += 4;
        } else if (c == '\\' && i + 1 < n) {
          const char e = line[i + 1];
          char out = e;
          switch (e) {
            case 'n': out = '\n'; break;
            case 'r': out = '\r'; break;
            case 't': out = '\t'; break;
            case 'b': out = '\b'; break;
            case 'a': out = '\a'; break;
            default: break;
          }
          storage->push_back(out);
          i += 2;
        } else if (c == '"') {
          if (i + 1 < n && !IsSpace(line[i + 1])) return false;  // "foo"bar
          ++i;
          break;
        } else {
          storage->push_back(c);
          ++i;
        }
      } else if (in_single) {
        if (i >= n) return false;  // unterminated '
        const char c = line[i];
        if (c == '\\' && i + 1 < n && line[i + 1] == '\'') {
          storage->push_back('\'');
          i += 2;
        } else if (c == '\'') {
          if (i + 1 < n && !IsSpace(line[i + 1])) return false;
          ++i;
          break;
        } else {
          storage->push_back(c);
          ++i;
        }
      } else {
        if (i >= n || IsSpace(line[i])) break;
        const char c = line[i];
        if (c == '"') {
          in_double = true;
        } else if (c == '\'') {
          in_single = true;
        } else {
          storage->push_back(c);
        }
        ++i;
      }
    }
    spans->emplace_back(start, storage->size() - start);
  }
}

void RequestParser::Reset() {
  expected_ = -1;
  pos_ = 0;
  spans_.clear();
  storage_.clear();
  inline_scanned_ = 0;
  views_.clear();
  consumed_ = 0;
  args_in_buffer_ = false;
  error_ = ParseError();
  // Do not keep a huge argument vector around after one huge request.
  if (spans_.capacity() > 4096) spans_.shrink_to_fit();
  if (storage_.capacity() > (64u << 10)) storage_.shrink_to_fit();
}

RequestParser::Status RequestParser::Fail(std::string message, bool fatal, size_t skip) {
  error_.message = std::move(message);
  error_.fatal = fatal;
  error_.skip = skip;
  return Status::kError;
}

RequestParser::Status RequestParser::Parse(std::string_view buffer) {
  views_.clear();
  if (buffer.empty()) return Status::kIncomplete;
  if (buffer[0] == '*') return ParseMultibulk(buffer);
  return ParseInline(buffer);
}

RequestParser::Status RequestParser::ParseMultibulk(std::string_view buf) {
  if (expected_ < 0) {
    bool too_long = false;
    const size_t end = FindHeaderEnd(buf, 1, &too_long);
    if (end == std::string_view::npos) {
      if (too_long) return Fail("ERR Protocol error: too big mbulk count string", true);
      return Status::kIncomplete;
    }
    int64_t count = 0;
    if (!ParseHeaderInt(buf.substr(1, end - 1), &count) || count > static_cast<int64_t>(limits_.max_args)) {
      return Fail("ERR Protocol error: invalid multibulk length", true);
    }
    pos_ = end + 2;
    if (count <= 0) {  // "*0" and "*-1": nothing to run
      consumed_ = pos_;
      return Status::kComplete;
    }
    expected_ = count;
    spans_.reserve(static_cast<size_t>(std::min<int64_t>(count, 1024)));
  }
  while (spans_.size() < static_cast<size_t>(expected_)) {
    if (pos_ >= buf.size()) return Status::kIncomplete;
    if (buf[pos_] != '$') {
      const char c = buf[pos_];
      const bool printable = c >= 0x20 && c < 0x7f;
      return Fail(std::string("ERR Protocol error: expected '$', got '") + (printable ? c : '?') + "'", true);
    }
    bool too_long = false;
    const size_t end = FindHeaderEnd(buf, pos_ + 1, &too_long);
    if (end == std::string_view::npos) {
      if (too_long) return Fail("ERR Protocol error: invalid bulk length", true);
      return Status::kIncomplete;
    }
    int64_t len = 0;
    if (!ParseHeaderInt(buf.substr(pos_ + 1, end - pos_ - 1), &len) || len < 0 ||
        static_cast<uint64_t>(len) > limits_.max_bulk_bytes) {
      return Fail("ERR Protocol error: invalid bulk length", true);
    }
    const size_t data = end + 2;
    const size_t need = data + static_cast<size_t>(len) + 2;
    if (buf.size() < need) return Status::kIncomplete;
    if (buf[need - 2] != '\r' || buf[need - 1] != '\n') {
      return Fail("ERR Protocol error: expected CRLF after bulk data", true);
    }
    spans_.emplace_back(data, static_cast<size_t>(len));
    pos_ = need;
  }
  views_.reserve(spans_.size());
  for (const auto& [off, len] : spans_) views_.emplace_back(buf.data() + off, len);
  args_in_buffer_ = true;
  consumed_ = pos_;
  return Status::kComplete;
}

RequestParser::Status RequestParser::ParseInline(std::string_view buf) {
  const size_t limit = std::min(buf.size(), limits_.max_inline_bytes + 1);
  const size_t nl = buf.substr(0, limit).find('\n', inline_scanned_);
  if (nl == std::string_view::npos) {
    if (buf.size() > limits_.max_inline_bytes) return Fail("ERR Protocol error: too big inline request", true);
    inline_scanned_ = buf.size();
    return Status::kIncomplete;
  }
  std::string_view line = buf.substr(0, nl);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  storage_.clear();
  spans_.clear();
  if (!SplitInline(line, &storage_, &spans_)) {
    return Fail("ERR Protocol error: unbalanced quotes in request", false, nl + 1);
  }
  if (spans_.size() > limits_.max_args) {
    return Fail("ERR Protocol error: invalid multibulk length", false, nl + 1);
  }
  views_.reserve(spans_.size());
  for (const auto& [off, len] : spans_) views_.emplace_back(storage_.data() + off, len);
  args_in_buffer_ = false;
  consumed_ = nl + 1;
  return Status::kComplete;
}

}  // namespace pollen::resp
