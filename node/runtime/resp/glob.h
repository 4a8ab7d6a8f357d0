// Redis' glob-style patterns (KEYS, SCAN MATCH): `*` any run of bytes, `?` one
// byte, `[abc]`, `[^abc]`, `[a-z]` a class, `\x` the byte x literally.
// Byte-wise and case-sensitive, like Redis' stringmatchlen.
#pragma once

#include <string_view>

namespace pollen::resp {

bool GlobMatch(std::string_view pattern, std::string_view text);

}  // namespace pollen::resp
