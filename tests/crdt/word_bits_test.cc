// WordBits conversions and BlockedFilter::ExportBlocksInto against plain
// one-bit-at-a-time references: both run without branches on the data
// (two positions a step, every word written and kept when non-zero), so the
// edge cases are words of 0, 1, 2, odd and 64 bits, at the ends of a list.
#include "crdt/word_bits.h"

#include <bit>
#include <random>
#include <vector>

#include "crdt/blocked_filter.h"
#include "gtest/gtest.h"

namespace pollen::crdt {
namespace {

std::vector<uint64_t> NaivePositions(const std::vector<WordBits>& words, uint64_t base_bit) {
  std::vector<uint64_t> out;
  for (const WordBits& w : words) {
    for (int b = 0; b < 64; ++b) {
      if ((w.bits >> b) & 1) out.push_back(w.index * 64 + static_cast<uint64_t>(b) - base_bit);
    }
  }
  return out;
}

// A canonical list with words of every popcount class, ascending indexes.
std::vector<WordBits> RandomWords(std::mt19937_64& rng, size_t n) {
  std::vector<WordBits> words;
  uint64_t index = 2 + rng() % 5;
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = 0;
    switch (rng() % 5) {
      case 0: bits = uint64_t{1} << (rng() % 64); break;
      case 1: bits = (uint64_t{1} << (rng() % 64)) | (uint64_t{1} << (rng() % 64)); break;
      case 2: bits = rng() & rng() & rng(); break;
      case 3: bits = ~uint64_t{0}; break;
      default: bits = rng(); break;
    }
    if (bits == 0) bits = 1;
    words.push_back({index, bits});
    index += 1 + rng() % 3;
  }
  return words;
}

TEST(WordBitsTest, PositionsMatchABitByBitScan) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<WordBits> words = RandomWords(rng, rng() % 40);
    const uint64_t base_bit = words.empty() ? 0 : rng() % (words.front().index * 64 + 1);
    const std::vector<uint64_t> expected = NaivePositions(words, base_bit);
    EXPECT_EQ(ToBitPositions(words, base_bit), expected);
    std::vector<uint64_t> appended = {7, 8};  // what was there stays
    AppendBitPositions(words, base_bit, &appended);
    ASSERT_EQ(appended.size(), expected.size() + 2);
    EXPECT_EQ(std::vector<uint64_t>(appended.begin() + 2, appended.end()), expected);
    EXPECT_EQ(FromBitPositions(expected, base_bit), words);  // and back
    EXPECT_EQ(CountBits(words), expected.size());
  }
}

TEST(WordBitsTest, ExportKeepsExactlyTheNonZeroWords) {
  auto filter = BlockedFilter::Create(FilterShape{3000, 7});  // 24,000 words: several 512-word steps
  ASSERT_TRUE(filter.ok()) << filter.status();
  std::mt19937_64 rng(11);
  std::vector<WordBits> set;
  for (uint64_t i = 0; i < 3000 * kWordsPerBlock; ++i) {
    if (rng() % 3 == 0) set.push_back({i, rng() | 1});
  }
  set.push_back({3000 * kWordsPerBlock - 1, uint64_t{1} << 63});  // the last word of the filter
  Canonicalize(set);
  ASSERT_TRUE((*filter)->Merge(set, nullptr).ok());
  for (auto [first, count] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 3000}, {0, 1}, {1, 64}, {63, 65}, {2999, 1}, {2990, 100}, {3000, 5}}) {
    std::vector<WordBits> expected;
    for (const WordBits& w : set) {
      if (w.index >= first * kWordsPerBlock && w.index < std::min<uint64_t>(3000, first + count) * kWordsPerBlock) {
        expected.push_back(w);
      }
    }
    std::vector<WordBits> out = {{0, 5}};  // what was there stays
    (*filter)->ExportBlocksInto(first, count, &out);
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.front(), (WordBits{0, 5}));
    EXPECT_EQ(std::vector<WordBits>(out.begin() + 1, out.end()), expected) << first << "+" << count;
  }
}

}  // namespace
}  // namespace pollen::crdt
