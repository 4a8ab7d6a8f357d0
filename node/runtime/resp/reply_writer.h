// RESP2 and RESP3 reply encoding: each function appends one value to *out.
// Pure. The functions that take a Proto write the RESP3 type to a RESP3
// connection and its RESP2 equivalent (as Redis 7 does) to a RESP2 one.
//
// Simple strings and errors cannot carry CR or LF; AppendSimple/AppendError
// replace them with spaces so a reply built from user input can never break
// the framing. An error message should start with its code ("ERR ...",
// "WRONGPASS ..."); AppendError adds "ERR " when it has no upper-case code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pollen::resp {

void AppendSimple(std::string* out, std::string_view s);   // +s
void AppendError(std::string* out, std::string_view msg);  // -msg
void AppendErrorVerbatim(std::string* out, std::string_view msg);  // -msg, no "ERR " added (RedisBloom's bare errors)
void AppendInteger(std::string* out, int64_t v);           // :v
void AppendBulk(std::string* out, std::string_view s);     // $len s
void AppendNullBulk(std::string* out);                     // $-1
void AppendArrayHeader(std::string* out, size_t n);        // *n, then n values
void AppendDouble(std::string* out, double v);             // as a bulk string, %.17g

// The protocol a connection speaks (HELLO 2|3).
enum class Proto : uint8_t { kResp2 = 2, kResp3 = 3 };

void AppendNull(std::string* out, Proto p);                     // $-1 | _
void AppendNullArray(std::string* out, Proto p);                // *-1 | _
void AppendMapHeader(std::string* out, size_t pairs, Proto p);  // *2n | %n, then 2n values
void AppendSetHeader(std::string* out, size_t n, Proto p);      // *n | ~n
void AppendVerbatim(std::string* out, std::string_view text, Proto p);  // $len text | =len txt:text
void AppendBool(std::string* out, bool b);  // #t | #f: RESP3 only (callers choose integers for RESP2)

}  // namespace pollen::resp
