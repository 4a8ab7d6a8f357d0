#include "crdt/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace pollen::crdt {
namespace {

TEST(Crc32c, KnownValues) {
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(Crc32cPortable("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720, B.4
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
}

// The instruction path (where the CPU has one) and the tables agree on every
// length and alignment, whole or continued from any split.
TEST(Crc32c, InstructionPathEqualsTables) {
  std::mt19937_64 rng(7);
  std::string data(4096 + 64, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, size_t{1000}, size_t{4096}}) {
      const std::string_view v = std::string_view(data).substr(offset, len);
      const uint32_t want = Crc32cPortable(v);
      EXPECT_EQ(Crc32c(v), want) << offset << " " << len;
      const size_t split = static_cast<size_t>(rng() % (len + 1));
      EXPECT_EQ(Crc32c(v.substr(split), Crc32c(v.substr(0, split))), want) << offset << " " << len << " " << split;
      EXPECT_EQ(Crc32cPortable(v.substr(split), Crc32cPortable(v.substr(0, split))), want);
    }
  }
}

// Every single-bit flip changes the value (a property of every CRC).
TEST(Crc32c, DetectsEverySingleBitFlip) {
  std::string data(257, 'x');
  const uint32_t good = Crc32c(data);
  for (size_t i = 0; i < data.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      data[i] = static_cast<char>(data[i] ^ (1 << b));
      EXPECT_NE(Crc32c(data), good) << i << " " << b;
      data[i] = static_cast<char>(data[i] ^ (1 << b));
    }
  }
}

}  // namespace
}  // namespace pollen::crdt
