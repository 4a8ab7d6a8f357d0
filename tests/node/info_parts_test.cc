// Info(filter, parts) / Filters(parts): each part is computed on request,
// agrees with the full Info(), and is rescanned after the filter changes even
// when the other part was the one asked for last.
#include <gtest/gtest.h>

#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

std::unique_ptr<Node> StandaloneNode() {
  ClusterOptions o;
  o.nodes = 1;
  o.filters = {SharedFilter("crawl"), SharedFilter("other", 2000)};
  Cluster c(o);
  auto node = Node::Create(c.ConfigFor(0));
  EXPECT_TRUE(node.ok()) << node.status();
  return *std::move(node);
}

void ExpectSameEpochs(const FilterInfo& a, const FilterInfo& b) {
  EXPECT_EQ(a.config.name, b.config.name);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.blocks, b.blocks);
  EXPECT_EQ(a.memory_bytes, b.memory_bytes);
  ASSERT_EQ(a.generations.size(), b.generations.size());
  for (size_t g = 0; g < a.generations.size(); ++g) EXPECT_EQ(a.generations[g].epoch, b.generations[g].epoch);
}

TEST(InfoParts, EachPartMatchesTheFullInfoAndTheOthersAreZero) {
  std::unique_ptr<Node> node = StandaloneNode();
  node->Start(Time{0});
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(node->Add("crawl", "k" + std::to_string(i)).ok());
  auto all = node->Info("crawl");
  auto counts = node->Info("crawl", InfoParts::kCounts);
  auto estimates = node->Info("crawl", InfoParts::kEstimates);
  auto digests = node->Info("crawl", InfoParts::kDigests);
  auto epochs = node->Info("crawl", InfoParts::kEpochsOnly);
  ASSERT_TRUE(all.ok() && counts.ok() && estimates.ok() && digests.ok() && epochs.ok());
  ExpectSameEpochs(*all, *estimates);
  ExpectSameEpochs(*all, *counts);
  ExpectSameEpochs(*all, *digests);
  ExpectSameEpochs(*all, *epochs);
  const GenerationInfo& newest = all->generations.back();
  EXPECT_GT(newest.set_bits, 0u);
  EXPECT_NE(newest.digest, 0u);
  EXPECT_EQ(counts->generations.back().set_bits, newest.set_bits);
  EXPECT_DOUBLE_EQ(counts->generations.back().fill_ratio, newest.fill_ratio);
  EXPECT_EQ(counts->generations.back().estimated_items, 0.0);  // estimates not asked for
  EXPECT_EQ(counts->generations.back().digest, 0u);
  // kEstimates implies the counts it is computed from.
  EXPECT_GT(newest.estimated_items, 0.0);
  EXPECT_EQ(estimates->generations.back().set_bits, newest.set_bits);
  EXPECT_DOUBLE_EQ(estimates->generations.back().estimated_items, newest.estimated_items);
  EXPECT_DOUBLE_EQ(estimates->generations.back().estimated_fpr, newest.estimated_fpr);
  EXPECT_EQ(estimates->generations.back().digest, 0u);
  EXPECT_EQ(digests->generations.back().digest, newest.digest);
  EXPECT_EQ(digests->generations.back().set_bits, 0u);
  EXPECT_EQ(digests->generations.back().fill_ratio, 0.0);
  EXPECT_EQ(epochs->generations.back().set_bits, 0u);
  EXPECT_EQ(epochs->generations.back().digest, 0u);
  // Filters(parts) is the same per filter, sorted by name.
  std::vector<FilterInfo> listed = node->Filters(InfoParts::kCounts);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].config.name, "crawl");
  EXPECT_EQ(listed[0].generations.back().set_bits, newest.set_bits);
  EXPECT_EQ(listed[0].generations.back().digest, 0u);
  EXPECT_EQ(listed[1].config.name, "other");
}

// The memo keeps a count and a digest with the change count each was taken
// at: asking for one part after a change must not return the other part's
// stale value, nor a value scanned before the change.
TEST(InfoParts, EachPartIsRescannedAfterAChange) {
  std::unique_ptr<Node> node = StandaloneNode();
  node->Start(Time{0});
  ASSERT_TRUE(node->Add("crawl", "first").ok());
  const uint64_t bits0 = node->Info("crawl", InfoParts::kCounts)->generations.back().set_bits;
  const uint64_t digest0 = node->Info("crawl", InfoParts::kDigests)->generations.back().digest;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(node->Add("crawl", "more" + std::to_string(i)).ok());
  // Digest first this time, then counts, then both: each reflects the adds.
  const uint64_t digest1 = node->Info("crawl", InfoParts::kDigests)->generations.back().digest;
  const uint64_t bits1 = node->Info("crawl", InfoParts::kCounts)->generations.back().set_bits;
  EXPECT_NE(digest1, digest0);
  EXPECT_GT(bits1, bits0);
  auto all = node->Info("crawl");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->generations.back().set_bits, bits1);
  EXPECT_EQ(all->generations.back().digest, digest1);
  // Unchanged filter: the same figures again (memoized or rescanned alike).
  EXPECT_EQ(node->Info("crawl", InfoParts::kCounts)->generations.back().set_bits, bits1);
  // A change after a counts-only read: the digest must still move.
  ASSERT_TRUE(node->Add("crawl", "last").ok());
  (void)node->Info("crawl", InfoParts::kCounts);
  auto after = node->Info("crawl");
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->generations.back().set_bits, bits1);
  if (after->generations.back().set_bits > bits1) {
    EXPECT_NE(after->generations.back().digest, digest1);
  }
  // The other filter was never touched: zero bits in every part.
  EXPECT_EQ(node->Info("other", InfoParts::kCounts)->generations.back().set_bits, 0u);
}

}  // namespace
}  // namespace pollen::node::testing
