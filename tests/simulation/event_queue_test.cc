#include "simulation/event_queue.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "node/core/rng.h"
#include "simulation/clock.h"
#include "simulation/trace_hash.h"

namespace pollen::sim {
namespace {

using std::chrono::milliseconds;

TEST(EventQueue, PopsInTimeOrder) {
  EventQueue<int> q;
  q.Push(milliseconds(30), 3);
  q.Push(milliseconds(10), 1);
  q.Push(milliseconds(20), 2);
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q.NextTime(), milliseconds(10));
  EXPECT_EQ(q.Pop().payload, 1);
  EXPECT_EQ(q.Pop().payload, 2);
  EXPECT_EQ(q.Pop().payload, 3);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, EqualTimesComeOutInPushOrder) {
  EventQueue<std::string> q;
  for (int i = 0; i < 100; ++i) q.Push(milliseconds(i % 3), std::to_string(i));
  std::vector<std::string> order;
  Time last{-1};
  uint64_t last_seq = 0;
  while (!q.empty()) {
    auto e = q.Pop();
    if (e.time == last) {
      EXPECT_GT(e.seq, last_seq);
    }
    EXPECT_GE(e.time, last);
    last = e.time;
    last_seq = e.seq;
    order.push_back(e.payload);
  }
  // Time 0 holds 0, 3, 6, ...: in push order.
  ASSERT_EQ(order.size(), 100u);
  EXPECT_EQ(order[0], "0");
  EXPECT_EQ(order[1], "3");
  EXPECT_EQ(order[2], "6");
  EXPECT_EQ(order[34], "1");  // 34 events at time 0, then time 1 starts with 1
}

TEST(EventQueue, RandomInterleavingIsDeterministic) {
  auto run = [](uint64_t seed) {
    EventQueue<uint64_t> q;
    node::Rng rng(seed);
    TraceHash h;
    for (int round = 0; round < 1000; ++round) {
      q.Push(milliseconds(rng.Below(50)), rng.Next());
      if (rng.Below(3) == 0 && !q.empty()) {
        auto e = q.Pop();
        h.Mix(static_cast<uint64_t>(e.time.count()));
        h.Mix(e.payload);
      }
    }
    while (!q.empty()) h.Mix(q.Pop().payload);
    return h.value();
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(EventQueue, BoundedCapacity) {
  EventQueue<int> q(2);
  EXPECT_TRUE(q.Push(milliseconds(1), 1));
  EXPECT_TRUE(q.Push(milliseconds(1), 2));
  EXPECT_FALSE(q.Push(milliseconds(1), 3));
  EXPECT_EQ(q.size(), 2u);
}

TEST(TraceHash, SensitiveToOrderAndContent) {
  TraceHash a, b, c;
  a.Mix(1);
  a.Mix(std::string_view("x"));
  b.Mix(std::string_view("x"));
  b.Mix(1);
  c.Mix(1);
  c.Mix(std::string_view("x"));
  EXPECT_EQ(a.value(), c.value());
  EXPECT_NE(a.value(), b.value());
  EXPECT_EQ(a.count(), 2u);
  EXPECT_NE(StableHash("abcdefgh1"), StableHash("abcdefgh2"));
  EXPECT_NE(StableHash(""), StableHash(std::string(1, '\0')));
}

TEST(NodeClock, LocalAndVirtualRoundTrip) {
  NodeClock clock{std::chrono::seconds(3), 1e-3};
  for (int64_t v : {0LL, 1LL, 999'999LL, 5'000'000'000LL, 123'456'789'012LL}) {
    const Time local = clock.ToLocal(Time(v));
    EXPECT_GE(local, std::chrono::seconds(3));
    const Time back = clock.ToVirtual(local);
    EXPECT_GE(clock.ToLocal(back), local);
    EXPECT_LE(back.count(), v + 2);
  }
  NodeClock slow{std::chrono::seconds(0), -2e-3};
  EXPECT_LT(slow.ToLocal(std::chrono::seconds(100)), std::chrono::seconds(100));
  EXPECT_LT(slow.ToLocal(std::chrono::seconds(100)), slow.ToLocal(std::chrono::seconds(101)));
}

}  // namespace
}  // namespace pollen::sim
