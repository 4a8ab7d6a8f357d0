// Hierarchical anti-entropy summaries (node/core/anti_entropy.h): a digest
// per generation, a hash per group of ranges, the range summaries; each level
// points at exactly what differs below it.
#include "node/core/anti_entropy.h"

#include <gtest/gtest.h>

#include "crdt/blocked_filter.h"
#include "node/core/rng.h"

namespace pollen::node {
namespace {

std::vector<uint64_t> RandomSummaries(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint64_t> out(n);
  for (uint64_t& s : out) s = rng.Next();
  return out;
}

// A shape whose range count is `ranges` (one block per range below kTargetRanges).
crdt::FilterShape ShapeOf(uint64_t blocks) {
  crdt::FilterShape shape;
  shape.blocks = blocks;
  return shape;
}

TEST(AntiEntropySummaries, EachLevelPointsAtTheOneDifferingRange) {
  const uint64_t blocks = 1000;  // 1000 ranges of one block: 32 groups, the last of 8
  const std::vector<uint64_t> ours = RandomSummaries(RangeCount(blocks), 1);
  for (uint64_t changed : {0u, 31u, 32u, 517u, 999u}) {
    std::vector<uint64_t> theirs = ours;
    theirs[changed] ^= 1;
    wire::GenerationSummary digest;
    Summarize(theirs, blocks, 0, kDigestLevel, {}, &digest);
    ASSERT_TRUE(ValidateSummary(digest, ShapeOf(blocks)).ok());
    EXPECT_EQ(digest.summaries_size(), 1);
    ASSERT_EQ(DifferingItems(ours, digest), std::vector<uint64_t>{0});

    wire::GenerationSummary groups;
    Summarize(theirs, blocks, 0, 1, ChildItems(kDigestLevel, std::vector<uint64_t>{0}, RangeCount(blocks)), &groups);
    ASSERT_TRUE(ValidateSummary(groups, ShapeOf(blocks)).ok());
    EXPECT_EQ(groups.items_size(), 0);  // every group: left implicit
    EXPECT_EQ(groups.summaries_size(), 32);
    const std::vector<uint64_t> differing_groups = DifferingItems(ours, groups);
    ASSERT_EQ(differing_groups, std::vector<uint64_t>{changed / kRangesPerGroup});

    wire::GenerationSummary ranges;
    Summarize(theirs, blocks, 0, 0, ChildItems(1, differing_groups, RangeCount(blocks)), &ranges);
    ASSERT_TRUE(ValidateSummary(ranges, ShapeOf(blocks)).ok());
    EXPECT_EQ(ranges.summaries_size(), changed >= 992 ? 8 : 32);  // the last group holds 8 ranges
    EXPECT_EQ(DifferingItems(ours, ranges), std::vector<uint64_t>{changed});
  }
}

TEST(AntiEntropySummaries, EqualReplicasDifferNowhere) {
  const std::vector<uint64_t> ours = RandomSummaries(1024, 2);
  for (uint32_t level = 0; level <= kDigestLevel; ++level) {
    wire::GenerationSummary s;
    Summarize(ours, 1024, 3, level, {}, &s);
    EXPECT_TRUE(DifferingItems(ours, s).empty()) << level;
  }
}

TEST(AntiEntropySummaries, ASwapOfTwoRangesChangesTheDigest) {
  std::vector<uint64_t> ours = RandomSummaries(64, 3);
  std::vector<uint64_t> theirs = ours;
  std::swap(theirs[1], theirs[2]);
  wire::GenerationSummary digest;
  Summarize(theirs, 64, 0, kDigestLevel, {}, &digest);
  EXPECT_EQ(DifferingItems(ours, digest), std::vector<uint64_t>{0});
}

TEST(AntiEntropySummaries, ChildItems) {
  EXPECT_EQ(ChildItems(1, std::vector<uint64_t>{1}, 70),
            (std::vector<uint64_t>{32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52,
                                   53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63}));
  EXPECT_EQ(ChildItems(1, std::vector<uint64_t>{2}, 70), (std::vector<uint64_t>{64, 65, 66, 67, 68, 69}));
  EXPECT_EQ(ChildItems(kDigestLevel, std::vector<uint64_t>{0}, 70), (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(ItemsAt(0, 70), 70u);
  EXPECT_EQ(ItemsAt(1, 70), 3u);
  EXPECT_EQ(ItemsAt(kDigestLevel, 70), 1u);
}

TEST(AntiEntropySummaries, MalformedSummariesAreRejected) {
  const std::vector<uint64_t> ours = RandomSummaries(100, 4);
  wire::GenerationSummary good;
  Summarize(ours, 100, 0, 0, std::vector<uint64_t>{3, 7}, &good);
  ASSERT_TRUE(ValidateSummary(good, ShapeOf(100)).ok());
  EXPECT_EQ(good.items_size(), 2);

  wire::GenerationSummary bad = good;
  bad.set_level(kDigestLevel + 1);
  EXPECT_FALSE(ValidateSummary(bad, ShapeOf(100)).ok());
  bad = good;
  bad.set_items(1, 3);  // not ascending
  EXPECT_FALSE(ValidateSummary(bad, ShapeOf(100)).ok());
  bad = good;
  bad.set_items(1, 100);  // out of bounds
  EXPECT_FALSE(ValidateSummary(bad, ShapeOf(100)).ok());
  bad = good;
  bad.add_summaries(5);  // one summary too many for the items
  EXPECT_FALSE(ValidateSummary(bad, ShapeOf(100)).ok());
  bad = good;
  bad.clear_items();  // then every range must be there
  EXPECT_FALSE(ValidateSummary(bad, ShapeOf(100)).ok());
  bad = good;
  bad.set_blocks_per_range(2);
  EXPECT_FALSE(ValidateSummary(bad, ShapeOf(100)).ok());
}

// A range's contents: a bitmap of its words when the range is dense enough
// (from ~7% fill), positions when sparse; either decodes to the range's words.
TEST(AntiEntropyRanges, DenseRangesGoAsBitmapsSparseOnesAsPositions) {
  const crdt::FilterShape shape{4096, 7};  // 4 blocks per range, 1024 ranges
  absl::StatusOr<std::unique_ptr<crdt::BlockedFilter>> filter = crdt::BlockedFilter::Create(shape);
  ASSERT_TRUE(filter.ok());
  Rng rng(9);
  // Range 5: a quarter of its bits; range 9: two bits, far apart; range 11: none.
  std::vector<crdt::WordBits> words;
  const uint64_t words_per_range = BlocksPerRange(shape.blocks) * crdt::kWordsPerBlock;
  for (uint64_t w = 5 * words_per_range; w < 6 * words_per_range; ++w) words.push_back({w, rng.Next() & rng.Next()});
  words.push_back({9 * words_per_range, 0x10});
  words.push_back({10 * words_per_range - 1, uint64_t{1} << 60});
  crdt::Canonicalize(words);
  ASSERT_TRUE((*filter)->Merge(words, nullptr).ok());
  for (uint64_t range : {5u, 9u, 11u}) {
    wire::RangeData data;
    EncodeRange(**filter, range, &data);
    ASSERT_FALSE(data.positions().empty());
    EXPECT_EQ(static_cast<int>(data.positions()[0]), range == 5 ? 2 : range == 9 ? 1 : 0) << range;
    absl::StatusOr<std::vector<crdt::WordBits>> back = DecodeRange(data, shape);
    ASSERT_TRUE(back.ok()) << back.status();
    const uint64_t first_block = range * BlocksPerRange(shape.blocks);
    EXPECT_EQ(*back, (*filter)->ExportBlocks(first_block, BlocksPerRange(shape.blocks))) << range;
  }
  // A bitmap that claims a bit beyond its range is refused.
  wire::RangeData data;
  EncodeRange(**filter, 5, &data);
  data.set_range(1024);
  EXPECT_FALSE(DecodeRange(data, shape).ok());
}

TEST(AntiEntropyRanges, KnownBitsAreLeftOut) {
  const crdt::FilterShape shape{4096, 7};  // 4 blocks per range, 1024 ranges
  absl::StatusOr<std::unique_ptr<crdt::BlockedFilter>> filter = crdt::BlockedFilter::Create(shape);
  ASSERT_TRUE(filter.ok());
  Rng rng(11);
  const uint64_t words_per_range = BlocksPerRange(shape.blocks) * crdt::kWordsPerBlock;
  const uint64_t range = 7;
  std::vector<crdt::WordBits> ours, known;
  for (uint64_t w = range * words_per_range; w < (range + 1) * words_per_range; ++w) {
    ours.push_back({w, rng.Next() & rng.Next()});
    // What the peer holds: some of our bits, some of its own, and words we lack.
    if (w % 3 == 0) known.push_back({w, (ours.back().bits & rng.Next()) | (rng.Next() & rng.Next())});
    if (w % 5 == 0) known.push_back({w, ours.back().bits});
  }
  crdt::Canonicalize(ours);
  crdt::Canonicalize(known);
  ASSERT_TRUE((*filter)->Merge(ours, nullptr).ok());
  std::vector<crdt::WordBits> expected;
  for (const crdt::WordBits& w : ours) {
    uint64_t bits = w.bits;
    for (const crdt::WordBits& k : known) bits &= k.index == w.index ? ~k.bits : ~uint64_t{0};
    if (bits != 0) expected.push_back({w.index, bits});
  }
  ASSERT_LT(expected.size(), ours.size());
  wire::RangeData data;
  EncodeRange(**filter, range, &data, known);
  absl::StatusOr<std::vector<crdt::WordBits>> back = DecodeRange(data, shape);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, expected);
  // Knowing everything leaves nothing to send: the empty set (codec mode 0).
  EncodeRange(**filter, range, &data, ours);
  ASSERT_EQ(data.positions().size(), 1u);
  EXPECT_EQ(static_cast<int>(data.positions()[0]), 0);
}

}  // namespace
}  // namespace pollen::node
