// PrintableName: binary-safe filter names as safe, distinct text.
#include "node/core/printable_name.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace pollen::node {
namespace {

TEST(PrintableName, KeepsTextEscapesTheRest) {
  EXPECT_EQ(PrintableName("crawl:seen"), "crawl:seen");
  EXPECT_EQ(PrintableName(""), "");
  EXPECT_EQ(PrintableName("with space"), "with space");
  EXPECT_EQ(PrintableName("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x8c\xbc"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x8c\xbc");
  EXPECT_EQ(PrintableName(std::string("a\0b\r\n\x7f", 6)), "a\\x00b\\x0d\\x0a\\x7f");
  EXPECT_EQ(PrintableName("back\\slash"), "back\\\\slash");
  // Invalid UTF-8: a lone continuation byte, a truncated sequence, an
  // overlong form, a surrogate.
  EXPECT_EQ(PrintableName("\x80"), "\\x80");
  EXPECT_EQ(PrintableName("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(PrintableName("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(PrintableName("\xed\xa0\x80"), "\\xed\\xa0\\x80");
}

// Distinct names never print the same: every 1- and 2-byte name.
TEST(PrintableName, DistinctNamesPrintDistinctly) {
  std::set<std::string> seen;
  size_t names = 0;
  for (int a = 0; a < 256; ++a) {
    seen.insert(PrintableName(std::string(1, static_cast<char>(a))));
    ++names;
    for (int b = 0; b < 256; ++b) {
      const char pair[2] = {static_cast<char>(a), static_cast<char>(b)};
      seen.insert(PrintableName(std::string(pair, 2)));
      ++names;
    }
  }
  EXPECT_EQ(seen.size(), names);
  for (const std::string& s : seen) {
    for (char c : s) EXPECT_FALSE(c == '\n' || c == '\r' || c == '\0');
  }
}

}  // namespace
}  // namespace pollen::node
