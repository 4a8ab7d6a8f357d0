// SummaryCache: cached summaries equal a fresh scan whenever every changed
// word was marked, a missed mark is repaired by MarkAll/MarkEverything, and a
// Get scans at most its refresh bound, reaching every dirty range in turn.
#include "node/core/summary_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "node/core/anti_entropy.h"
#include "node/core/rng.h"

namespace pollen::node {
namespace {

std::unique_ptr<crdt::BlockedFilter> NewFilter(uint64_t blocks) {
  auto f = crdt::BlockedFilter::Create(crdt::FilterShape{blocks, 7});
  EXPECT_TRUE(f.ok());
  return std::move(*f);
}

std::vector<uint64_t> Fresh(const crdt::BlockedFilter& f) { return f.RangeSummaries(BlocksPerRange(f.shape().blocks)); }

// Merges n random words into f; returns the words that changed.
std::vector<crdt::WordBits> MergeRandomWords(crdt::BlockedFilter& f, Rng& rng, int n) {
  std::vector<crdt::WordBits> words;
  for (int i = 0; i < n; ++i) words.push_back({rng.Below(f.word_count()), rng.Next() | 1});
  crdt::Canonicalize(words);
  std::vector<crdt::WordBits> changed;
  EXPECT_TRUE(f.Merge(words, &changed).ok());
  return changed;
}

TEST(SummaryCache, MatchesAFreshScanAfterMarkedChanges) {
  auto f = NewFilter(3000);  // 3 blocks per range
  SummaryCache cache;
  Rng rng(4);
  EXPECT_EQ(cache.Get(1, 0, *f), Fresh(*f));
  for (int round = 0; round < 50; ++round) {
    const std::vector<crdt::WordBits> changed = MergeRandomWords(*f, rng, 5);
    if (round % 2 == 0) {
      cache.MarkWords(1, 0, changed);
    } else {
      for (const crdt::WordBits& w : changed) cache.MarkWord(1, 0, w.index);
    }
    ASSERT_EQ(cache.Get(1, 0, *f), Fresh(*f)) << round;
  }
}

TEST(SummaryCache, GenerationsAreSeparateAndMarkAllRecovers) {
  auto a = NewFilter(100);
  auto b = NewFilter(100);
  SummaryCache cache;
  const std::vector<uint64_t> empty = Fresh(*a);
  EXPECT_EQ(cache.Get(1, 0, *a), empty);
  EXPECT_EQ(cache.Get(1, 1, *b), empty);
  std::vector<crdt::WordBits> changed;
  ASSERT_TRUE(a->Merge(std::vector<crdt::WordBits>{{17, 0xf0}}, &changed).ok());
  cache.MarkWords(1, 1, changed);  // marked on the wrong generation: (1, 0) is stale
  EXPECT_EQ(cache.Get(1, 0, *a), empty);
  EXPECT_NE(Fresh(*a), empty);
  cache.MarkEverything();
  EXPECT_EQ(cache.Get(1, 0, *a), Fresh(*a));
  EXPECT_EQ(cache.Get(1, 1, *b), empty);
  ASSERT_TRUE(a->Merge(std::vector<crdt::WordBits>{{300, 0x3}}, &changed).ok());  // unmarked again
  cache.MarkAll(1, 1);  // the other generation: (1, 0) stays stale
  EXPECT_NE(cache.Get(1, 0, *a), Fresh(*a));
  cache.MarkAll(1, 0);
  EXPECT_EQ(cache.Get(1, 0, *a), Fresh(*a));
}

// A filter of 1,024 ranges of 2 blocks (16 words each), refreshed 5 ranges
// (80 words) per Get.
TEST(SummaryCache, AGetScansAtMostItsBoundAndReachesEveryRange) {
  auto big = NewFilter(2 * kTargetRanges);
  ASSERT_EQ(BlocksPerRange(big->shape().blocks), 2u);
  constexpr uint64_t kRangeWords = 2 * crdt::kWordsPerBlock;
  SummaryCache cache(/*salt=*/9, /*refresh_words=*/5 * kRangeWords);
  std::vector<crdt::WordBits> changed;
  ASSERT_TRUE(big->Merge(std::vector<crdt::WordBits>{{5, 1}, {kRangeWords * 700, 2}}, &changed).ok());
  const std::vector<uint64_t> fresh = Fresh(*big);
  // First Get: 5 ranges scanned, the others are placeholders that match
  // neither a real summary nor the empty one.
  std::vector<uint64_t> got = cache.Get(1, 0, *big);
  ASSERT_EQ(got.size(), kTargetRanges);
  size_t matching = 0;
  for (uint64_t r = 0; r < got.size(); ++r) {
    matching += got[r] == fresh[r];
    if (r >= 5) {
      EXPECT_NE(got[r], big->EmptyRangeSummary(r, 2)) << r;
    }
  }
  EXPECT_EQ(matching, 5u);
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 5);
  // Another node's placeholders differ from ours.
  SummaryCache other(/*salt=*/10, /*refresh_words=*/5 * kRangeWords);
  EXPECT_NE(other.Get(1, 0, *big)[100], got[100]);
  // Every range is reached within ceil(1024 / 5) calls in all.
  int calls = 1;
  while (cache.DirtyRanges(1, 0) > 0) {
    got = cache.Get(1, 0, *big);
    ASSERT_LE(++calls, 205);
  }
  EXPECT_EQ(calls, 205);
  EXPECT_EQ(got, fresh);
  // Marks made while a refresh is under way: the oldest dirty range first.
  ASSERT_TRUE(big->Merge(std::vector<crdt::WordBits>{{kRangeWords * 900, 4}, {kRangeWords * 3, 8}}, &changed).ok());
  cache.MarkWords(1, 0, changed);
  cache.MarkAll(1, 0);  // every other range after those two
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges);
  got = cache.Get(1, 0, *big);
  EXPECT_EQ(got[3], big->RangeSummary(3, 2));
  EXPECT_EQ(got[900], big->RangeSummary(900, 2));
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 5);
  // A range marked again after it was recomputed goes to the back, once.
  cache.MarkWord(1, 0, kRangeWords * 3);
  cache.MarkWord(1, 0, kRangeWords * 3);
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 4);
  for (calls = 0; cache.DirtyRanges(1, 0) > 0; ++calls) ASSERT_EQ(cache.Get(1, 0, *big).size(), kTargetRanges);
  EXPECT_EQ(calls, 204);
  EXPECT_EQ(cache.Get(1, 0, *big), Fresh(*big));
}

// RefreshRange: a dirty range recomputed at once, outside the Get bound; its
// queue entry is skipped when reached (it costs a Get nothing), and a range
// cleaned this way and marked again is queued again, the queue staying
// bounded through many such rounds.
TEST(SummaryCache, RefreshRangeCleansOneRangeNowAndGetSkipsIt) {
  auto big = NewFilter(2 * kTargetRanges);
  constexpr uint64_t kRangeWords = 2 * crdt::kWordsPerBlock;
  SummaryCache cache(/*salt=*/3, /*refresh_words=*/5 * kRangeWords);
  ASSERT_EQ(cache.Get(1, 0, *big).size(), kTargetRanges);  // 5 recomputed
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 5);
  std::vector<crdt::WordBits> changed;
  ASSERT_TRUE(big->Merge(std::vector<crdt::WordBits>{{kRangeWords * 600 + 3, 0x30}}, &changed).ok());
  cache.MarkWords(1, 0, changed);  // dirty already (never computed): no change in the count
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 5);
  cache.RefreshRange(1, 0, *big, 600);
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 6);
  EXPECT_EQ(cache.Get(1, 0, *big)[600], big->RangeSummary(600, 2));
  cache.RefreshRange(1, 0, *big, 600);  // clean: nothing to do
  cache.RefreshRange(2, 0, *big, 600);  // not cached: nothing
  // The rest comes in ceil((1024 - 11) / 5) Gets: range 600's old entry is skipped.
  int calls = 0;
  while (cache.DirtyRanges(1, 0) > 0) {
    cache.Get(1, 0, *big);
    ASSERT_LE(++calls, 203);
  }
  EXPECT_EQ(calls, 203);
  EXPECT_EQ(cache.Get(1, 0, *big), Fresh(*big));
  // Mark, refresh at once, mark again, many times over: still exact, and
  // every range reachable.
  Rng rng(12);
  for (int round = 0; round < 5000; ++round) {
    const uint64_t word = rng.Below(big->word_count());
    ASSERT_TRUE(big->Merge(std::vector<crdt::WordBits>{{word, rng.Next() | 1}}, &changed).ok());
    cache.MarkWords(1, 0, changed);
    if (round % 3 != 0) cache.RefreshRange(1, 0, *big, word / kRangeWords);
    if (round % 50 == 0) cache.Get(1, 0, *big);
  }
  for (calls = 0; cache.DirtyRanges(1, 0) > 0; ++calls) {
    cache.Get(1, 0, *big);
    ASSERT_LE(calls, 205);
  }
  EXPECT_EQ(cache.Get(1, 0, *big), Fresh(*big));
}

TEST(SummaryCache, FiltersWithinTheBoundAreComputedWholeOnEveryGet) {
  auto f = NewFilter(4 * kTargetRanges);  // 4 blocks a range, 32 words
  SummaryCache cache(/*salt=*/1, /*refresh_words=*/f->word_count());
  Rng rng(8);
  EXPECT_EQ(cache.Get(3, 0, *f), Fresh(*f));
  for (int round = 0; round < 20; ++round) {
    cache.MarkWords(3, 0, MergeRandomWords(*f, rng, 2000));
    ASSERT_EQ(cache.Get(3, 0, *f), Fresh(*f)) << round;
  }
}

// Refresh between runs: only generations bigger than a Get's bound, oldest
// dirty range first, never past the budget it is given (but one range when
// the budget is smaller than a range), and the budget is lowered by the scan.
TEST(SummaryCache, RefreshSkipsSmallGenerationsAndSpendsItsBudget) {
  constexpr uint64_t kRangeWords = 2 * crdt::kWordsPerBlock;
  auto big = NewFilter(2 * kTargetRanges);
  auto small = NewFilter(kTargetRanges);  // 1 block a range: within the bound
  SummaryCache cache(/*salt=*/5, /*refresh_words=*/small->word_count());
  std::vector<crdt::WordBits> changed;
  ASSERT_TRUE(small->Merge(std::vector<crdt::WordBits>{{3, 1}}, &changed).ok());
  uint64_t budget = 100 * kRangeWords;
  cache.Refresh(2, 0, *small, &budget);
  EXPECT_EQ(budget, 100 * kRangeWords);  // untouched: left to Get
  EXPECT_EQ(cache.DirtyRanges(2, 0), 0u);  // not even cached

  cache.Refresh(1, 0, *big, &budget);  // first sight: every range dirty, 100 recomputed
  EXPECT_EQ(budget, 0u);
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 100);
  cache.Refresh(1, 0, *big, &budget);  // no budget: nothing
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 100);

  budget = kRangeWords / 2;  // smaller than a range: one range all the same
  cache.Refresh(1, 0, *big, &budget);
  EXPECT_EQ(budget, 0u);
  EXPECT_EQ(cache.DirtyRanges(1, 0), kTargetRanges - 101);

  budget = 2 * kTargetRanges * kRangeWords;  // more than enough: spends what it scans
  cache.Refresh(1, 0, *big, &budget);
  EXPECT_EQ(budget, (2 * kTargetRanges - (kTargetRanges - 101)) * kRangeWords);
  EXPECT_EQ(cache.DirtyRanges(1, 0), 0u);
  // With nothing dirty, a refresh costs nothing and Get scans nothing.
  cache.Refresh(1, 0, *big, &budget);
  EXPECT_EQ(budget, (kTargetRanges + 101) * kRangeWords);
  ASSERT_TRUE(big->Merge(std::vector<crdt::WordBits>{{kRangeWords * 600 + 1, 0x40}}, &changed).ok());
  cache.MarkWords(1, 0, changed);
  budget = 1;
  cache.Refresh(1, 0, *big, &budget);
  EXPECT_EQ(cache.Get(1, 0, *big), Fresh(*big));
}

// The looks_empty hint: ranges not computed yet read as empty (what a new
// or wiped node's flat exchange needs) and are clean: nothing is scanned to
// learn what the hint says, and a range stays known empty until marked.
TEST(SummaryCache, ALooksEmptyHintStartsAtCleanEmptySummaries) {
  constexpr uint64_t kRangeWords = 2 * crdt::kWordsPerBlock;
  auto big = NewFilter(2 * kTargetRanges);
  SummaryCache cache(/*salt=*/3, /*refresh_words=*/10 * kRangeWords);
  const std::vector<uint64_t>& got = cache.Get(1, 0, *big, /*looks_empty=*/true);
  for (uint64_t r = 0; r < got.size(); ++r) ASSERT_EQ(got[r], big->EmptyRangeSummary(r, 2)) << r;
  EXPECT_EQ(cache.DirtyRanges(1, 0), 0u);  // nothing to scan
  EXPECT_TRUE(cache.KnownEmpty(1, 0, *big, 500));
  EXPECT_FALSE(cache.KnownEmpty(2, 0, *big, 500));  // not cached: not known
  // Bits merged and marked: that range is dirty, no longer known empty, and
  // exact at the next Get.
  std::vector<crdt::WordBits> changed;
  ASSERT_TRUE(big->Merge(std::vector<crdt::WordBits>{{kRangeWords * 500 + 3, 0x11}}, &changed).ok());
  cache.MarkWords(1, 0, changed);
  EXPECT_FALSE(cache.KnownEmpty(1, 0, *big, 500));
  EXPECT_TRUE(cache.KnownEmpty(1, 0, *big, 501));
  EXPECT_EQ(cache.DirtyRanges(1, 0), 1u);
  EXPECT_EQ(cache.Get(1, 0, *big, /*looks_empty=*/true), Fresh(*big));
  EXPECT_FALSE(cache.KnownEmpty(1, 0, *big, 500));  // clean, and not empty
  // A wrong hint (bits the caller had not counted, in range 600) hides them
  // until the range is marked.
  ASSERT_TRUE(big->Merge(std::vector<crdt::WordBits>{{kRangeWords * 600, 0x2}}, &changed).ok());
  SummaryCache wrong(/*salt=*/3, /*refresh_words=*/10 * kRangeWords);
  EXPECT_EQ(wrong.Get(1, 0, *big, /*looks_empty=*/true)[600], big->EmptyRangeSummary(600, 2));
  wrong.MarkWord(1, 0, kRangeWords * 600);
  for (int calls = 0; wrong.DirtyRanges(1, 0) > 0; ++calls) {
    wrong.Get(1, 0, *big);
    ASSERT_LE(calls, 205);
  }
  EXPECT_EQ(wrong.Get(1, 0, *big)[600], big->RangeSummary(600, 2));
}

TEST(SummaryCache, BoundedEntries) {
  auto f = NewFilter(10);
  SummaryCache cache;
  for (uint64_t uid = 0; uid < 3 * SummaryCache::kMaxEntries; ++uid) EXPECT_EQ(cache.Get(uid, 0, *f), Fresh(*f));
}

}  // namespace
}  // namespace pollen::node
