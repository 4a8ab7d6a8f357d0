// Deleting filters (DEL): tombstones in the replicated catalog (catalog.h).
// A deletion spreads, wins over the entry it deletes wherever that entry
// turns up later, and lets a later creation of the name make a new filter.
// The property test runs random DEL/RESERVE/ADD sequences on three nodes with
// partitions and checks the converged catalogs against a model.
#include <gtest/gtest.h>

#include "node/core/catalog.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

ClusterOptions OneNode() {
  ClusterOptions o;
  o.nodes = 1;
  return o;
}

// Three nodes; while *cut is true, node 2 neither sends nor receives.
ClusterOptions CutOffNode2(const bool* cut) {
  ClusterOptions o;
  o.drop = [cut](size_t from, const Outgoing& out, const wire::Envelope&) {
    return *cut && (from == 2 || out.to == AddressOf(2));
  };
  return o;
}

FilterConfig Named(const std::string& name, uint64_t capacity = 1000) { return SharedFilter(name, capacity); }

// The same catalog entry as the node holds (for Precedes in the model).
CatalogEntry EntryOf(const FilterInfo& info) {
  auto e = MakeCatalogEntry(info.config, TestSecret(), info.stamp, info.creator);
  EXPECT_TRUE(e.ok()) << e.status();
  return *e;
}

TEST(Delete, SpreadsEverywhereAndALaterReserveIsANewEmptyFilter) {
  Cluster c(ClusterOptions{});
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  ASSERT_TRUE(c.node(0).Reserve(Named("d"), c.now()).ok());
  ASSERT_TRUE(c.node(0).Add("d", "old").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("d"); }, 10s));
  const uint64_t stamp = c.node(2).Info("d")->stamp;

  EXPECT_EQ(*c.node(1).Delete("nosuch", c.now()), false);
  EXPECT_TRUE(c.node(1).Tombstones().empty());  // nothing deleted, nothing remembered
  ASSERT_EQ(*c.node(1).Delete("d", c.now()), true);
  EXPECT_FALSE(c.node(1).Info("d").ok());
  EXPECT_EQ(c.node(1).Exists("d", "old").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*c.node(1).Delete("d", c.now()), false);
  ASSERT_TRUE(c.RunUntil([&] { return !c.node(0).Info("d").ok() && !c.node(2).Info("d").ok(); }, 10s));
  for (size_t n = 0; n < c.size(); ++n) {
    EXPECT_EQ(c.node(n).Tombstones(), (std::map<std::string, uint64_t>{{"d", stamp}}));
    EXPECT_EQ(c.node(n).Counters().filters_deleted, 1u);
    EXPECT_EQ(CountEvents(c.events(n), Event::Kind::kFilterDeleted), 1u);
  }

  // Re-created on another node: a new stamp above the tombstone, no old bits.
  ASSERT_TRUE(c.node(2).Reserve(Named("d", 2000), c.now()).ok());
  EXPECT_GT(c.node(2).Info("d")->stamp, stamp);
  ASSERT_TRUE(c.node(2).Add("d", "new").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("d"); }, 10s));
  for (size_t n = 0; n < c.size(); ++n) {
    EXPECT_EQ(c.node(n).Info("d")->config.capacity, 2000u);
    EXPECT_TRUE(*c.node(n).Exists("d", "new"));
    EXPECT_FALSE(*c.node(n).Exists("d", "old"));
  }
}

// A node cut off while the filter is deleted still holds it; when the
// partition heals, its gossip and anti-entropy must not bring it back, and
// the tombstone removes its copy.
TEST(Delete, APartitionedCopyIsNotResurrected) {
  bool cut = false;
  Cluster c(CutOffNode2(&cut));
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  ASSERT_TRUE(c.node(0).Reserve(Named("p"), c.now()).ok());
  ASSERT_TRUE(c.node(0).Add("p", "x").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("p"); }, 10s));
  cut = true;
  ASSERT_TRUE(*c.node(0).Delete("p", c.now()));
  ASSERT_TRUE(c.node(2).Add("p", "y").ok());  // the cut-off node keeps writing
  c.RunFor(20s);
  EXPECT_FALSE(c.node(1).Info("p").ok());
  EXPECT_TRUE(c.node(2).Info("p").ok());
  cut = false;
  ASSERT_TRUE(c.RunUntil([&] { return !c.node(2).Info("p").ok() && c.AllMembersLive(); }, 120s));
  c.RunFor(10s);  // several anti-entropy rounds with the old holder back
  for (size_t n = 0; n < c.size(); ++n) EXPECT_FALSE(c.node(n).Info("p").ok()) << n;
}

// A creation concurrent with the delete (on a node that never saw the
// deleted entry, with a later stamp) is another filter: it survives.
TEST(Delete, AConcurrentLaterCreationSurvives) {
  bool cut = false;
  Cluster c(CutOffNode2(&cut));
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  cut = true;
  ASSERT_TRUE(c.node(0).Reserve(Named("q"), c.now()).ok());
  c.RunFor(1s);
  ASSERT_TRUE(c.node(2).Reserve(Named("q", 3000), c.now()).ok());  // later stamp
  ASSERT_TRUE(c.node(2).Add("q", "kept").ok());
  ASSERT_TRUE(*c.node(1).Delete("q", c.now()));
  cut = false;
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive() && c.Converged("q"); }, 120s));
  for (size_t n = 0; n < c.size(); ++n) {
    EXPECT_EQ(c.node(n).Info("q")->config.capacity, 3000u);
    EXPECT_TRUE(*c.node(n).Exists("q", "kept"));
  }
}

TEST(Delete, SnapshotOfADeletedFilterIsRefusedUnlessRestamped) {
  Cluster c(OneNode());
  c.StartAll();
  ASSERT_TRUE(c.node(0).Reserve(Named("s"), c.now()).ok());
  ASSERT_TRUE(c.node(0).Add("s", "x").ok());
  const std::string snapshot = c.node(0).ExportSnapshots().at("s");
  const std::string entry = *c.node(0).ExportCatalogEntry("s");
  ASSERT_TRUE(*c.node(0).Delete("s", c.now()));
  EXPECT_EQ(c.node(0).ImportSnapshot(snapshot).code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(c.node(0).ImportCatalogEntry(entry, c.now()).ok());  // applied under the rule: dead
  EXPECT_FALSE(c.node(0).Info("s").ok());
  // A restore (BF.LOADCHUNK) is a new creation: a stamp above the tombstone.
  absl::StatusOr<std::shared_ptr<Node::PreparedRestore>> restore = c.node(0).PrepareRestore(snapshot);
  ASSERT_TRUE(restore.ok()) << restore.status();
  ASSERT_TRUE(c.node(0).CommitRestore(*std::move(restore), c.now()).ok());
  EXPECT_GT(c.node(0).Info("s")->stamp, c.node(0).Tombstones().at("s"));
  EXPECT_TRUE(*c.node(0).Exists("s", "x"));
  // Prepared off the driver, a restore commits only into a free name: the
  // filter restored above holds it now, and stays as it is.
  const uint64_t stamp = c.node(0).Info("s")->stamp;
  absl::StatusOr<std::shared_ptr<Node::PreparedRestore>> again = c.node(0).PrepareRestore(snapshot);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(c.node(0).CommitRestore(*std::move(again), c.now()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(c.node(0).Info("s")->stamp, stamp);
  // A damaged value is refused before anything is built.
  std::string damaged = snapshot;
  damaged[damaged.size() - 20] ^= 1;
  EXPECT_FALSE(c.node(0).PrepareRestore(damaged).ok());
}

TEST(Delete, TombstonesAreBoundedOldestFirst) {
  Cluster c(OneNode());
  c.StartAll();
  for (size_t i = 0; i < kMaxTombstones; ++i) {
    ASSERT_TRUE(c.node(0).ImportTombstone("t" + std::to_string(i), 1000 + i, c.now()).ok());
  }
  EXPECT_EQ(c.node(0).Tombstones().size(), kMaxTombstones);
  EXPECT_TRUE(c.node(0).ImportTombstone("older", 5, c.now()).ok());  // older than all: not kept
  EXPECT_EQ(c.node(0).Tombstones().count("older"), 0u);
  EXPECT_TRUE(c.node(0).ImportTombstone("newer", 1u << 20, c.now()).ok());  // evicts t0
  EXPECT_EQ(c.node(0).Tombstones().count("t0"), 0u);
  EXPECT_EQ(c.node(0).Tombstones().count("newer"), 1u);
  EXPECT_EQ(c.node(0).Tombstones().size(), kMaxTombstones);
  EXPECT_EQ(c.node(0).Counters().tombstones_dropped, 2u);
}

// The model of one name: every entry created and every deletion issued.
struct NameModel {
  std::vector<CatalogEntry> creates;
  uint64_t deleted_through = 0;
  bool deleted = false;
  // (stamp, creator) of the filter each acknowledged add went to.
  std::vector<std::tuple<uint64_t, std::string, std::string>> adds;
};

// Random DEL / RESERVE / ADD on three names across three nodes, with
// partitions that come and go. After healing, every node must hold the same
// catalog and tombstones, and:
//  - no deleted filter is live (its stamp is above the name's tombstone);
//  - no live filter was lost: a creation above the tombstone disappears only
//    by losing the catalog rule to a creation that was then deleted;
//  - every add acknowledged by the surviving filter is on every node.
TEST(Delete, RandomDeleteReserveAddWithPartitionsConverges) {
  const std::vector<std::string> names = {"a", "b", "c"};
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    std::vector<int> side = {0, 0, 0};
    ClusterOptions o;
    o.seed = seed;
    o.drop = [&](size_t from, const Outgoing& out, const wire::Envelope&) {
      for (size_t to = 0; to < 3; ++to) {
        if (out.to == AddressOf(to)) return side[from] != side[to];
      }
      return false;
    };
    Cluster c(o);
    c.StartAll();
    ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
    Rng rng(seed * 7919);
    std::map<std::string, NameModel> model;
    for (int step = 0; step < 80; ++step) {
      const size_t n = rng.Below(3);
      const std::string& name = names[rng.Below(names.size())];
      NameModel& m = model[name];
      const uint64_t op = rng.Below(10);
      if (op == 0) {
        side = {0, 0, 0};
        if (rng.Below(2) == 0) side[rng.Below(3)] = 1;  // cut one node off, or heal
      } else if (op <= 2) {
        if (c.node(n).Reserve(Named(name, 1000 * (1 + rng.Below(3))), c.now()).ok()) {
          m.creates.push_back(EntryOf(*c.node(n).Info(name)));
        }
      } else if (op == 3) {
        auto info = c.node(n).Info(name);
        if (info.ok()) {
          ASSERT_TRUE(*c.node(n).Delete(name, c.now()));
          m.deleted_through = std::max(m.deleted_through, info->stamp);
          m.deleted = true;
        }
      } else {
        const std::string key = "k" + std::to_string(step);
        auto info = c.node(n).Info(name);
        if (info.ok() && c.node(n).Add(name, key).ok()) m.adds.emplace_back(info->stamp, info->creator, key);
      }
      c.RunFor(std::chrono::milliseconds(50 * rng.Below(12)));
    }
    side = {0, 0, 0};
    auto agreed = [&] {
      if (!c.AllMembersLive()) return false;
      const auto tombs = c.node(0).Tombstones();
      for (size_t n = 1; n < 3; ++n) {
        if (c.node(n).Tombstones() != tombs) return false;
      }
      for (const std::string& name : names) {
        auto first = c.node(0).Info(name);
        for (size_t n = 1; n < 3; ++n) {
          auto info = c.node(n).Info(name);
          if (info.ok() != first.ok()) return false;
          if (info.ok() && (info->stamp != first->stamp || info->creator != first->creator)) return false;
        }
        if (first.ok() && !c.Converged(name)) return false;
      }
      return true;
    };
    ASSERT_TRUE(c.RunUntil(agreed, 180s));

    for (const std::string& name : names) {
      SCOPED_TRACE(name);
      const NameModel& m = model[name];
      const auto tombs = c.node(0).Tombstones();
      if (m.deleted) {
        ASSERT_EQ(tombs.count(name), 1u);
        EXPECT_EQ(tombs.at(name), m.deleted_through);
      } else {
        EXPECT_EQ(tombs.count(name), 0u);
      }
      auto above = [&](const CatalogEntry& e) { return !m.deleted || e.stamp > m.deleted_through; };
      // Could `e` have been discarded for a winner that was deleted since?
      auto lost = [&](const CatalogEntry& e) {
        for (const CatalogEntry& w : m.creates) {
          if (!above(w) && Precedes(w, e)) return true;
        }
        return false;
      };
      auto live = c.node(0).Info(name);
      if (!live.ok()) {
        for (const CatalogEntry& e : m.creates) {
          if (above(e)) {
            EXPECT_TRUE(lost(e)) << "live filter lost: stamp " << e.stamp << " by " << e.creator;
          }
        }
        continue;
      }
      const CatalogEntry l = EntryOf(*live);
      EXPECT_TRUE(above(l)) << "deleted filter resurrected";
      EXPECT_TRUE(std::any_of(m.creates.begin(), m.creates.end(), [&](const CatalogEntry& e) {
        return e.stamp == l.stamp && e.creator == l.creator && Descriptor(e) == Descriptor(l);
      }));
      for (const CatalogEntry& e : m.creates) {
        if (above(e) && Precedes(e, l)) {
          EXPECT_TRUE(lost(e)) << "a better live filter was lost: " << e.stamp;
        }
      }
      for (const auto& [stamp, creator, key] : m.adds) {
        if (stamp != l.stamp || creator != l.creator) continue;
        for (size_t n = 0; n < 3; ++n) EXPECT_TRUE(*c.node(n).Exists(name, key)) << key << " on n" << n;
      }
    }
  }
}

}  // namespace
}  // namespace pollen::node::testing
