// Scaling filters across a cluster: growth is a max-register per generation
// carried by deltas, epoch announcements and anti-entropy, so every node ends
// with the same stack, and no acknowledged key reads absent anywhere, however
// the cluster was partitioned while it grew. Fixed-size filters refuse new
// keys once full (RedisBloom's NONSCALING).
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

}  // namespace
}  // namespace pollen::node::testing
