#include "simulation/network.h"

#include <cmath>

#include <gtest/gtest.h>

namespace pollen::sim {
namespace {

using node::Channel;
using node::Duration;
using node::Time;
using std::chrono::milliseconds;

NetworkOptions Lossy(double loss) {
  NetworkOptions o;
  o.loss = loss;
  return o;
}

TEST(Network, LossRateWithinTolerance) {
  // 100,000 datagrams at p = 0.3: the count lost has sd = sqrt(n p (1-p)) ~ 145;
  // the tolerance is 5 sd (0.73 percentage points).
  Network net(4, Lossy(0.3), node::Rng(42));
  const int n = 100000;
  int delivered = 0;
  for (int i = 0; i < n; ++i) delivered += net.Plan(0, 1, Channel::kDatagram, milliseconds(i)).empty() ? 0 : 1;
  const double loss = 1.0 - static_cast<double>(delivered) / n;
  EXPECT_NEAR(loss, 0.3, 5 * std::sqrt(0.3 * 0.7 / n));
  EXPECT_EQ(net.counters().lost, static_cast<uint64_t>(n - delivered));
}

TEST(Network, StreamsAreNeverLostAndStayOrdered) {
  NetworkOptions o = Lossy(0.9);
  o.tail_mean = milliseconds(50);
  Network net(2, o, node::Rng(1));
  Time last{0};
  for (int i = 0; i < 5000; ++i) {
    auto arrivals = net.Plan(0, 1, Channel::kStream, milliseconds(i / 10));
    ASSERT_EQ(arrivals.size(), 1u);
    EXPECT_GE(arrivals[0], last);
    EXPECT_GE(arrivals[0], milliseconds(i / 10) + o.min_latency);
    last = arrivals[0];
  }
}

TEST(Network, LatencyHasMinimumAndExponentialTail) {
  NetworkOptions o;
  o.min_latency = milliseconds(5);
  o.tail_mean = milliseconds(10);
  Network net(2, o, node::Rng(9));
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto a = net.Plan(0, 1, Channel::kDatagram, Time(0));
    ASSERT_EQ(a.size(), 1u);
    ASSERT_GE(a[0], milliseconds(5));
    sum += static_cast<double>((a[0] - milliseconds(5)).count());
  }
  // Mean of the tail: 10 ms; sd of the mean = 10 ms / sqrt(n) ~ 0.07 ms.
  EXPECT_NEAR(sum / n / 1e6, 10.0, 0.5);
}

TEST(Network, DuplicationAndReordering) {
  NetworkOptions o;
  o.duplicate = 0.5;
  o.reorder = 0.5;
  o.tail_mean = Duration(0);
  o.reorder_delay = milliseconds(100);
  Network net(2, o, node::Rng(3));
  int copies = 0, overtaken = 0;
  Time prev{0};
  for (int i = 0; i < 2000; ++i) {
    auto a = net.Plan(0, 1, Channel::kDatagram, milliseconds(i));
    copies += static_cast<int>(a.size());
    if (a[0] < prev) ++overtaken;
    prev = a[0];
  }
  EXPECT_GT(copies, 2000 + 800);   // ~1000 duplicates expected
  EXPECT_LT(copies, 2000 + 1200);
  EXPECT_GT(overtaken, 100);       // reordering really reorders
  EXPECT_EQ(net.counters().duplicated, static_cast<uint64_t>(copies - 2000));
}

TEST(Network, SymmetricPartitionDropsBothWaysAndHeals) {
  Network net(4, NetworkOptions{}, node::Rng(5));
  net.Partition(Network::PartitionKind::kSymmetric, {0, 0, 1, 1});
  for (Channel ch : {Channel::kDatagram, Channel::kStream}) {
    EXPECT_TRUE(net.Plan(0, 2, ch, Time(0)).empty());
    EXPECT_TRUE(net.Plan(3, 1, ch, Time(0)).empty());
    EXPECT_EQ(net.Plan(0, 1, ch, Time(0)).size(), 1u);
    EXPECT_EQ(net.Plan(2, 3, ch, Time(0)).size(), 1u);
  }
  EXPECT_EQ(net.counters().partition_dropped, 4u);
  net.Heal();
  EXPECT_EQ(net.Plan(0, 2, Channel::kDatagram, Time(0)).size(), 1u);
  EXPECT_EQ(net.Plan(3, 1, Channel::kStream, Time(0)).size(), 1u);
  EXPECT_TRUE(net.Deliverable(0, 3));
}

TEST(Network, OneWayPartition) {
  Network net(4, NetworkOptions{}, node::Rng(5));
  net.Partition(Network::PartitionKind::kOneWay, {0, 0, 1, 1});
  EXPECT_FALSE(net.Reachable(0, 2));  // side 0 cannot send to side 1
  EXPECT_TRUE(net.Reachable(2, 0));   // the other way works
  EXPECT_TRUE(net.Reachable(0, 1));
  EXPECT_TRUE(net.Plan(1, 3, Channel::kStream, Time(0)).empty());
  EXPECT_EQ(net.Plan(3, 1, Channel::kStream, Time(0)).size(), 1u);
  net.Heal();
  EXPECT_TRUE(net.Reachable(0, 2));
}

TEST(Network, FramesInFlightDropWhenPartitionStarts) {
  Network net(2, NetworkOptions{}, node::Rng(5));
  ASSERT_EQ(net.Plan(0, 1, Channel::kStream, Time(0)).size(), 1u);
  net.Partition(Network::PartitionKind::kSymmetric, {0, 1});
  EXPECT_FALSE(net.Deliverable(0, 1));
  net.Heal();
  EXPECT_TRUE(net.Deliverable(0, 1));
}

TEST(Network, SameSeedSamePlans) {
  auto run = [](uint64_t seed) {
    NetworkOptions o;
    o.loss = 0.2;
    o.duplicate = 0.1;
    o.reorder = 0.2;
    Network net(3, o, node::Rng(seed));
    std::vector<int64_t> times;
    for (int i = 0; i < 500; ++i) {
      const Channel ch = (i % 4 != 0) ? Channel::kDatagram : Channel::kStream;
      const std::vector<Time> arrivals = net.Plan(i % 3, (i + 1) % 3, ch, milliseconds(i));
      for (const Time& t : arrivals) times.push_back(t.count());
    }
    return times;
  };
  EXPECT_EQ(run(11), run(11));
  EXPECT_NE(run(11), run(12));
}

}  // namespace
}  // namespace pollen::sim
