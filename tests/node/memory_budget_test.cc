// A node's memory budget (NodeConfig::max_memory_bytes, max_filter_bytes):
// local creations over it fail naming the limit; a peer's filter over it is
// refused here (listed, counted and reported once) while the others hold and
// replicate it and this node serves every other filter; freed memory lets a
// later announcement in, and a deletion clears the refusal.
#include <gtest/gtest.h>

#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

// A filter of `capacity` keys at 1%: about 1.2 bytes a key, per generation.
FilterConfig Sized(const std::string& name, uint64_t capacity) { return SharedFilter(name, capacity); }

uint64_t BytesOf(Cluster& c, size_t n, const std::string& name) { return c.node(n).Info(name)->memory_bytes; }

TEST(MemoryBudget, LocalCreationsOverALimitFailNamingIt) {
  ClusterOptions o;
  o.nodes = 1;
  o.configure = [](size_t, NodeConfig& c) {
    c.max_filter_bytes = 200'000;
    c.max_memory_bytes = 250'000;
  };
  Cluster c(o);
  c.StartAll();
  absl::Status big = c.node(0).Reserve(Sized("big", 1'000'000), c.now());
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("max-filter-bytes (200000)"), std::string::npos) << big;
  // Two generations of 40,000 keys at 1%: ~100 KB a filter.
  ASSERT_TRUE(c.node(0).Reserve(Sized("a", 40'000), c.now()).ok());
  ASSERT_TRUE(c.node(0).Reserve(Sized("b", 40'000), c.now()).ok());
  absl::Status full = c.node(0).Reserve(Sized("c", 40'000), c.now());
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("max-memory (250000)"), std::string::npos) << full;
  EXPECT_FALSE(c.node(0).Info("c").ok());
  EXPECT_TRUE(c.node(0).RefusedFilters().empty());  // a local refusal is the caller's error, not a refused entry
  // A config filter over the limit: the node does not start.
  NodeConfig config = c.ConfigFor(0);
  config.filters = {Sized("cfg", 1'000'000)};
  absl::StatusOr<std::unique_ptr<Node>> n = Node::Create(config);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("filter 'cfg'"), std::string::npos) << n.status();
  EXPECT_NE(n.status().message().find("max-filter-bytes"), std::string::npos) << n.status();
}

TEST(MemoryBudget, APeersFilterOverTheBudgetIsRefusedHereAndServedByTheOthers) {
  ClusterOptions o;
  o.configure = [](size_t i, NodeConfig& c) {
    if (i == 2) c.max_memory_bytes = 250'000;  // the small node
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  // ~124 KB and ~148 KB (two generations of 50,000 and 60,000 keys at 1%):
  // together over node 2's 250,000 bytes.
  ASSERT_TRUE(c.node(0).Reserve(Sized("small", 50'000), c.now()).ok());
  c.RunFor(1s);
  ASSERT_TRUE(c.node(0).Reserve(Sized("huge", 60'000), c.now()).ok());
  ASSERT_TRUE(c.node(0).Add("huge", "h").ok());
  ASSERT_TRUE(c.node(0).Add("small", "s").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.node(1).Info("huge").ok() && c.node(2).Info("small").ok(); }, 20s));
  ASSERT_TRUE(c.RunUntil([&] { return *c.node(1).Exists("huge", "h") && *c.node(2).Exists("small", "s"); }, 20s));
  c.RunFor(30s);  // many anti-entropy rounds announce "huge" to node 2 again
  EXPECT_FALSE(c.node(2).Info("huge").ok());
  // A read is an error, not "absent": the cluster holds keys this node cannot see.
  EXPECT_EQ(c.node(2).Exists("huge", "h").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(c.node(2).Exists("nosuch", "h").status().code(), absl::StatusCode::kNotFound);
  const std::vector<Node::RefusedFilter> refused = c.node(2).RefusedFilters();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].name, "huge");
  EXPECT_EQ(refused[0].reason, "max_memory");
  EXPECT_EQ(refused[0].creator, c.node(0).name());
  EXPECT_GE(refused[0].bytes, BytesOf(c, 0, "huge"));
  EXPECT_GT(c.node(2).HeldFilterBytes() + refused[0].bytes, 250'000u);
  EXPECT_EQ(c.node(2).Counters().filters_refused.at("max_memory"), 1u);  // counted and reported once
  EXPECT_EQ(CountEvents(c.events(2), Event::Kind::kFilterRefused), 1u);
  EXPECT_LE(c.node(2).HeldFilterBytes(), 250'000u);
  // Node 2 keeps serving and replicating the filters it holds.
  ASSERT_TRUE(c.node(1).Add("small", "s2").ok());
  ASSERT_TRUE(c.RunUntil([&] { return *c.node(2).Exists("small", "s2"); }, 20s));

  // Deleting "small" frees room: the next announcement of "huge" (every
  // anti-entropy exchange carries the catalog) fits, and node 2 takes it.
  ASSERT_TRUE(*c.node(1).Delete("small", c.now()));
  ASSERT_TRUE(c.RunUntil([&] { return c.node(2).Info("huge").ok(); }, 30s));
  EXPECT_TRUE(c.node(2).RefusedFilters().empty());
  ASSERT_TRUE(c.RunUntil([&] { return *c.node(2).Exists("huge", "h"); }, 30s));
  // A deletion clears a refusal: a third filter that does not fit beside
  // "huge" is refused, then deleted.
  ASSERT_TRUE(c.node(0).Reserve(Sized("third", 60'000), c.now()).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.node(2).RefusedFilters().size() == 1; }, 30s));
  ASSERT_TRUE(*c.node(1).Delete("third", c.now()));
  ASSERT_TRUE(c.RunUntil([&] { return c.node(2).RefusedFilters().empty(); }, 30s));
  EXPECT_EQ(c.node(2).Exists("third", "h").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pollen::node::testing
