// BroadcastTree: the parent rule, loop guards, and the property that beacon
// exchange over a connected overlay settles into one spanning tree.
#include "node/core/broadcast_tree.h"

#include <set>

#include <gtest/gtest.h>

#include "node/core/rng.h"

namespace pollen::node {
namespace {

using Beacon = BroadcastTree::Beacon;

bool AllLive(const std::string&) { return true; }

TEST(BroadcastTree, AloneIsItsOwnRoot) {
  BroadcastTree t("m", {});
  EXPECT_FALSE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon(), (Beacon{"m", 0, ""}));
  EXPECT_TRUE(t.TreeLinks().empty());
}

// A suspected neighbour is the parent only when no other neighbour offers a
// path to the same root: a crashed parent is left at its first suspicion,
// and a false suspicion never re-roots anyone.
TEST(BroadcastTree, ASuspectIsParentOnlyWithoutAnotherPathToTheRoot) {
  BroadcastTree t("m", {});
  for (const char* n : {"b", "c"}) ASSERT_TRUE(t.AddNeighbour(n));
  t.OnBeacon("b", Beacon{"a", 1, "a"});
  t.OnBeacon("c", Beacon{"a", 3, "x"});
  auto b_suspect = [](const std::string& name) { return name == "b"; };
  EXPECT_TRUE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon().parent, "b");  // the shorter path
  EXPECT_TRUE(t.Recompute(AllLive, b_suspect));
  EXPECT_EQ(t.beacon(), (Beacon{"a", 4, "c"}));  // longer, but not suspected
  t.OnBeacon("c", Beacon{"c", 0, ""});  // c no longer offers root a
  EXPECT_TRUE(t.Recompute(AllLive, b_suspect));
  EXPECT_EQ(t.beacon(), (Beacon{"a", 2, "b"}));  // the suspect, rather than a larger root
  EXPECT_FALSE(t.Recompute(AllLive, b_suspect));
}

TEST(BroadcastTree, ParentOffersTheSmallestRootThenTheShortestPathThenTheSmallestName) {
  BroadcastTree t("m", {});
  for (const char* n : {"b", "c", "d", "z"}) ASSERT_TRUE(t.AddNeighbour(n));
  t.OnBeacon("z", Beacon{"z", 0, ""});  // a larger root: ignored
  EXPECT_FALSE(t.Recompute(AllLive));
  t.OnBeacon("d", Beacon{"b", 3, "x"});
  EXPECT_TRUE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon(), (Beacon{"b", 4, "d"}));
  t.OnBeacon("c", Beacon{"b", 1, "b"});  // shorter
  t.OnBeacon("b", Beacon{"b", 0, ""});   // shorter still
  EXPECT_TRUE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon(), (Beacon{"b", 1, "b"}));
  t.OnBeacon("c", Beacon{"a", 5, "y"});  // a smaller root wins over any distance
  EXPECT_TRUE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon(), (Beacon{"a", 6, "c"}));
  t.OnBeacon("d", Beacon{"a", 5, "y"});  // a tie: the smaller neighbour name stays
  EXPECT_FALSE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon().parent, "c");
}

TEST(BroadcastTree, IgnoresDeadRootsChildrenLongPathsAndNonNeighbours) {
  BroadcastTree t("m", BroadcastTree::Config{4, 8, 10});
  ASSERT_TRUE(t.AddNeighbour("b"));
  ASSERT_TRUE(t.AddNeighbour("c"));
  t.OnBeacon("x", Beacon{"a", 0, ""});  // not a neighbour
  t.OnBeacon("b", Beacon{"a", 2, "m"});  // my child: poison reverse
  t.OnBeacon("c", Beacon{"a", 10, "q"});  // one hop more is over max_distance
  EXPECT_FALSE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon().root, "m");
  t.OnBeacon("c", Beacon{"a", 9, "q"});
  EXPECT_TRUE(t.Recompute(AllLive));
  EXPECT_EQ(t.beacon(), (Beacon{"a", 10, "c"}));
  // The root died (membership says so): back to self at once.
  EXPECT_TRUE(t.Recompute([](const std::string& root) { return root != "a"; }));
  EXPECT_EQ(t.beacon(), (Beacon{"m", 0, ""}));
}

TEST(BroadcastTree, TreeLinksAreTheParentAndTheChildren) {
  BroadcastTree t("m", {});
  for (const char* n : {"a", "b", "c", "d"}) ASSERT_TRUE(t.AddNeighbour(n));
  t.OnBeacon("a", Beacon{"a", 0, ""});
  t.OnBeacon("b", Beacon{"a", 2, "m"});  // child
  t.OnBeacon("c", Beacon{"a", 1, "a"});  // sibling: not a tree link
  ASSERT_TRUE(t.Recompute(AllLive));
  EXPECT_EQ(t.TreeLinks(), (std::vector<std::string>{"a", "b"}));
  t.RemoveNeighbour("b");
  EXPECT_EQ(t.TreeLinks(), (std::vector<std::string>{"a"}));
}

TEST(BroadcastTree, NeighboursAreBounded) {
  BroadcastTree t("m", BroadcastTree::Config{2, 3, 32});
  EXPECT_FALSE(t.AddNeighbour("m"));
  EXPECT_TRUE(t.NeedsNeighbours());
  EXPECT_TRUE(t.AddNeighbour("a"));
  EXPECT_FALSE(t.AddNeighbour("a"));
  EXPECT_TRUE(t.AddNeighbour("b"));
  EXPECT_FALSE(t.NeedsNeighbours());
  EXPECT_TRUE(t.AddNeighbour("c"));
  EXPECT_FALSE(t.AddNeighbour("d"));
  EXPECT_EQ(t.degree(), 3u);
}

// version() moves with every change Recompute could see, and only then, so
// Node can skip recomputing while it (and membership) stand still.
TEST(BroadcastTree, VersionCountsNeighbourAndBeaconChanges) {
  BroadcastTree t("m", {});
  uint64_t v = t.version();
  EXPECT_FALSE(t.AddNeighbour("m"));  // self
  EXPECT_EQ(t.version(), v);
  ASSERT_TRUE(t.AddNeighbour("a"));
  EXPECT_GT(t.version(), v);
  v = t.version();
  EXPECT_FALSE(t.AddNeighbour("a"));  // already one
  t.RemoveNeighbour("zz");            // never one
  t.OnBeacon("zz", Beacon{"a", 0, ""});
  EXPECT_EQ(t.version(), v);
  t.OnBeacon("a", Beacon{"a", 0, ""});
  EXPECT_GT(t.version(), v);
  v = t.version();
  t.OnBeacon("a", Beacon{"a", 0, ""});  // the same beacon again
  EXPECT_EQ(t.version(), v);
  EXPECT_TRUE(t.Recompute(AllLive));
  EXPECT_EQ(t.version(), v);  // its own beacon is an output, not an input
  EXPECT_FALSE(t.Recompute(AllLive));
  t.OnBeacon("a", Beacon{"a", 0, "q"});
  EXPECT_GT(t.version(), v);
  v = t.version();
  t.RemoveNeighbour("a");
  EXPECT_GT(t.version(), v);
  BroadcastTree full("m", BroadcastTree::Config{1, 1, 32});
  ASSERT_TRUE(full.AddNeighbour("a"));
  v = full.version();
  EXPECT_FALSE(full.AddNeighbour("b"));  // full
  EXPECT_EQ(full.version(), v);
}

// N trees on a random connected overlay exchange beacons in rounds (each
// round every live node tells its live neighbours) until nothing changes.
class Overlay {
 public:
  Overlay(size_t n, uint64_t seed) {
    Rng rng(seed);
    for (size_t i = 0; i < n; ++i) trees_.emplace_back(Name(i), BroadcastTree::Config{3, 12, 32});
    for (size_t i = 1; i < n; ++i) Link(i, rng.Below(i));  // a random tree keeps it connected
    for (size_t e = 0; e < n; ++e) Link(rng.Below(n), rng.Below(n));
    live_.assign(n, true);
  }
  static std::string Name(size_t i) { return "n" + std::to_string(1000 + i); }
  // Membership declares it dead: its neighbours drop it.
  void Kill(size_t i) {
    live_[i] = false;
    for (BroadcastTree& t : trees_) t.RemoveNeighbour(Name(i));
  }
  bool LiveConnected() const {
    size_t start = 0;
    while (!live_[start]) ++start;
    std::vector<bool> seen(trees_.size(), false);
    std::vector<size_t> stack = {start};
    seen[start] = true;
    size_t reached = 0;
    while (!stack.empty()) {
      const size_t at = stack.back();
      stack.pop_back();
      ++reached;
      for (const std::string& n : trees_[at].Neighbours()) {
        const size_t j = Index(n);
        if (live_[j] && !seen[j]) {
          seen[j] = true;
          stack.push_back(j);
        }
      }
    }
    return reached == static_cast<size_t>(std::count(live_.begin(), live_.end(), true));
  }
  // Rounds until stable; -1 if it did not settle within `max_rounds`.
  int Settle(int max_rounds) {
    for (int round = 1; round <= max_rounds; ++round) {
      bool changed = false;
      for (size_t i = 0; i < trees_.size(); ++i) {
        if (!live_[i]) continue;
        for (const std::string& n : trees_[i].Neighbours()) {
          const size_t j = Index(n);
          if (live_[j]) trees_[j].OnBeacon(Name(i), trees_[i].beacon());
        }
      }
      for (size_t i = 0; i < trees_.size(); ++i) {
        if (live_[i]) changed |= trees_[i].Recompute([&](const std::string& r) { return live_[Index(r)]; });
      }
      if (!changed) return round;
    }
    return -1;
  }
  // One root (the smallest live name); parents are live neighbours; every
  // node reaches the root by parents within N hops; tree links symmetric.
  void ExpectSpanningTree() const {
    size_t first_live = 0;
    while (!live_[first_live]) ++first_live;
    size_t edges = 0, nodes = 0;
    for (size_t i = 0; i < trees_.size(); ++i) {
      if (!live_[i]) continue;
      ++nodes;
      const BroadcastTree& t = trees_[i];
      EXPECT_EQ(t.beacon().root, Name(first_live)) << Name(i);
      size_t at = i, hops = 0;
      while (!trees_[at].beacon().parent.empty() && hops <= trees_.size()) {
        const size_t p = Index(trees_[at].beacon().parent);
        EXPECT_TRUE(live_[p]);
        EXPECT_TRUE(trees_[at].IsNeighbour(Name(p)));
        at = p;
        ++hops;
      }
      EXPECT_EQ(at, first_live) << "no path to the root from " << Name(i);
      EXPECT_EQ(hops, t.beacon().distance) << Name(i);
      if (!t.beacon().parent.empty()) ++edges;
      for (const std::string& l : t.TreeLinks()) {
        const std::vector<std::string> back = trees_[Index(l)].TreeLinks();
        EXPECT_NE(std::find(back.begin(), back.end(), Name(i)), back.end()) << Name(i) << " - " << l;
      }
    }
    EXPECT_EQ(edges, nodes - 1);
  }

 private:
  void Link(size_t a, size_t b) {
    if (a == b) return;
    trees_[a].AddNeighbour(Name(b));
    trees_[b].AddNeighbour(Name(a));
  }
  static size_t Index(const std::string& name) { return std::stoul(name.substr(1)) - 1000; }
  std::vector<BroadcastTree> trees_;
  std::vector<bool> live_;
};

TEST(BroadcastTree, BeaconsSettleIntoOneSpanningTree) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    Overlay o(60, seed);
    ASSERT_GT(o.Settle(100), 0);
    o.ExpectSpanningTree();
  }
}

// After deaths (the root among them) the survivors settle again, with no
// loop: a spanning tree under the next smallest name wherever the overlay
// is still connected.
TEST(BroadcastTree, RepairsAfterTheRootAndOthersDie) {
  int connected = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    Overlay o(40, seed);
    ASSERT_GT(o.Settle(100), 0);
    o.Kill(0);
    o.Kill(1 + seed % 39);
    ASSERT_GT(o.Settle(200), 0);
    if (o.LiveConnected()) {
      ++connected;
      o.ExpectSpanningTree();
    }
  }
  EXPECT_GT(connected, 20);  // the property was checked, not skipped
}

}  // namespace
}  // namespace pollen::node
