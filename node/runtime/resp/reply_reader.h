// ReplyReader: client-side decoding of RESP2 and RESP3 replies (used by
// pollenctl and the tests). Bounded: nesting depth, element count and bulk length are checked
// before anything is allocated. Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pollen::resp {

struct Reply {
  // RESP3 adds kMap (elements: key, value, key, value, ...), kSet, kPush,
  // kDouble and kBigNumber (str: the text), kBool (integer 0 or 1) and
  // kVerbatim (str: the text after its "txt:" format prefix). A RESP3 null
  // ("_") is kNull.
  enum class Type { kSimple, kError, kInteger, kBulk, kNull, kArray, kMap, kSet, kPush, kDouble, kBool, kVerbatim, kBigNumber };
  Type type = Type::kNull;
  std::string str;             // kSimple, kError, kBulk, kVerbatim, kDouble, kBigNumber
  int64_t integer = 0;         // kInteger, kBool
  std::vector<Reply> elements; // kArray, kMap, kSet, kPush

  bool is_error() const { return type == Type::kError; }
  // A compact, readable rendering (for messages and --json fallbacks).
  std::string DebugString() const;
};

struct ReplyLimits {
  size_t max_depth = 8;
  size_t max_elements = 1u << 20;   // per array, and in total
  size_t max_bulk_bytes = 64u << 20;
};

// Decodes one reply from the front of `input`.
//   ok, *consumed > 0  -> *reply holds it;
//   ok, *consumed == 0 -> incomplete, read more;
//   error              -> malformed or over a limit (framing lost).
absl::Status ParseReply(std::string_view input, Reply* reply, size_t* consumed,
                        const ReplyLimits& limits = ReplyLimits());

}  // namespace pollen::resp
