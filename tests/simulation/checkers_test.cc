// The checkers really fail when an invariant is broken.
#include "simulation/checkers.h"

#include <gtest/gtest.h>

namespace pollen::sim {
namespace {

using node::Time;

std::unique_ptr<node::Node> MakeNode() {
  node::NodeConfig c;
  c.name = "n1";
  c.advertise = "n1:1";
  c.rng_seed = 3;
  node::FilterConfig f;
  f.name = "crawl:seen";
  f.capacity = 1000;
  c.filters.push_back(f);
  auto n = node::Node::Create(c);
  EXPECT_TRUE(n.ok()) << n.status();
  return std::move(*n);
}

node::FilterInfo Info(uint64_t epoch, uint64_t bits, uint64_t incarnation = 1) {
  node::FilterInfo info;
  info.config.name = "f";
  info.incarnation = incarnation;
  info.epoch = epoch;
  node::GenerationInfo g;
  g.epoch = epoch;
  g.set_bits = bits;
  info.generations.push_back(g);
  return info;
}

TEST(SafetyChecker, EpochGoingBackFails) {
  SafetyChecker c(2, 2);
  c.Observe(0, Info(3, 10), Time(0));
  c.Observe(0, Info(4, 10), Time(1));
  EXPECT_EQ(c.failure_count(), 0u);
  c.Observe(0, Info(2, 10), Time(2));
  EXPECT_EQ(c.failure_count(), 1u);
  EXPECT_NE(c.failures()[0].find("epoch went back"), std::string::npos);
  // Another node has its own register.
  c.Observe(1, Info(1, 0), Time(3));
  EXPECT_EQ(c.failure_count(), 1u);
}

// A catalog replacement starts a new incarnation at the winner's epoch: lower
// epoch and fewer bits are fine after the node reported it, a failure without.
TEST(SafetyChecker, EpochMayRestartOnlyWithAReportedReplacement) {
  SafetyChecker c(1, 2);
  c.Observe(0, Info(5, 40, 1), Time(0));
  c.OnReplaced(0, "f");
  c.Observe(0, Info(2, 3, 2), Time(1));
  EXPECT_EQ(c.failure_count(), 0u);
  c.OnEpoch(0, "f", 1, Time(2));  // within incarnation 2 the register holds
  EXPECT_EQ(c.failure_count(), 1u);
  EXPECT_NE(c.failures()[0].find("epoch went back"), std::string::npos);
  c.Observe(0, Info(2, 3, 3), Time(3));  // a new incarnation nobody reported
  EXPECT_EQ(c.failure_count(), 2u);
  EXPECT_NE(c.failures()[1].find("without a kFilterDiscarded"), std::string::npos);
  // A restart that kept its state renumbers incarnations, but not epochs.
  c.OnCrash(0, /*kept_state=*/true);
  c.Observe(0, Info(2, 3, 1), Time(4));
  EXPECT_EQ(c.failure_count(), 2u);
  c.OnCrash(0, /*kept_state=*/true);
  c.Observe(0, Info(1, 3, 7), Time(5));
  EXPECT_EQ(c.failure_count(), 3u);
}

TEST(SafetyChecker, ClearedBitsFailUnlessTheNodeWasWiped) {
  SafetyChecker c(1, 2);
  c.Observe(0, Info(1, 50), Time(0));
  c.Observe(0, Info(1, 40), Time(1));
  EXPECT_EQ(c.failure_count(), 1u);
  EXPECT_NE(c.failures()[0].find("bits cleared"), std::string::npos);
  c.OnCrash(0, /*kept_state=*/false);
  c.Observe(0, Info(0, 0), Time(2));  // a wiped node starts over: fine
  EXPECT_EQ(c.failure_count(), 1u);
  EXPECT_EQ(c.distinct_bits(), 50u);
}

TEST(SafetyChecker, AcknowledgedAddMustRead) {
  auto n = MakeNode();
  SafetyChecker c(1, 2);
  ASSERT_TRUE(n->Add("crawl:seen", "present").ok());
  auto info = n->Info("crawl:seen");
  ASSERT_TRUE(info.ok());
  const uint64_t epoch = info->generations.back().epoch;
  c.OnAck(0, "crawl:seen", "present", epoch);
  c.CheckAcked(0, *n, Time(0));
  EXPECT_EQ(c.failure_count(), 0u);
  EXPECT_EQ(c.CheckAckedEverywhere(0, *n, Time(0)), 1u);
  // A key the node never stored but "acknowledged": the checker catches it.
  c.OnAck(0, "crawl:seen", "never-added-key", epoch);
  c.CheckAcked(0, *n, Time(0));
  EXPECT_EQ(c.failure_count(), 1u);
  EXPECT_NE(c.failures()[0].find("acked add reads absent"), std::string::npos);
  // After a wipe, the node's acks are no longer required.
  c.OnCrash(0, false);
  EXPECT_EQ(c.volatile_acks(), 2u);
  EXPECT_EQ(c.CheckAckedEverywhere(0, *n, Time(0)), 0u);
  EXPECT_EQ(c.failure_count(), 1u);
}

// Owner routing's checker: only a duplicate whose adds all reached the
// owner, asked with full views, breaks the promise.
TEST(RoutingPromise, OnlyADuplicateWithFullViewsAndNoFallbackFails) {
  EXPECT_TRUE(BrokeWaitPromise(3, 2));
  EXPECT_FALSE(BrokeWaitPromise(2, 2));
  EXPECT_FALSE(BrokeWaitPromise(0, 5));  // an understatement is allowed
  EXPECT_TRUE(BrokeRoutingPromise(RoutedKeyAnswers{2, false, false}));
  EXPECT_TRUE(BrokeRoutingPromise(RoutedKeyAnswers{3, false, false}));
  EXPECT_FALSE(BrokeRoutingPromise(RoutedKeyAnswers{1, false, false}));  // one new: kept
  EXPECT_FALSE(BrokeRoutingPromise(RoutedKeyAnswers{0, false, false}));
  EXPECT_FALSE(BrokeRoutingPromise(RoutedKeyAnswers{2, true, false}));   // a fallback: measured
  EXPECT_FALSE(BrokeRoutingPromise(RoutedKeyAnswers{2, false, true}));   // views differed: measured
}

}  // namespace
}  // namespace pollen::sim
