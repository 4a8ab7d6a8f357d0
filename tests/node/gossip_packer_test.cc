// GossipPacker: every part lands in exactly one body, in order, and bodies
// respect the byte budget unless a single part alone exceeds it.
#include "node/core/gossip_packer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pollen::node {
namespace {

wire::Delta DeltaOf(uint64_t epoch, size_t bytes) {
  wire::Delta d;
  d.mutable_filter()->set_name("crawl");
  d.set_epoch(epoch);
  d.set_positions(std::string(bytes, 'x'));
  return d;
}

TEST(GossipPacker, EmptyGivesNoBodies) {
  GossipPacker p(1000);
  EXPECT_TRUE(p.empty());
  EXPECT_TRUE(p.Take().empty());
}

TEST(GossipPacker, SmallPartsShareOneBody) {
  GossipPacker p(1000);
  wire::FilterEpoch e;
  e.set_epoch(7);
  p.AddEpoch(std::move(e));
  wire::CatalogEntry c;
  c.set_stamp(3);
  p.AddCatalog(std::move(c));
  for (uint64_t i = 0; i < 3; ++i) p.AddDelta(DeltaOf(i, 50));
  EXPECT_FALSE(p.empty());
  std::vector<wire::Gossip> bodies = p.Take();
  ASSERT_EQ(bodies.size(), 1u);
  ASSERT_EQ(bodies[0].deltas_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bodies[0].deltas(i).epoch(), static_cast<uint64_t>(i));
  ASSERT_EQ(bodies[0].epochs_size(), 1);
  EXPECT_EQ(bodies[0].epochs(0).epoch(), 7u);
  ASSERT_EQ(bodies[0].catalog_size(), 1);
  EXPECT_LE(bodies[0].ByteSizeLong(), 1000u);
  EXPECT_TRUE(p.empty());
}

TEST(GossipPacker, SplitsAtTheBudgetKeepingOrderAndEveryPart) {
  constexpr size_t kBudget = 300;
  GossipPacker p(kBudget);
  for (uint64_t i = 0; i < 40; ++i) p.AddDelta(DeltaOf(i, 10 + (i * 37) % 120));
  std::vector<wire::Gossip> bodies = p.Take();
  EXPECT_GT(bodies.size(), 1u);
  uint64_t next = 0;
  for (const wire::Gossip& b : bodies) {
    EXPECT_GT(b.deltas_size(), 0);
    EXPECT_LE(b.ByteSizeLong(), kBudget);
    for (const wire::Delta& d : b.deltas()) EXPECT_EQ(d.epoch(), next++);
  }
  EXPECT_EQ(next, 40u);
}

TEST(GossipPacker, OversizedPartGetsABodyOfItsOwn) {
  GossipPacker p(200);
  p.AddDelta(DeltaOf(1, 20));
  p.AddDelta(DeltaOf(2, 5000));
  p.AddDelta(DeltaOf(3, 20));
  std::vector<wire::Gossip> bodies = p.Take();
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_EQ(bodies[1].deltas_size(), 1);
  EXPECT_EQ(bodies[1].deltas(0).epoch(), 2u);
  EXPECT_GT(bodies[1].ByteSizeLong(), 200u);
  EXPECT_LE(bodies[0].ByteSizeLong(), 200u);
  EXPECT_LE(bodies[2].ByteSizeLong(), 200u);
}

}  // namespace
}  // namespace pollen::node
