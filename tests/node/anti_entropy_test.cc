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
    const uint64_t encoded = EncodeRange(**filter, range, &data);
    ASSERT_FALSE(data.positions().empty());
    EXPECT_EQ(static_cast<int>(data.positions()[0]), range == 5 ? 2 : range == 9 ? 1 : 0) << range;
    uint64_t decoded = 0;
    absl::StatusOr<std::vector<crdt::WordBits>> back = DecodeRange(data, shape, &decoded);
    ASSERT_TRUE(back.ok()) << back.status();
    const uint64_t first_block = range * BlocksPerRange(shape.blocks);
    EXPECT_EQ(*back, (*filter)->ExportBlocks(first_block, BlocksPerRange(shape.blocks))) << range;
    EXPECT_EQ(decoded, crdt::CountBits(*back)) << range;
    EXPECT_EQ(decoded, encoded) << range;
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

// Below level 0: each block of a differing range is hashed with a salt, and
// only the blocks whose hashes differ go, scoped by a bitmap.
TEST(AntiEntropyBlocks, HashesPointAtTheDifferingBlocksOnly) {
  const crdt::FilterShape shape{20'000, 7};  // 20 blocks per range, 1000 ranges
  ASSERT_GE(BlocksPerRange(shape.blocks), kMinBlocksPerRangeForHashes);
  absl::StatusOr<std::unique_ptr<crdt::BlockedFilter>> ours = crdt::BlockedFilter::Create(shape);
  absl::StatusOr<std::unique_ptr<crdt::BlockedFilter>> theirs = crdt::BlockedFilter::Create(shape);
  ASSERT_TRUE(ours.ok() && theirs.ok());
  Rng rng(12);
  const uint64_t range = 17, bpr = BlocksPerRange(shape.blocks);
  const uint64_t first_word = range * bpr * crdt::kWordsPerBlock;
  std::vector<crdt::WordBits> shared;
  for (uint64_t w = first_word; w < first_word + bpr * crdt::kWordsPerBlock; ++w) shared.push_back({w, rng.Next() & rng.Next()});
  crdt::Canonicalize(shared);
  ASSERT_TRUE((*ours)->Merge(shared, nullptr).ok());
  ASSERT_TRUE((*theirs)->Merge(shared, nullptr).ok());
  // Blocks 0, 9 and 19 of the range differ: a bit only we hold, one only
  // they hold, and one each.
  auto add_a_bit = [](crdt::BlockedFilter& f, uint64_t word) {
    const uint64_t zeros = ~f.LoadWord(word);
    ASSERT_TRUE(f.Merge(std::vector<crdt::WordBits>{{word, zeros & (~zeros + 1)}}, nullptr).ok());  // its lowest clear bit
  };
  add_a_bit(**ours, first_word + 3);
  add_a_bit(**theirs, first_word + 9 * 8 + 1);
  add_a_bit(**ours, first_word + 19 * 8 + 7);
  add_a_bit(**theirs, first_word + 19 * 8);
  ASSERT_FALSE((*ours)->SameContents(**theirs));

  for (uint64_t salt : {1u, 2u, 77u}) {
    google::protobuf::RepeatedField<uint32_t> hashes;
    AppendBlockHashes(**theirs, range, salt, &hashes);
    ASSERT_EQ(static_cast<uint64_t>(hashes.size()), bpr);
    const std::string mask = DifferingBlocks(**ours, range, salt, {hashes.data(), static_cast<size_t>(hashes.size())});
    ASSERT_EQ(mask.size(), (bpr + 7) / 8);
    std::vector<uint64_t> differing;
    for (uint64_t b = 0; b < bpr; ++b) {
      if ((static_cast<uint8_t>(mask[b / 8]) >> (b % 8)) & 1) differing.push_back(b);
    }
    EXPECT_EQ(differing, (std::vector<uint64_t>{0, 9, 19})) << "salt " << salt;
    // Equal ranges differ nowhere; another range's hashes all differ.
    EXPECT_TRUE(DifferingBlocks(**theirs, range, salt, {hashes.data(), static_cast<size_t>(hashes.size())}).empty());

    // Our contents of those blocks, and nothing else, round trip.
    wire::RangeData data;
    const uint64_t bits = EncodeRange(**ours, range, &data, {}, mask);
    EXPECT_EQ(data.blocks(), mask);
    absl::StatusOr<std::vector<crdt::WordBits>> back = DecodeRange(data, shape);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(crdt::CountBits(*back), bits);
    std::vector<crdt::WordBits> expected;
    for (uint64_t b : differing) {
      for (const crdt::WordBits& w : (*ours)->ExportBlocks(range * bpr + b, 1)) expected.push_back(w);
    }
    EXPECT_EQ(*back, expected);
  }
  // A salted hash is not a plain one: the same blocks under two salts hash apart.
  google::protobuf::RepeatedField<uint32_t> a, b;
  AppendBlockHashes(**ours, range, 1, &a);
  AppendBlockHashes(**ours, range, 2, &b);
  EXPECT_NE(std::vector<uint32_t>(a.begin(), a.end()), std::vector<uint32_t>(b.begin(), b.end()));
}

// A cut leg keeps the hashes it has not answered: dropping the answered
// ranges drops exactly their blocks' hashes, short last range included.
TEST(AntiEntropyBlocks, UnansweredBlocksDropTheAnsweredRangesAndTheirHashes) {
  const uint64_t blocks = 20'005;  // 20 blocks per range, the last range of 5
  const uint64_t last = RangeCount(blocks) - 1;
  UnansweredBlocks kept;
  kept.ranges = {3, 7, last};
  for (uint64_t r : kept.ranges) {
    for (uint64_t b = 0; b < BlocksInRange(blocks, r); ++b) kept.hashes.push_back(static_cast<uint32_t>(r * 1000 + b));
  }
  ASSERT_EQ(kept.hashes.size(), 45u);
  kept.DropFront(0, blocks);
  EXPECT_EQ(kept.hashes.size(), 45u);
  kept.DropFront(1, blocks);
  EXPECT_EQ(kept.ranges, (std::vector<uint64_t>{7, last}));
  ASSERT_EQ(kept.hashes.size(), 25u);
  EXPECT_EQ(kept.hashes.front(), 7000u);
  kept.DropFront(1, blocks);
  EXPECT_EQ(kept.ranges, (std::vector<uint64_t>{last}));
  ASSERT_EQ(kept.hashes.size(), 5u);
  EXPECT_EQ(kept.hashes.front(), last * 1000);
  kept.DropFront(1, blocks);
  EXPECT_TRUE(kept.ranges.empty());
  EXPECT_TRUE(kept.hashes.empty());
}

TEST(AntiEntropyBlocks, UnansweredBlocksDropTheRangesANewerLegKept) {
  const uint64_t blocks = 20'005;  // 20 blocks per range, the last range of 5
  const uint64_t last = RangeCount(blocks) - 1;
  UnansweredBlocks kept;
  kept.ranges = {9, last, 3};  // in the order they are to be answered
  for (uint64_t r : kept.ranges) {
    for (uint64_t b = 0; b < BlocksInRange(blocks, r); ++b) kept.hashes.push_back(static_cast<uint32_t>(r * 1000 + b));
  }
  EXPECT_EQ(kept.DropRanges(std::vector<uint64_t>{4, 5}, blocks), 0u);
  EXPECT_EQ(kept.hashes.size(), 45u);
  EXPECT_EQ(kept.DropRanges(std::vector<uint64_t>{last, 2}, blocks), 5u);
  EXPECT_EQ(kept.ranges, (std::vector<uint64_t>{9, 3}));
  ASSERT_EQ(kept.hashes.size(), 40u);
  EXPECT_EQ(kept.hashes[19], 9019u);
  EXPECT_EQ(kept.hashes[20], 3000u);
  EXPECT_EQ(kept.DropRanges(std::vector<uint64_t>{3, 9}, blocks), 40u);
  EXPECT_TRUE(kept.ranges.empty());
  EXPECT_TRUE(kept.hashes.empty());
}

// A cut answer keeps the peer's block hashes as its contents show them: the
// same hashes the peer would have sent for the blocks it sent, and ours for
// the blocks it left out (equal when it chose).
TEST(AntiEntropyBlocks, TheirBlockHashesFromTheirContentsAreTheHashesTheyWouldSend) {
  const crdt::FilterShape shape{20'005, 7};  // 20 blocks per range
  auto theirs = crdt::BlockedFilter::Create(shape);
  auto ours = crdt::BlockedFilter::Create(shape);
  ASSERT_TRUE(theirs.ok() && ours.ok());
  Rng rng(5);
  for (int i = 0; i < 40000; ++i) (*theirs)->Add(rng.Next());  // ~2 keys a block
  for (int i = 0; i < 40000; ++i) (*ours)->Add(rng.Next());
  const uint64_t range = 17, salt = 0x1234;
  google::protobuf::RepeatedField<uint32_t> sent, ours_hashes;
  AppendBlockHashes(**theirs, range, salt, &sent);
  AppendBlockHashes(**ours, range, salt, &ours_hashes);
  const std::vector<crdt::WordBits> all = (*theirs)->ExportBlocks(range * 20, 20);
  // Every block: all of the hashes are theirs.
  std::vector<uint32_t> got;
  AppendTheirBlockHashes(**ours, range, salt, all, {}, &got);
  EXPECT_EQ(got, std::vector<uint32_t>(sent.begin(), sent.end()));
  // Blocks 0, 3 and 19 only: those are theirs, the others ours.
  std::string mask(3, '\0');
  mask[0] = 0b1001;
  mask[2] = 0b1000;
  std::vector<crdt::WordBits> some;
  for (const crdt::WordBits& w : all) {
    const uint64_t b = w.index / crdt::kWordsPerBlock - range * 20;
    if (b == 0 || b == 3 || b == 19) some.push_back(w);
  }
  got.clear();
  AppendTheirBlockHashes(**ours, range, salt, some, mask, &got);
  ASSERT_EQ(got.size(), 20u);
  for (size_t b = 0; b < 20; ++b) {
    EXPECT_EQ(got[b], (b == 0 || b == 3 || b == 19) ? sent[static_cast<int>(b)] : ours_hashes[static_cast<int>(b)]) << b;
  }
}

TEST(AntiEntropyBlocks, MalformedBlockHashesAndBitmapsAreRejected) {
  const crdt::FilterShape shape{20'005, 7};  // 20 blocks per range, the last range of 5
  absl::StatusOr<std::unique_ptr<crdt::BlockedFilter>> filter = crdt::BlockedFilter::Create(shape);
  ASSERT_TRUE(filter.ok());
  const uint64_t last = RangeCount(shape.blocks) - 1;
  ASSERT_EQ(BlocksInRange(shape.blocks, last), 5u);
  ASSERT_EQ(BlocksInRange(shape.blocks, 0), 20u);

  wire::GenerationSummary good;
  good.set_blocks_per_range(BlocksPerRange(shape.blocks));
  good.set_blocks(true);
  good.set_salt(5);
  good.add_items(3);
  good.add_items(last);
  AppendBlockHashes(**filter, 3, 5, good.mutable_block_hashes());
  AppendBlockHashes(**filter, last, 5, good.mutable_block_hashes());
  ASSERT_EQ(good.block_hashes_size(), 25);
  ASSERT_TRUE(ValidateSummary(good, shape).ok());

  wire::GenerationSummary bad = good;
  bad.add_block_hashes(1);  // one hash too many
  EXPECT_FALSE(ValidateSummary(bad, shape).ok());
  bad = good;
  bad.set_items(1, 2);  // not ascending (and 20 blocks, not 5)
  EXPECT_FALSE(ValidateSummary(bad, shape).ok());
  bad = good;
  bad.set_items(1, last + 1);  // out of bounds
  EXPECT_FALSE(ValidateSummary(bad, shape).ok());
  bad = good;
  bad.add_summaries(9);  // block hashes come without range summaries
  EXPECT_FALSE(ValidateSummary(bad, shape).ok());
  bad = good;
  bad.set_level(1);
  EXPECT_FALSE(ValidateSummary(bad, shape).ok());
  bad = good;
  bad.set_blocks(false);  // hashes without the flag
  EXPECT_FALSE(ValidateSummary(bad, shape).ok());
  bad = good;
  bad.clear_items();  // then every block of the generation
  EXPECT_FALSE(ValidateSummary(bad, shape).ok());

  // Bitmaps: the length of the range's blocks, nothing past them, not empty,
  // and every bit inside them.
  ASSERT_TRUE((*filter)->Merge(std::vector<crdt::WordBits>{{(last * 20 + 1) * crdt::kWordsPerBlock, 0xff}}, nullptr).ok());
  wire::RangeData data;
  EncodeRange(**filter, last, &data, {}, std::string(1, '\x02'));  // block 1 of 5
  ASSERT_TRUE(DecodeRange(data, shape).ok());
  wire::RangeData wrong = data;
  wrong.set_blocks(std::string(2, '\x02'));
  EXPECT_FALSE(DecodeRange(wrong, shape).ok());
  wrong.set_blocks(std::string(1, '\x22'));  // block 5 of a 5-block range
  EXPECT_FALSE(DecodeRange(wrong, shape).ok());
  wrong.set_blocks(std::string(1, '\0'));
  EXPECT_FALSE(DecodeRange(wrong, shape).ok());
  wrong.set_blocks(std::string(1, '\x01'));  // the bits lie in block 1, not 0
  EXPECT_FALSE(DecodeRange(wrong, shape).ok());
}

}  // namespace
}  // namespace pollen::node
