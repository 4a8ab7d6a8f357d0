// SummaryCache: cached summaries equal a fresh scan whenever every changed
// word was marked, and a missed mark is repaired by InvalidateAll.
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

TEST(SummaryCache, MatchesAFreshScanAfterMarkedChanges) {
  auto f = NewFilter(3000);  // 3 blocks per range
  SummaryCache cache;
  Rng rng(4);
  EXPECT_EQ(cache.Get(1, 0, *f), Fresh(*f));
  for (int round = 0; round < 50; ++round) {
    std::vector<crdt::WordBits> words;
    for (int i = 0; i < 5; ++i) words.push_back({rng.Below(f->word_count()), rng.Next() | 1});
    crdt::Canonicalize(words);
    std::vector<crdt::WordBits> changed;
    ASSERT_TRUE(f->Merge(words, &changed).ok());
    if (round % 2 == 0) {
      cache.MarkWords(1, 0, changed);
    } else {
      for (const crdt::WordBits& w : changed) cache.MarkWord(1, 0, w.index);
    }
    ASSERT_EQ(cache.Get(1, 0, *f), Fresh(*f)) << round;
  }
}

TEST(SummaryCache, GenerationsAreSeparateAndInvalidateAllRecovers) {
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
  cache.InvalidateAll();
  EXPECT_EQ(cache.Get(1, 0, *a), Fresh(*a));
  EXPECT_EQ(cache.Get(1, 1, *b), empty);
}

TEST(SummaryCache, BoundedEntries) {
  auto f = NewFilter(10);
  SummaryCache cache;
  for (uint64_t uid = 0; uid < 3 * SummaryCache::kMaxEntries; ++uid) EXPECT_EQ(cache.Get(uid, 0, *f), Fresh(*f));
}

}  // namespace
}  // namespace pollen::node
