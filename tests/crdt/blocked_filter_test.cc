#include "crdt/blocked_filter.h"
#include "crdt/mix64.h"

#include <bit>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "crdt/block_probe.h"
#include "crdt/keyed_hash.h"
#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

std::unique_ptr<BlockedFilter> Make(uint64_t blocks, uint32_t k) {
  absl::StatusOr<std::unique_ptr<BlockedFilter>> f = BlockedFilter::Create({blocks, k});
  EXPECT_TRUE(f.ok()) << f.status();
  return *std::move(f);
}

std::vector<WordBits> AllWords(const BlockedFilter& f) { return f.ExportBlocks(0, f.shape().blocks); }

TEST(BlockedFilter, RejectsInvalidShapes) {
  EXPECT_FALSE(BlockedFilter::Create({0, 7}).ok());
  EXPECT_FALSE(BlockedFilter::Create({1, 0}).ok());
  EXPECT_FALSE(BlockedFilter::Create({1, kMaxK + 1}).ok());
  EXPECT_FALSE(BlockedFilter::Create({kMaxBlocks + 1, 7}).ok());
}

TEST(BlockedFilter, NoFalseNegativesOverRandomKeysSizesAndK) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const uint64_t blocks = trial == 0 ? 1 : 1 + rng() % 3000;
    const uint32_t k = 1 + rng() % kMaxK;
    auto filter = Make(blocks, k);
    const SipKey key = DeriveSipKey(testing::SecretFromSeed(trial), trial, 0);
    std::vector<std::string> keys;
    const size_t count = 1 + rng() % 5000;
    for (size_t i = 0; i < count; ++i) {
      keys.push_back(testing::RandomKey(rng, i % 3 == 0 ? 1 : 300));  // many empty and 1-byte keys
    }
    for (const std::string& x : keys) filter->Add(SipHash24(key, x));
    for (const std::string& x : keys) {
      ASSERT_TRUE(filter->MightContain(SipHash24(key, x))) << "false negative, blocks=" << blocks << " k=" << k;
    }
  }
}

TEST(BlockedFilter, AddReportsExactlyTheNewBits) {
  auto filter = Make(64, 7);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    const uint64_t h = rng();
    const uint64_t block = filter->BlockOf(h);
    std::array<uint64_t, kWordsPerBlock> before;
    for (uint32_t w = 0; w < kWordsPerBlock; ++w) before[w] = filter->LoadWord(block * 8 + w);
    const AddResult r = filter->Add(h);
    ASSERT_EQ(r.block, block);
    const auto masks = filter->MasksOf(h);
    for (uint32_t w = 0; w < kWordsPerBlock; ++w) {
      ASSERT_EQ(r.new_bits[w], masks[w] & ~before[w]);
      ASSERT_EQ(filter->LoadWord(block * 8 + w), before[w] | masks[w]);
    }
    EXPECT_TRUE(filter->Add(h).was_present());  // test-and-add: second time is "seen"
  }
}

TEST(BlockedFilter, MasksHaveAtMostKBitsInOneBlock) {
  auto filter = Make(1000, 9);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 10000; ++i) {
    const auto masks = filter->MasksOf(rng());
    int bits = 0;
    for (uint64_t m : masks) bits += std::popcount(m);
    ASSERT_GE(bits, 1);
    ASSERT_LE(bits, 9);
    ASSERT_LT(filter->BlockOf(rng()), 1000u);
  }
}

// The AVX-512 probe (where the CPU has it) and the scalar probe must give the
// same answer for every hash, and both must agree with MasksOf: a hash is
// contained exactly when all its mask bits are set. Filters at every k, filled
// to several densities, so both answers occur often.
TEST(BlockedFilter, VectorAndScalarProbesAgreeWithMasks) {
  std::mt19937_64 rng(21);
  for (uint32_t k = 1; k <= kMaxK; ++k) {
    for (int adds : {40, 200, 1000}) {
      auto filter = Make(16, k);
      for (int i = 0; i < adds; ++i) filter->Add(rng());
      int present = 0;
      for (int i = 0; i < 4000; ++i) {
        const uint64_t h = rng();
        const uint64_t block = filter->BlockOf(h);
        const auto masks = filter->MasksOf(h);
        bool all_set = true;
        for (uint32_t w = 0; w < kWordsPerBlock; ++w) {
          all_set = all_set && (filter->LoadWord(block * 8 + w) & masks[w]) == masks[w];
        }
        ASSERT_EQ(filter->MightContainPortable(h), all_set) << "k=" << k;
        ASSERT_EQ(filter->MightContain(h), all_set) << "k=" << k << " vector=" << probe::VectorProbeAvailable();
        present += all_set;
      }
      if (adds == 1000) {
        EXPECT_GT(present, 0) << "k=" << k;  // the dense filter answers yes sometimes
      }
      if (adds == 40) {
        EXPECT_LT(present, 4000) << "k=" << k;  // the sparse one answers no sometimes
      }
    }
  }
}

// Every probe of a key lands in its block and sets exactly the positions the
// sequence names: k distinct-or-repeated positions, so 1..k bits.
TEST(BlockedFilter, ProbeSequenceNamesKPositions) {
  std::mt19937_64 rng(23);
  for (uint32_t k = 1; k <= kMaxK; ++k) {
    for (int i = 0; i < 200; ++i) {
      const uint64_t h = rng();
      std::vector<uint64_t> positions;
      probe::ForEachPosition(h, k, [&](uint64_t pos) { positions.push_back(pos); });
      ASSERT_EQ(positions.size(), k);
      for (uint64_t pos : positions) ASSERT_LT(pos, 512u);
    }
  }
}

TEST(BlockedFilter, MergingAddDeltasEqualsMergingWholeFilters) {
  std::mt19937_64 rng(9);
  auto source = Make(256, 6);
  std::vector<WordBits> deltas;
  for (int i = 0; i < 3000; ++i) source->Add(rng()).AppendTo(deltas);
  auto via_deltas = Make(256, 6);
  auto via_whole = Make(256, 6);
  ASSERT_TRUE(via_deltas->Merge(deltas, nullptr).ok());
  ASSERT_TRUE(via_whole->MergeFrom(*source, nullptr).ok());
  EXPECT_TRUE(via_deltas->SameContents(*source));
  EXPECT_TRUE(via_whole->SameContents(*source));
  EXPECT_EQ(CountBits(deltas), source->CountSetBits());  // each bit reported new exactly once
}

// A filter's words as a snapshot stores them: little-endian, in order.
std::string LittleEndianWords(const BlockedFilter& f) {
  std::string bytes;
  for (uint64_t i = 0; i < f.word_count(); ++i) {
    const uint64_t w = f.LoadWord(i);
    for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<char>(w >> (8 * b)));
  }
  return bytes;
}

// Hands `bytes` (LittleEndianWords) to `load` in ranges of `step` words,
// which cross block edges unless step is a multiple of kWordsPerBlock; the
// sum of what each call returns.
uint64_t LoadInRanges(BlockedFilter& into, std::string_view bytes, uint64_t step,
                      uint64_t (BlockedFilter::*load)(uint64_t, std::string_view)) {
  const uint64_t words = bytes.size() / 8;
  uint64_t total = 0;
  for (uint64_t first = 0; first < words; first += step) {  // words / step calls
    const uint64_t n = std::min<uint64_t>(step, words - first);
    total += (into.*load)(first, bytes.substr(first * 8, n * 8));
  }
  return total;
}

// Recovery's path: little-endian words ORed in by ranges give what Merge of
// the same words gives, the count of the range after, and dirty marks on
// exactly the blocks that changed; an all-zero range changes nothing.
TEST(BlockedFilter, OrLittleEndianWordsEqualsMergeAndCountsTheRange) {
  std::mt19937_64 rng(21);
  auto source = Make(300, 7);
  for (int i = 0; i < 2000; ++i) source->Add(rng());
  auto base = Make(300, 7);
  for (int i = 0; i < 500; ++i) base->Add(rng());
  auto via_merge = Make(300, 7);
  ASSERT_TRUE(via_merge->MergeFrom(*base, nullptr).ok());
  ASSERT_TRUE(via_merge->MergeFrom(*source, nullptr).ok());

  const std::string bytes = LittleEndianWords(*source);
  std::vector<uint64_t> marks(base->dirty_word_count());
  base->TakeDirty(0, marks);  // clear the adds' marks
  const auto before = AllWords(*base);
  const uint64_t total = LoadInRanges(*base, bytes, 120, &BlockedFilter::OrLittleEndianWords);
  EXPECT_TRUE(base->SameContents(*via_merge));
  EXPECT_EQ(total, via_merge->CountSetBits());
  base->TakeDirty(0, marks);
  std::set<uint64_t> changed_blocks;
  {
    std::map<uint64_t, uint64_t> old;
    for (const WordBits& w : before) old[w.index] = w.bits;
    for (const WordBits& w : AllWords(*base)) {
      if (old[w.index] != w.bits) changed_blocks.insert(w.index / kWordsPerBlock);
    }
  }
  for (uint64_t block = 0; block < 300; ++block) {
    EXPECT_EQ((marks[block / 64] >> (block % 64)) & 1, changed_blocks.count(block)) << block;
  }
  const std::string zeros(8 * 64, '\0');
  EXPECT_EQ(base->OrLittleEndianWords(64, zeros), [&] {
    uint64_t bits = 0;
    for (uint64_t i = 64; i < 128; ++i) bits += std::popcount(base->LoadWord(i));
    return bits;
  }());
  EXPECT_TRUE(base->SameContents(*via_merge));
}

// Recovery's fast path into an empty filter: the same words as the source,
// the range's count, and no dirty marks (the file being loaded holds them).
// Populate first, as the prefault thread does: it changes no word.
TEST(BlockedFilter, StoreIntoEmptyCopiesTheWordsAndMarksNothing) {
  std::mt19937_64 rng(22);
  auto source = Make(300, 7);
  for (int i = 0; i < 3000; ++i) source->Add(rng());
  const std::string bytes = LittleEndianWords(*source);
  auto empty = Make(300, 7);
  empty->Populate(0, empty->word_count());
  EXPECT_EQ(empty->CountSetBits(), 0u);
  const uint64_t total = LoadInRanges(*empty, bytes, 100, &BlockedFilter::StoreLittleEndianWordsIntoEmpty);
  EXPECT_TRUE(empty->SameContents(*source));
  EXPECT_EQ(total, source->CountSetBits());
  std::vector<uint64_t> marks(empty->dirty_word_count());
  empty->TakeDirty(0, marks);
  for (uint64_t m : marks) EXPECT_EQ(m, 0u);
  std::mt19937_64 replay(22);
  for (int i = 0; i < 3000; ++i) EXPECT_TRUE(empty->MightContain(replay())) << i;
}

TEST(BlockedFilter, MergeIsCommutativeAssociativeAndIdempotent) {
  std::mt19937_64 rng(21);
  auto random_filter = [&] {
    auto f = Make(128, 5);
    for (int i = 0; i < 500; ++i) f->Add(rng());
    return f;
  };
  auto a = random_filter(), b = random_filter(), c = random_filter();
  auto merged = [&](std::initializer_list<const BlockedFilter*> order) {
    auto out = Make(128, 5);
    for (const BlockedFilter* f : order) EXPECT_TRUE(out->MergeFrom(*f, nullptr).ok());
    return out;
  };
  auto abc = merged({a.get(), b.get(), c.get()});
  EXPECT_TRUE(abc->SameContents(*merged({c.get(), a.get(), b.get()})));
  EXPECT_TRUE(abc->SameContents(*merged({b.get(), c.get(), a.get()})));
  // (a ∪ b) ∪ c == a ∪ (b ∪ c)
  auto ab = merged({a.get(), b.get()});
  auto bc = merged({b.get(), c.get()});
  EXPECT_TRUE(merged({ab.get(), c.get()})->SameContents(*merged({a.get(), bc.get()})));
  // Idempotent: merging again changes nothing and reports nothing.
  std::vector<WordBits> changed;
  ASSERT_TRUE(abc->MergeFrom(*a, &changed).ok());
  ASSERT_TRUE(abc->Merge(AllWords(*b), &changed).ok());
  EXPECT_TRUE(changed.empty());
  EXPECT_TRUE(abc->SameContents(*merged({a.get(), b.get(), c.get()})));
}

TEST(BlockedFilter, MergeReportsChangedBitsAndDeltaOrderDoesNotMatter) {
  std::mt19937_64 rng(4);
  auto source = Make(32, 4);
  std::vector<WordBits> deltas;
  for (int i = 0; i < 400; ++i) source->Add(rng()).AppendTo(deltas);
  std::vector<WordBits> shuffled = deltas;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  shuffled.insert(shuffled.end(), deltas.begin(), deltas.begin() + 50);  // duplicates
  auto target = Make(32, 4);
  std::vector<WordBits> changed;
  ASSERT_TRUE(target->Merge(shuffled, &changed).ok());
  EXPECT_TRUE(target->SameContents(*source));
  EXPECT_EQ(CountBits(changed), source->CountSetBits());
}

TEST(BlockedFilter, MergeWithBadIndexChangesNothing) {
  auto f = Make(4, 3);
  const std::vector<WordBits> words = {{0, 1}, {4 * 8, 1}};  // second is out of range
  EXPECT_EQ(f->Merge(words, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->CountSetBits(), 0u);
  auto other = Make(5, 3);
  EXPECT_FALSE(f->MergeFrom(*other, nullptr).ok());
}

TEST(BlockedFilter, RangeSummariesFindExactlyTheDifferingRanges) {
  std::mt19937_64 rng(8);
  auto a = Make(1000, 7);
  for (int i = 0; i < 5000; ++i) a->Add(rng());
  auto b = Make(1000, 7);
  ASSERT_TRUE(b->MergeFrom(*a, nullptr).ok());
  constexpr uint64_t kPerRange = 64;
  EXPECT_EQ(a->RangeSummaries(kPerRange), b->RangeSummaries(kPerRange));
  EXPECT_EQ(a->RangeCount(kPerRange), 16u);  // 15 full ranges and a short one
  // Flip single bits in chosen ranges of b: exactly those ranges differ.
  const std::set<uint64_t> touched = {0, 7, 15};
  for (uint64_t range : touched) {
    const uint64_t block = std::min<uint64_t>(range * kPerRange + 3, 999);
    for (uint64_t bit = 0; bit < 512; ++bit) {
      const uint64_t word = block * 8 + bit / 64;
      if ((b->LoadWord(word) >> (bit % 64) & 1) == 0) {
        ASSERT_TRUE(b->Merge(std::vector<WordBits>{{word, uint64_t{1} << (bit % 64)}}, nullptr).ok());
        break;
      }
    }
  }
  const auto sa = a->RangeSummaries(kPerRange), sb = b->RangeSummaries(kPerRange);
  for (uint64_t r = 0; r < sa.size(); ++r) EXPECT_EQ(sa[r] != sb[r], touched.count(r) == 1) << r;
  // Repairing the differing ranges from b makes a equal to b.
  for (uint64_t r : touched) ASSERT_TRUE(a->Merge(b->ExportBlocks(r * kPerRange, kPerRange), nullptr).ok());
  EXPECT_TRUE(a->SameContents(*b));
}

TEST(BlockedFilter, EmptyRangesOfDifferentLengthsDiffer) {
  auto f = Make(100, 7);
  EXPECT_NE(f->RangeSummary(0, 64), f->RangeSummary(1, 64));  // 64 vs 36 blocks
}

TEST(BlockedFilter, FillRatioCountsSetBits) {
  auto f = Make(2, 3);
  EXPECT_EQ(f->FillRatio(), 0.0);
  ASSERT_TRUE(f->Merge(std::vector<WordBits>{{0, 0xff}, {15, 0xff00}}, nullptr).ok());
  EXPECT_EQ(f->CountSetBits(), 16u);
  EXPECT_DOUBLE_EQ(f->FillRatio(), 16.0 / 1024);
}

TEST(BlockedFilter, BatchFormsAgreeWithSingleForms) {
  std::mt19937_64 rng(2);
  auto single = Make(5000, 7), batch = Make(5000, 7);
  std::vector<uint64_t> hashes(3001);
  for (auto& h : hashes) h = rng();
  std::vector<AddResult> results(hashes.size());
  batch->AddMany(hashes, results);
  for (size_t i = 0; i < hashes.size(); ++i) {
    const AddResult r = single->Add(hashes[i]);
    ASSERT_EQ(r.new_bits, results[i].new_bits);
  }
  EXPECT_TRUE(single->SameContents(*batch));
  std::vector<uint64_t> probes = hashes;
  for (int i = 0; i < 3000; ++i) probes.push_back(rng());
  std::unique_ptr<bool[]> found(new bool[probes.size()]);
  batch->MightContainMany(probes, {found.get(), probes.size()});
  for (size_t i = 0; i < probes.size(); ++i) ASSERT_EQ(found[i], batch->MightContain(probes[i]));
}

// The batch test (one AVX-512 call per batch where the CPU has it; on a CPU
// without AVX-512F and DQ this compares the scalar probe with itself) must give
// the scalar probe's answer at every k (k > 7 takes the early reject on the
// first seed's 7 probes, then the full test), at fills where both answers
// occur, for prefetch distances shorter than, equal to and past the batch.
TEST(BlockedFilter, BatchTestAgreesWithScalarProbeAtEveryKAndDistance) {
  std::mt19937_64 rng(9);
  for (uint32_t k = 1; k <= kMaxK; ++k) {
    for (int adds : {200, 1500}) {
      // 1,000,003 blocks (64 MB, mapped lazily): a count that is neither a
      // power of two nor small, so the vector block index (a 64x32 high
      // multiply) differs from the scalar one if its low-half carry is wrong.
      auto filter = Make(adds == 200 ? 64 : 1'000'003, k);
      std::vector<uint64_t> hashes;
      for (int i = 0; i < adds; ++i) {
        hashes.push_back(rng());
        filter->Add(hashes.back());
      }
      for (int i = 0; i < 600; ++i) hashes.push_back(rng());
      for (size_t distance : {size_t{0}, size_t{1}, size_t{8}, size_t{128}, hashes.size() + 5}) {
        std::unique_ptr<bool[]> found(new bool[hashes.size()]);
        filter->MightContainMany(hashes, {found.get(), hashes.size()}, distance);
        size_t present = 0;
        for (size_t i = 0; i < hashes.size(); ++i) {
          ASSERT_EQ(found[i], filter->MightContainPortable(hashes[i])) << "k=" << k << " i=" << i;
          if (i < static_cast<size_t>(adds)) {
            ASSERT_TRUE(found[i]) << "false negative, k=" << k;
          }
          present += found[i];
        }
        EXPECT_LT(present, hashes.size()) << "k=" << k << ": some strangers must be absent";
      }
    }
  }
}

// Where the vector probes run, the vector remix must equal Mix64 lane for
// lane, at every tail length, and write nothing past its output. (Elsewhere it
// must never be called: filters then report no vector probe.)
TEST(BlockedFilter, VectorRemixIsMix64) {
  if (!probe::VectorProbeAvailable()) {
    EXPECT_FALSE(Make(64, 7)->vector_probe());
    return;
  }
  EXPECT_TRUE(Make(64, 7)->vector_probe());
  std::mt19937_64 rng(5);
  for (size_t n : {0, 1, 7, 8, 9, 100}) {
    std::vector<uint64_t> in(n), out(n + 1, 42);
    for (uint64_t& h : in) h = rng();
    const uint64_t salt = rng();
    probe::RemixVector(in, salt, std::span<uint64_t>(out.data(), n));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], Mix64(in[i] ^ salt)) << "n=" << n << " i=" << i;
    ASSERT_EQ(out[n], 42u) << "wrote past the end, n=" << n;
  }
}

}  // namespace
}  // namespace pollen::crdt

namespace pollen::crdt {
namespace {

// Anti-entropy tells an empty range by its summary, without a scan.
TEST(BlockedFilterRanges, EmptyRangeSummaryIsAnEmptyRangesSummary) {
  auto f = *BlockedFilter::Create(FilterShape{1000, 7});
  for (uint64_t bpr : {uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{1000}}) {
    for (uint64_t r = 0; r < f->RangeCount(bpr); ++r) EXPECT_EQ(f->RangeSummary(r, bpr), f->EmptyRangeSummary(r, bpr));
  }
  const AddResult a = f->Add(0x123456789abcdefULL);
  EXPECT_NE(f->RangeSummary(a.block / 64, 64), f->EmptyRangeSummary(a.block / 64, 64));
  EXPECT_NE(f->RangeSummary(a.block, 1), f->EmptyRangeSummary(a.block, 1));
}

}  // namespace
}  // namespace pollen::crdt
