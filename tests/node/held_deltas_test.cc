// HeldDeltas: bounded in words plus bookkeeping, taken by name in arrival
// order, expired oldest first.
#include "node/core/held_deltas.h"

#include <gtest/gtest.h>

#include <string>

namespace pollen::node {
namespace {

HeldDeltas::Delta Make(const std::string& name, size_t words, int64_t at_ms) {
  HeldDeltas::Delta d;
  d.params.name = name;
  for (size_t i = 0; i < words; ++i) d.words.push_back({i, 1});
  d.arrived = std::chrono::milliseconds(at_ms);
  return d;
}

TEST(HeldDeltas, RefusesWhatWouldPassTheBoundAndKeepsTheRest) {
  constexpr size_t kB = HeldDeltas::kBookkeepingWords;
  HeldDeltas held(2 * kB + 10);
  EXPECT_TRUE(held.Hold(Make("a", 6, 0)));
  EXPECT_FALSE(held.Hold(Make("b", 5, 1)));  // 6 + 5 words > 10: nothing changed
  EXPECT_EQ(held.cost(), kB + 6);
  EXPECT_EQ(held.size(), 1u);
  EXPECT_TRUE(held.Hold(Make("b", 4, 2)));  // exactly the bound
  EXPECT_EQ(held.cost(), 2 * kB + 10);
  EXPECT_FALSE(held.Hold(Make("c", 1, 3)));
}

TEST(HeldDeltas, EachDeltaCostsItsBookkeepingSoTinyOnesCannotPileUp) {
  HeldDeltas held(100 * (HeldDeltas::kBookkeepingWords + 1));
  size_t kept = 0;
  for (int i = 0; i < 1000; ++i) kept += held.Hold(Make("n" + std::to_string(i), 1, i)) ? 1 : 0;
  EXPECT_EQ(kept, 100u);
}

TEST(HeldDeltas, TakeReturnsOneNamesDeltasOldestFirst) {
  HeldDeltas held(1000);
  ASSERT_TRUE(held.Hold(Make("a", 1, 0)));
  ASSERT_TRUE(held.Hold(Make("b", 2, 1)));
  ASSERT_TRUE(held.Hold(Make("a", 3, 2)));
  std::vector<HeldDeltas::Delta> a = held.Take("a");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].words.size(), 1u);
  EXPECT_EQ(a[1].words.size(), 3u);
  EXPECT_EQ(held.cost(), HeldDeltas::kBookkeepingWords + 2);
  EXPECT_TRUE(held.Take("a").empty());
  EXPECT_TRUE(held.Take("nobody").empty());
  EXPECT_EQ(held.Take("b").size(), 1u);
  EXPECT_EQ(held.cost(), 0u);
  EXPECT_EQ(held.size(), 0u);
}

TEST(HeldDeltas, ExpireDropsThoseAtOrBeforeTheCutoff) {
  HeldDeltas held(1000);
  ASSERT_TRUE(held.Hold(Make("a", 1, 10)));
  ASSERT_TRUE(held.Hold(Make("b", 2, 20)));
  ASSERT_TRUE(held.Hold(Make("c", 3, 30)));
  EXPECT_EQ(held.Expire(std::chrono::milliseconds(9)), 0u);
  EXPECT_EQ(held.Expire(std::chrono::milliseconds(20)), 2u);
  EXPECT_EQ(held.cost(), HeldDeltas::kBookkeepingWords + 3);
  EXPECT_EQ(held.size(), 1u);
  EXPECT_EQ(held.Take("c").size(), 1u);
}

TEST(HeldDeltas, AnEarlierArrivalIsQueuedAtItsNamesLatestTimeSoExpiryStaysInOrder) {
  HeldDeltas held(1000);
  ASSERT_TRUE(held.Hold(Make("a", 1, 50)));
  ASSERT_TRUE(held.Hold(Make("a", 1, 10)));  // a clock step back
  ASSERT_TRUE(held.Hold(Make("b", 1, 10)));  // another name: its own time
  EXPECT_EQ(held.Expire(std::chrono::milliseconds(10)), 1u);
  EXPECT_EQ(held.Expire(std::chrono::milliseconds(49)), 0u);
  EXPECT_EQ(held.Expire(std::chrono::milliseconds(50)), 2u);
  EXPECT_EQ(held.size(), 0u);
}

}  // namespace
}  // namespace pollen::node
