// UnionCanonical: merging canonical word sets gives exactly what appending
// and crdt::Canonicalize give, whatever the overlap.
#include <gtest/gtest.h>

#include <random>

#include "node/core/dissemination.h"

namespace pollen::node {
namespace {

std::vector<crdt::WordBits> RandomCanonical(std::mt19937_64& rng, uint64_t universe_words, size_t n) {
  std::vector<crdt::WordBits> words;
  for (size_t i = 0; i < n; ++i) words.push_back({rng() % universe_words, rng() & rng()});  // some zero words
  crdt::Canonicalize(words);
  return words;
}

TEST(UnionCanonical, MatchesAppendThenCanonicalize) {
  std::mt19937_64 rng(11);
  std::vector<crdt::WordBits> scratch;
  for (int trial = 0; trial < 2000; ++trial) {
    const uint64_t universe = 1 + rng() % 300;  // small universes: many shared indices
    std::vector<crdt::WordBits> merged, reference;
    const int batches = static_cast<int>(rng() % 6);
    for (int b = 0; b < batches; ++b) {
      const std::vector<crdt::WordBits> batch = RandomCanonical(rng, universe, rng() % 40);
      UnionCanonical(merged, batch, scratch);
      reference.insert(reference.end(), batch.begin(), batch.end());
    }
    crdt::Canonicalize(reference);
    ASSERT_EQ(merged, reference) << "trial " << trial;
  }
}

TEST(UnionCanonical, DisjointAppendOverlapAndEmpty) {
  std::vector<crdt::WordBits> scratch;
  std::vector<crdt::WordBits> into = {{1, 0b01}, {5, 0b10}};
  UnionCanonical(into, {}, scratch);
  EXPECT_EQ(into, (std::vector<crdt::WordBits>{{1, 0b01}, {5, 0b10}}));
  const std::vector<crdt::WordBits> after = {{7, 1}, {9, 2}};
  UnionCanonical(into, after, scratch);  // all after: appended
  EXPECT_EQ(into, (std::vector<crdt::WordBits>{{1, 0b01}, {5, 0b10}, {7, 1}, {9, 2}}));
  const std::vector<crdt::WordBits> overlap = {{0, 4}, {5, 0b01}, {9, 2}, {12, 8}};
  UnionCanonical(into, overlap, scratch);  // same index: bits ORed, once
  EXPECT_EQ(into, (std::vector<crdt::WordBits>{{0, 4}, {1, 0b01}, {5, 0b11}, {7, 1}, {9, 2}, {12, 8}}));
  std::vector<crdt::WordBits> empty;
  UnionCanonical(empty, overlap, scratch);
  EXPECT_EQ(empty, overlap);
}

}  // namespace
}  // namespace pollen::node
