// RequestParser: incremental, bounded parser for RESP2 requests, both the
// multibulk form ("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n") and the inline form
// ("PING hi\r\n", with Redis' quoting rules).
//
// Usage: keep the unconsumed input in one buffer whose prefix does not change
// between calls (appending is fine, even if it reallocates). Call Parse() with
// the buffer starting at the first byte of the current request:
//   kComplete   -> args() and consumed() describe one request; drop consumed()
//                  bytes from the front of the buffer and call Reset().
//   kIncomplete -> read more and call again; work already done is not redone.
//   kError      -> error(): reply with error().message; if error().fatal the
//                  framing is lost and the connection must be closed, else drop
//                  error().skip bytes, Reset() and continue.
// An empty request ("*0\r\n", "*-1\r\n", a blank inline line) completes with
// no args; the caller skips it without a reply, as Redis does.
//
// Limits are checked before anything is allocated: argument count, bulk
// length, inline line length, and header line length. Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pollen::resp {

struct ParserLimits {  // as ServerLimits' (server_context.h)
  size_t max_args = 1'048'576;
  size_t max_bulk_bytes = 32u << 20;
  size_t max_inline_bytes = 64u << 10;
};

struct ParseError {
  std::string message;  // e.g. "ERR Protocol error: invalid bulk length"
  bool fatal = true;
  size_t skip = 0;      // bytes to drop when !fatal
};

class RequestParser {
 public:
  enum class Status { kComplete, kIncomplete, kError };

  explicit RequestParser(const ParserLimits& limits = ParserLimits()) : limits_(limits) {}

  Status Parse(std::string_view buffer);
  void Reset();

  // Valid after kComplete, until the buffer changes or Reset().
  std::span<const std::string_view> args() const { return views_; }
  // True when args() point into the buffer given to Parse() (the multibulk
  // form): they then stay valid after Reset(), until the buffer changes.
  // False for the inline form, whose arguments live in the parser.
  bool args_in_buffer() const { return args_in_buffer_; }
  size_t consumed() const { return consumed_; }
  const ParseError& error() const { return error_; }

 private:
  Status ParseMultibulk(std::string_view buffer);
  Status ParseInline(std::string_view buffer);
  Status Fail(std::string message, bool fatal, size_t skip = 0);

  ParserLimits limits_;
  // Multibulk progress: expected argument count (-1: header not read yet),
  // the next byte to parse, and (offset, length) of each argument read.
  int64_t expected_ = -1;
  size_t pos_ = 0;
  std::vector<std::pair<size_t, size_t>> spans_;
  // Inline arguments are unescaped into storage_.
  std::string storage_;
  size_t inline_scanned_ = 0;  // bytes searched for '\n' so far
  std::vector<std::string_view> views_;
  size_t consumed_ = 0;
  bool args_in_buffer_ = false;
  ParseError error_;
};

// Splits an inline line (without its line ending) into arguments with Redis'
// rules: whitespace separates, "..." supports \n \r \t \b \a \\ \" \xHH, '...'
// supports \'. A closing quote must be followed by whitespace or the end.
// Returns false on unbalanced quotes. Appends argument bytes to *storage and
// (offset, length) pairs to *spans.
bool SplitInline(std::string_view line, std::string* storage, std::vector<std::pair<size_t, size_t>>* spans);

}  // namespace pollen::resp
