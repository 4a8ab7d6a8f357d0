// Catalog: digest filters, WhoHas, conflicting creations, snapshots.
#include <gtest/gtest.h>

#include "node/core/catalog.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

FilterConfig Digest(const std::string& owner) {
  FilterConfig f;
  f.name = "digest:" + owner;
  f.capacity = 5000;
  f.fpr = 0.001;
  f.scope = Scope::kDigest;
  f.owner = owner;
  return f;
}

TEST(Catalog, DigestWritableOnlyByOwnerAndWhoHasAnswersOwners) {
  ClusterOptions o;
  o.nodes = 4;
  o.filters = {Digest("n0"), Digest("n1"), Digest("n2")};
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  EXPECT_EQ(c.node(3).Add("digest:n0", "obj").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.node(1).Add("digest:n0", "obj").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.node(0).Add("digest:n0", "shared-object").ok());
  ASSERT_TRUE(c.node(1).Add("digest:n1", "shared-object").ok());
  ASSERT_TRUE(c.node(1).Add("digest:n1", "only-on-1").ok());
  ASSERT_TRUE(c.node(2).Add("digest:n2", "only-on-2").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("digest:n0") && c.Converged("digest:n1") && c.Converged("digest:n2"); }, 10s));
  for (size_t n = 0; n < c.size(); ++n) {
    EXPECT_EQ(c.node(n).WhoHas({}, "shared-object"), (std::vector<std::string>{"n0", "n1"}));
    EXPECT_EQ(c.node(n).WhoHas({}, "only-on-1"), (std::vector<std::string>{"n1"}));
    EXPECT_EQ(c.node(n).WhoHas({}, "only-on-2"), (std::vector<std::string>{"n2"}));
    const std::vector<std::string> some = {"digest:n0", "digest:n2"};
    EXPECT_EQ(c.node(n).WhoHas(some, "shared-object"), (std::vector<std::string>{"n0"}));
    EXPECT_TRUE(c.node(n).WhoHas(some, "only-on-1").empty());
  }
}

TEST(Catalog, ReserveSpreadsAndDuplicateIsRefused) {
  ClusterOptions o;
  o.nodes = 5;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  FilterConfig f;
  f.name = "runtime";
  f.capacity = 3000;
  ASSERT_TRUE(c.node(2).Reserve(f, c.now()).ok());
  EXPECT_EQ(c.node(2).Reserve(f, c.now()).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(c.node(2).Add("runtime", "a").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("runtime"); }, 10s));
  for (size_t n = 0; n < c.size(); ++n) {
    EXPECT_TRUE(*c.node(n).Exists("runtime", "a"));
    EXPECT_EQ(c.node(n).Info("runtime")->config.capacity, 3000u);
    EXPECT_EQ(c.node(n).Reserve(f, c.now()).code(), absl::StatusCode::kAlreadyExists);
  }
  FilterConfig bad = f;
  bad.name = "bad";
  bad.fpr = 2;
  EXPECT_EQ(c.node(0).Reserve(bad, c.now()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Catalog, ConflictingReservesResolveToOneWinnerEverywhere) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    ClusterOptions o;
    o.nodes = 6;
    o.seed = seed;
    Cluster c(o);
    c.StartAll();
    ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
    FilterConfig a;
    a.name = "dup";
    a.capacity = 1000;
    FilterConfig b = a;
    b.capacity = 8000;
    FilterConfig d = a;
    d.capacity = 500;
    d.generations = 3;
    // Three nodes create "dup" differently in the same instant, then add.
    ASSERT_TRUE(c.node(1).Reserve(a, c.now()).ok());
    ASSERT_TRUE(c.node(3).Reserve(b, c.now()).ok());
    ASSERT_TRUE(c.node(5).Reserve(d, c.now()).ok());
    ASSERT_TRUE(c.node(1).Add("dup", "from-1").ok());
    ASSERT_TRUE(c.node(3).Add("dup", "from-3").ok());
    auto agreed = [&] {
      auto first = c.node(0).Info("dup");
      if (!first.ok()) return false;
      for (size_t n = 1; n < c.size(); ++n) {
        auto info = c.node(n).Info("dup");
        if (!info.ok() || info->config.capacity != first->config.capacity ||
            info->config.generations != first->config.generations || info->blocks != first->blocks) {
          return false;
        }
      }
      return c.Converged("dup");
    };
    ASSERT_TRUE(c.RunUntil(agreed, 30s)) << "seed " << seed;
    // The winner is the one catalog.h's order picks; compute it independently.
    const uint64_t stamp = static_cast<uint64_t>(c.now().count());
    std::vector<std::pair<CatalogEntry, size_t>> entries;
    for (auto [cfg, n] : {std::pair{a, size_t{1}}, std::pair{b, size_t{3}}, std::pair{d, size_t{5}}}) {
      auto e = MakeCatalogEntry(cfg, TestSecret(), stamp, NameOf(n));
      ASSERT_TRUE(e.ok());
      entries.emplace_back(*e, n);
    }
    auto best = entries.begin();
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (Precedes(it->first, best->first)) best = it;
    }
    EXPECT_EQ(c.node(0).Info("dup")->config.capacity, best->first.config.capacity) << "seed " << seed;
    // The losers discarded their state, and said so; the winner did not.
    for (const auto& [entry, n] : entries) {
      if (n == best->second) {
        EXPECT_EQ(CountEvents(c.events(n), Event::Kind::kFilterDiscarded), 0u);
      } else {
        EXPECT_GE(CountEvents(c.events(n), Event::Kind::kFilterDiscarded), 1u);
      }
    }
    const std::string winner_key = best->second == 1 ? "from-1" : best->second == 3 ? "from-3" : "";
    // Adds after the resolution replicate under the winner's parameters.
    ASSERT_TRUE(c.node(4).Add("dup", "after").ok());
    ASSERT_TRUE(c.RunUntil([&] { return c.Converged("dup"); }, 10s));
    for (size_t n = 0; n < c.size(); ++n) {
      EXPECT_TRUE(*c.node(n).Exists("dup", "after"));
      if (!winner_key.empty()) {
        EXPECT_TRUE(*c.node(n).Exists("dup", winner_key));
      }
    }
  }
}

TEST(Catalog, ExportImportRoundTrip) {
  ClusterOptions o;
  o.nodes = 2;
  FilterConfig f = SharedFilter("crawl");
  f.generations = 3;
  o.filters = {f, Digest("n0")};
  Cluster c(o);
  c.StartAll();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(c.node(0).Add("crawl", "url" + std::to_string(i)).ok());
  ASSERT_TRUE(c.node(0).Rotate("crawl", c.now()).ok());
  for (int i = 100; i < 200; ++i) ASSERT_TRUE(c.node(0).Add("crawl", "url" + std::to_string(i)).ok());
  ASSERT_TRUE(c.node(0).Add("digest:n0", "obj").ok());
  FilterConfig rt;
  rt.name = "rt";
  ASSERT_TRUE(c.node(0).Reserve(rt, c.now()).ok());
  ASSERT_TRUE(c.node(0).Add("rt", "x").ok());
  std::map<std::string, std::string> snaps = c.node(0).ExportSnapshots();
  ASSERT_EQ(snaps.size(), 3u);

  // A fresh node without these filters in its config imports them all.
  NodeConfig cfg = c.ConfigFor(1);
  cfg.filters.clear();
  auto fresh = Node::Create(cfg);
  ASSERT_TRUE(fresh.ok());
  for (auto it = snaps.rbegin(); it != snaps.rend(); ++it) ASSERT_TRUE((*fresh)->ImportSnapshot(it->second).ok());
  std::vector<FilterInfo> a = c.node(0).Filters(), b = (*fresh)->Filters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].config.name, b[i].config.name);
    EXPECT_EQ(a[i].config.scope, b[i].config.scope);
    EXPECT_EQ(a[i].config.owner, b[i].config.owner);
    EXPECT_EQ(a[i].epoch, b[i].epoch);
    ASSERT_EQ(a[i].generations.size(), b[i].generations.size());
    for (size_t g = 0; g < a[i].generations.size(); ++g) EXPECT_EQ(a[i].generations[g].digest, b[i].generations[g].digest);
  }
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(*(*fresh)->Exists("crawl", "url" + std::to_string(i)));
  EXPECT_EQ((*fresh)->WhoHas({}, "obj"), std::vector<std::string>{"n0"});
  // Importing again merges (idempotent); corrupt bytes are refused.
  ASSERT_TRUE((*fresh)->ImportSnapshot(snaps["crawl"]).ok());
  EXPECT_EQ((*fresh)->Info("crawl")->generations.back().digest, c.node(0).Info("crawl")->generations.back().digest);
  std::string bad = snaps["crawl"];
  bad[bad.size() / 2] ^= 1;
  EXPECT_FALSE((*fresh)->ImportSnapshot(bad).ok());
  EXPECT_FALSE((*fresh)->ImportSnapshot("short").ok());
  EXPECT_FALSE((*fresh)->ImportSnapshot(snaps["crawl"].substr(0, 40)).ok());
}

TEST(Catalog, KeyringRotationKeepsTheClusterTalking) {
  ClusterOptions o;
  o.nodes = 3;
  o.filters = {SharedFilter("crawl")};
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  const std::string key(32, 'k');
  for (size_t n = 0; n < c.size(); ++n) ASSERT_TRUE(c.node(n).KeyringInstall(key).ok());
  EXPECT_EQ(c.node(0).KeyringList().size(), 2u);
  const uint64_t new_id = c.node(0).KeyringList()[1];
  for (size_t n = 0; n < c.size(); ++n) ASSERT_TRUE(c.node(n).KeyringUse(new_id).ok());
  EXPECT_EQ(c.node(0).KeyringList()[0], new_id);
  const uint64_t old_id = c.node(0).KeyringList()[1];
  for (size_t n = 0; n < c.size(); ++n) ASSERT_TRUE(c.node(n).KeyringRemove(old_id).ok());
  EXPECT_FALSE(c.node(0).KeyringInstall("short").ok());
  ASSERT_TRUE(c.node(2).Add("crawl", "after-rotation").ok());
  EXPECT_TRUE(c.RunUntil([&] { return *c.node(0).Exists("crawl", "after-rotation"); }, 5s));
}

// A compact reference (tree pushes) carries the name and a digest of the other
// pinned fields: equal parameters give equal digests, any field changed gives
// another, and the full-form parser refuses it (only a node holding the filter
// can resolve it).
TEST(Catalog, CompactFilterReferences) {
  auto entry = MakeCatalogEntry(SharedFilter("crawl"), TestSecret(), 0, "");
  ASSERT_TRUE(entry.ok());
  const crdt::FilterParams& p = entry->params;
  wire::FilterRef ref;
  ToWire(p, &ref);
  EXPECT_FALSE(IsCompactRef(ref));
  CompactRef(&ref);
  EXPECT_TRUE(IsCompactRef(ref));
  EXPECT_EQ(ref.name(), "crawl");
  EXPECT_EQ(ref.digest(), ParamsDigest(p));
  EXPECT_NE(ref.digest(), 0u);
  EXPECT_FALSE(FromWire(ref).ok());
  wire::FilterRef full;
  ToWire(p, &full);
  EXPECT_LT(ref.ByteSizeLong() + 15, full.ByteSizeLong());
  // Every pinned field moves the digest.
  for (int field = 0; field < 9; ++field) {
    crdt::FilterParams q = p;
    switch (field) {
      case 0: ++q.filter_id; break;
      case 1: ++q.shape.blocks; break;
      case 2: ++q.shape.k; break;
      case 3: ++q.generations; break;
      case 4: ++q.hash_scheme; break;
      case 5: ++q.key_id; break;
      case 6: ++q.expansion; break;
      case 7: ++q.capacity; break;
      case 8: q.fpr = 0.02; break;
    }
    EXPECT_NE(ParamsDigest(q), ParamsDigest(p)) << field;
  }
  // A scaling filter's reference (expansion, capacity and rate set) too.
  auto scaling = crdt::MakeParams("grow", 1000, 0.01, 1, TestSecret(), 2);
  ASSERT_TRUE(scaling.ok());
  wire::FilterRef grow;
  ToWire(*scaling, &grow);
  const size_t full_bytes = grow.ByteSizeLong();
  CompactRef(&grow);
  EXPECT_EQ(grow.digest(), ParamsDigest(*scaling));
  EXPECT_NE(grow.digest(), ParamsDigest(p));
  EXPECT_LT(grow.ByteSizeLong() + 30, full_bytes);
  // A digest beside full fields is neither form.
  full.set_digest(ParamsDigest(p));
  EXPECT_FALSE(IsCompactRef(full));
  EXPECT_FALSE(FromWire(full).ok());
}

}  // namespace
}  // namespace pollen::node::testing
