// Scaling filters across a cluster: growth is a max-register per generation
// carried by deltas, epoch announcements and anti-entropy, so every node ends
// with the same stack, and no acknowledged key reads absent anywhere, however
// the cluster was partitioned while it grew. Fixed-size filters refuse new
// keys once full (RedisBloom's NONSCALING). Saturation warnings and the
// observed false-positive rate.
#include <gtest/gtest.h>

#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

FilterConfig Growing(const std::string& name, uint64_t capacity) {
  FilterConfig f = SharedFilter(name, capacity);
  f.expansion = 2;
  return f;
}

uint32_t Layers(Node& n, const std::string& filter) {
  auto info = n.Info(filter);
  if (!info.ok()) return 0;
  uint32_t layers = 0;
  for (const GenerationInfo& g : info->generations) layers += g.epoch == info->epoch ? 1 : 0;
  return layers;
}

TEST(Scaling, PartitionedNodesGrowApartAndConvergeToOneStack) {
  bool cut = false;
  ClusterOptions o;
  o.drop = [&cut](size_t from, const Outgoing& out, const wire::Envelope&) {
    return cut && (from == 2 || out.to == AddressOf(2));
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  ASSERT_TRUE(c.node(0).Reserve(Growing("g", 200), c.now()).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("g"); }, 10s));

  cut = true;
  std::vector<std::string> acked;
  for (int i = 0; i < 3000; ++i) {
    const std::string key = "a" + std::to_string(i);
    ASSERT_TRUE(c.node(0).Add("g", key).ok());
    acked.push_back(key);
    if (i % 100 == 0) c.RunFor(50ms);
  }
  for (int i = 0; i < 10000; ++i) {  // node 2, cut off, grows further on its own
    const std::string key = "b" + std::to_string(i);
    ASSERT_TRUE(c.node(2).Add("g", key).ok());
    acked.push_back(key);
    if (i % 100 == 0) c.RunFor(50ms);
  }
  EXPECT_GT(Layers(c.node(2), "g"), Layers(c.node(0), "g"));
  EXPECT_GT(Layers(c.node(1), "g"), 1u);  // grown by node 0's deltas and announcements

  cut = false;
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("g"); }, 120s));
  const uint32_t layers = Layers(c.node(0), "g");
  EXPECT_GE(layers, 6u);  // node 2's 10000 keys need 6 layers of 200 * 2^i
  for (size_t n = 0; n < c.size(); ++n) {
    EXPECT_EQ(Layers(c.node(n), "g"), layers);
    for (const std::string& key : acked) ASSERT_TRUE(*c.node(n).Exists("g", key)) << "node " << n << " key " << key;
    EXPECT_GT(c.node(n).Counters().layers_opened, 0u);
  }
}

TEST(Scaling, FixedFilterRefusesNewKeysOnceFullButAnswersPresentOnes) {
  ClusterOptions o;
  o.nodes = 1;
  Cluster c(o);
  c.StartAll();
  FilterConfig f = SharedFilter("fixed", 3);  // expansion 0: fixed size
  ASSERT_TRUE(c.node(0).Reserve(f, c.now()).ok());
  std::vector<std::string_view> keys = {"a", "b", "c", "d", "a"};
  std::vector<bool> full;
  auto added = c.node(0).AddMany("fixed", keys, &full);
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(*added, (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(full, (std::vector<bool>{false, false, false, true, false}));
  EXPECT_EQ(*c.node(0).Add("fixed", "a"), false);
  EXPECT_EQ(c.node(0).Add("fixed", "zz").status().message(), kFilterFullError);
  EXPECT_FALSE(*c.node(0).Exists("fixed", "zz"));
  // A filter that rotates by fill is never refused: it rotates instead.
  FilterConfig r = SharedFilter("rotating", 3);
  r.rotate_fill = 0.5;
  ASSERT_TRUE(c.node(0).Reserve(r, c.now()).ok());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(c.node(0).Add("rotating", "k" + std::to_string(i)).ok());
  // Scaling and rotation by fill are exclusive.
  FilterConfig both = Growing("both", 3);
  both.rotate_fill = 0.5;
  EXPECT_FALSE(c.node(0).Reserve(both, c.now()).ok());
}

TEST(Scaling, ALayerOpensOnlyForANewKeyAsInRedisBloom) {
  ClusterOptions o;
  o.nodes = 1;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.node(0).Reserve(Growing("g", 10), c.now()).ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(*c.node(0).Add("g", "k" + std::to_string(i)));
  c.RunFor(2s);  // many gossip rounds: a full layer does not grow by itself
  EXPECT_EQ(Layers(c.node(0), "g"), 1u);
  std::vector<std::string_view> present = {"k0", "k9", "k3"};
  EXPECT_EQ(*c.node(0).AddMany("g", present), (std::vector<bool>{false, false, false}));
  EXPECT_FALSE(*c.node(0).Add("g", "k5"));
  EXPECT_EQ(Layers(c.node(0), "g"), 1u);  // present keys answer 0 and open nothing
  EXPECT_TRUE(*c.node(0).Add("g", "new"));
  EXPECT_EQ(Layers(c.node(0), "g"), 2u);
  // On one node the item count is exact: this node's new keys, no estimate.
  c.RunFor(1s);
  uint64_t items = 0;
  const FilterInfo info = *c.node(0).Info("g");
  for (const GenerationInfo& g : info.generations) items += g.items;
  EXPECT_EQ(items, 11u);
}

TEST(Saturation, WarnsOncePerCrossingAndWhenRelieved) {
  ClusterOptions o;
  o.nodes = 1;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.node(0).Reserve(SharedFilter("fixed", 100), c.now()).ok());
  const auto saturated = [&c] { return CountEvents(c.events(0), Event::Kind::kFilterSaturated); };
  const auto relieved = [&c] { return CountEvents(c.events(0), Event::Kind::kFilterRelieved); };
  int added = 0;
  for (; added < 89; ++added) ASSERT_TRUE(c.node(0).Add("fixed", "k" + std::to_string(added)).ok());
  c.RunFor(1s);
  EXPECT_EQ(saturated(), 0u);
  EXPECT_FALSE(c.node(0).Info("fixed")->saturated);
  // 90% of the capacity of a filter that refuses new keys when full.
  for (; added < 95; ++added) ASSERT_TRUE(c.node(0).Add("fixed", "k" + std::to_string(added)).ok());
  c.RunFor(1s);
  EXPECT_EQ(saturated(), 1u);
  EXPECT_TRUE(c.node(0).Info("fixed")->saturated);
  for (; added < 100; ++added) ASSERT_TRUE(c.node(0).Add("fixed", "k" + std::to_string(added)).ok());
  c.RunFor(1s);
  EXPECT_EQ(saturated(), 1u);  // once per crossing, not once per round
  ASSERT_TRUE(c.node(0).Rotate("fixed", c.now()).ok());
  c.RunFor(1s);
  EXPECT_EQ(relieved(), 1u);
  EXPECT_FALSE(c.node(0).Info("fixed")->saturated);

  // Fill over 0.6: a filter that rotates by fill late, at 0.9, warns on the way.
  FilterConfig late = SharedFilter("late", 100);
  late.rotate_fill = 0.9;
  ASSERT_TRUE(c.node(0).Reserve(late, c.now()).ok());
  const size_t before = saturated();
  for (int i = 0; i < 1000 && !c.node(0).Info("late")->saturated; ++i) {
    ASSERT_TRUE(c.node(0).Add("late", "l" + std::to_string(i)).ok());
    if (i % 10 == 0) c.RunFor(250ms);
  }
  EXPECT_TRUE(c.node(0).Info("late")->saturated);
  EXPECT_EQ(saturated(), before + 1);
  const GenerationInfo newest = c.node(0).Info("late")->generations.back();
  EXPECT_GT(newest.fill_ratio, 0.6);

  // A scaling filter grows instead: it never crosses either threshold.
  ASSERT_TRUE(c.node(0).Reserve(Growing("g", 100), c.now()).ok());
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(c.node(0).Add("g", "g" + std::to_string(i)).ok());
    if (i % 100 == 0) c.RunFor(250ms);
  }
  c.RunFor(1s);
  EXPECT_FALSE(c.node(0).Info("g")->saturated);
  EXPECT_EQ(saturated(), before + 1);
}

TEST(ObservedFpr, RatesOverPresentAnswersAndOverNegatives) {
  FilterInfo f;
  EXPECT_EQ(ObservedFalsePositiveRate(f).over_present, 0);
  EXPECT_EQ(ObservedFalsePositiveRate(f).over_negatives, 0);
  f.queries = 1000, f.answered_present = 110, f.false_positives = 10;
  // 890 answered absent (true negatives) + 10 wrongly present = 900 negatives.
  EXPECT_DOUBLE_EQ(ObservedFalsePositiveRate(f).over_present, 10.0 / 110);
  EXPECT_DOUBLE_EQ(ObservedFalsePositiveRate(f).over_negatives, 10.0 / 900);
  f.false_positives = 500;  // more reports than present answers here: counted as 110
  EXPECT_DOUBLE_EQ(ObservedFalsePositiveRate(f).over_present, 1.0);
  EXPECT_DOUBLE_EQ(ObservedFalsePositiveRate(f).over_negatives, 110.0 / 1000);

  ClusterOptions o;
  o.nodes = 1;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.node(0).Reserve(SharedFilter("f", 1000), c.now()).ok());
  EXPECT_EQ(c.node(0).ReportFalsePositives("f", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.node(0).ReportFalsePositives("f", kMaxFalsePositiveReport + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.node(0).ReportFalsePositives("nope", 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*c.node(0).ReportFalsePositives("f", 2), 2u);
  EXPECT_EQ(*c.node(0).ReportFalsePositives("f", 1), 3u);
  ASSERT_TRUE(c.node(0).Add("f", "a").ok());
  ASSERT_TRUE(*c.node(0).Exists("f", "a"));
  std::vector<std::string_view> keys = {"a", "b", "c"};
  ASSERT_TRUE(c.node(0).ExistsMany("f", keys).ok());
  const FilterInfo info = *c.node(0).Info("f");
  EXPECT_EQ(info.queries, 4u);
  EXPECT_EQ(info.answered_present, 2u);
  EXPECT_EQ(info.false_positives, 3u);
}

}  // namespace
}  // namespace pollen::node::testing
