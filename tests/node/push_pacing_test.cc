// PushPacing: no hold while idle; a hold of `gap` after the last push once a
// window had kWindow / gap arrivals; busy until a window with fewer than half
// that, or a silent one.
#include "node/core/push_pacing.h"

#include <gtest/gtest.h>

namespace pollen::node {
namespace {

using std::chrono::milliseconds;

constexpr Duration kGap = milliseconds(200);  // busy at 5 arrivals per window, idle below 3

Time At(int64_t ms) { return Time(milliseconds(ms)); }

// `count` arrivals spread over the window that starts at `start_ms`.
void Arrivals(PushPacing& p, int64_t start_ms, int count) {
  for (int i = 0; i < count; ++i) p.OnArrival(At(start_ms + i * 900 / count));
}

// A pacer made busy by `arrivals` in the window from 0, which an arrival at
// 1000 ms closes.
PushPacing BusyFrom1000(int arrivals) {
  PushPacing p(kGap);
  Arrivals(p, 0, arrivals);
  p.OnArrival(At(1000));
  EXPECT_TRUE(p.busy());
  return p;
}

TEST(PushPacing, NoGapNeverHolds) {
  PushPacing p(Duration(0));
  Arrivals(p, 0, 50);
  p.OnPush(At(990));
  Arrivals(p, 1000, 50);
  EXPECT_FALSE(p.busy());
  EXPECT_EQ(p.Earliest(At(1001), 0), At(1001));
}

TEST(PushPacing, AnIdleNodePushesAtOnce) {
  PushPacing p(kGap);
  Arrivals(p, 0, 4);  // one short of busy
  p.OnPush(At(950));
  EXPECT_EQ(p.Earliest(At(1000), 0), At(1000));
  EXPECT_FALSE(p.busy());
}

TEST(PushPacing, ABusyNodeHoldsTheNextPushUntilTheGapEnds) {
  PushPacing p = BusyFrom1000(5);
  p.OnPush(At(1010));
  EXPECT_EQ(p.Earliest(At(1050), 0), At(1210));
  EXPECT_EQ(p.Earliest(At(1300), 0), At(1300));  // the gap is over
}

TEST(PushPacing, BusyUntilAWindowWithFewerThanHalfTheArrivals) {
  PushPacing p(kGap);
  Arrivals(p, 0, 5);
  Arrivals(p, 1000, 3);  // half of 5, rounded up: still busy
  p.OnPush(At(1950));
  p.OnArrival(At(2000));
  EXPECT_TRUE(p.busy());
  EXPECT_EQ(p.Earliest(At(2000), 0), At(2150));
  Arrivals(p, 2000 + 100, 1);  // 2 in the window from 2000
  p.OnArrival(At(3000));
  EXPECT_FALSE(p.busy());
  p.OnPush(At(3000));
  EXPECT_EQ(p.Earliest(At(3010), 0), At(3010));
}

TEST(PushPacing, ASilentWindowMakesTheNodeIdle) {
  PushPacing p = BusyFrom1000(10);
  p.OnPush(At(1000));
  // Nothing for more than two windows: the next arrival finds the node idle,
  // however busy the window before the silence was.
  EXPECT_EQ(p.Earliest(At(3500), 0), At(3500));
  EXPECT_FALSE(p.busy());
}

TEST(PushPacing, ABusyNodeDoesNotHoldAFullPush) {
  PushPacing p = BusyFrom1000(5);
  p.OnPush(At(1000));
  EXPECT_EQ(p.Earliest(At(1010), PushPacing::kFullWords - 1), At(1200));
  EXPECT_EQ(p.Earliest(At(1010), PushPacing::kFullWords), At(1010));
}

TEST(PushPacing, AGapLongerThanTheWindowNeedsOneArrival) {
  PushPacing p(milliseconds(1500));
  p.OnArrival(At(0));
  p.OnArrival(At(1000));
  EXPECT_TRUE(p.busy());
  p.OnPush(At(1000));
  EXPECT_EQ(p.Earliest(At(1100), 0), At(2500));
}

}  // namespace
}  // namespace pollen::node
