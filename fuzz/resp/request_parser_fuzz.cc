// Fuzzes RequestParser the way a connection drives it: the input arrives in
// chunks (sizes taken from the first byte), every complete request is dropped
// from the front. Checks the limits hold and that the parser always makes
// progress or asks for more.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "node/runtime/resp/request_parser.h"

using pollen::resp::ParserLimits;
using pollen::resp::RequestParser;

namespace {
// Structured mode: each input byte picks a fragment, so random inputs reach
// deep into the multibulk and inline grammars.
constexpr const char* kFragments[] = {"*", "$", "\r\n", "\n", "0", "1", "2", "3", "9", "-1", "10", "PING", "BF.ADD",
                                      " ", "\"", "'", "\\", "\\x4", "1", "a", "*2\r\n", "$3\r\nabc\r\n",
                                      "$0\r\n\r\n", "*1\r\n$4\r\nPING\r\n", "\r", "99999999999", "\x00"};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + (data[0] >> 1) % 32;
  std::string input;
  if (data[0] & 1) {
    for (size_t i = 1; i < size; ++i) input += kFragments[data[i] % (sizeof(kFragments) / sizeof(kFragments[0]))];
  } else {
    input.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  }
  ParserLimits limits;
  limits.max_args = 64;
  limits.max_bulk_bytes = 512;
  limits.max_inline_bytes = 256;
  RequestParser parser(limits);
  std::string buf;
  for (size_t off = 0; off < input.size(); off += chunk) {
    buf.append(input, off, chunk);
    while (true) {
      const auto st = parser.Parse(buf);
      if (st == RequestParser::Status::kIncomplete) break;
      if (st == RequestParser::Status::kError) {
        if (parser.error().message.rfind("ERR Protocol error: ", 0) != 0) std::abort();
        if (parser.error().fatal) return 0;
        if (parser.error().skip == 0 || parser.error().skip > buf.size()) std::abort();
        buf.erase(0, parser.error().skip);
        parser.Reset();
        continue;
      }
      if (parser.consumed() == 0 || parser.consumed() > buf.size()) std::abort();
      if (parser.args().size() > limits.max_args) std::abort();
      for (std::string_view a : parser.args()) {
        if (a.size() > limits.max_bulk_bytes + limits.max_inline_bytes) std::abort();
      }
      buf.erase(0, parser.consumed());
      parser.Reset();
    }
    if (buf.size() > limits.max_args * (limits.max_bulk_bytes + 64) + 64) std::abort();  // bounded
  }
  return 0;
}
