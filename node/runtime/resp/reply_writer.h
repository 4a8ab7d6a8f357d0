// RESP2 reply encoding: each function appends one value to *out. Pure.
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
void AppendInteger(std::string* out, int64_t v);           // :v
void AppendBulk(std::string* out, std::string_view s);     // $len s
void AppendNullBulk(std::string* out);                     // $-1
void AppendArrayHeader(std::string* out, size_t n);        // *n, then n values
void AppendDouble(std::string* out, double v);             // as a bulk string, %.17g

}  // namespace pollen::resp
