// ReplyReader: client-side decoding of RESP2 replies (used by pollenctl and the
// tests). Bounded: nesting depth, element count and bulk length are checked
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
  enum class Type { kSimple, kError, kInteger, kBulk, kNull, kArray };
  Type type = Type::kNull;
  std::string str;             // kSimple, kError, kBulk
  int64_t integer = 0;         // kInteger
  std::vector<Reply> elements; // kArray

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
