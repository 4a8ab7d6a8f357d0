// Node::Peers: per-peer probe round trips and time since the last replication
// data (delta or sync) from each member.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "crdt/generations.h"
#include "node/core/catalog.h"
#include "node/core/dissemination.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

bool IsReplication(const wire::Envelope& env) {
  return env.has_delta() || (env.has_gossip() && env.gossip().deltas_size() > 0) || env.has_sync_request() ||
         env.has_sync_ranges();
}

std::optional<PeerStats> PeerOf(Node& node, const std::string& name, Time now) {
  for (const PeerStats& p : node.Peers(now)) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

class PeersTest : public ::testing::Test {
 protected:
  PeersTest() : forger_(TestSecret(), 0xBEEF) {
    auto entry = MakeCatalogEntry(SharedFilter("crawl"), TestSecret(), 0, "");
    EXPECT_TRUE(entry.ok());
    params_ = entry->params;
  }
  static ClusterOptions Options() {
    ClusterOptions o;
    o.nodes = 3;
    o.dissemination = NodeConfig::Dissemination::kFlood;  // data time from flood's direct deltas
    o.seed = 21;
    o.filters = {SharedFilter("crawl")};
    o.anti_entropy_interval = 1s;
    // No replication traffic at all reaches anyone: only forged frames count.
    o.drop = [](size_t, const Outgoing&, const wire::Envelope& env) { return IsReplication(env); };
    return o;
  }
  wire::Envelope From(const std::string& sender) {
    wire::Envelope env;
    env.set_sender_name(sender);
    env.set_sender_address(sender == "n1" ? AddressOf(1) : "addr-" + sender);
    return env;
  }
  std::string Delta(const std::string& sender, bool valid) {
    wire::Envelope env = From(sender);
    ToWire(params_, env.mutable_delta()->mutable_filter());
    env.mutable_delta()->set_epoch(0);
    std::vector<crdt::WordBits> words = {{3, 0x5}};
    env.mutable_delta()->set_positions(valid ? EncodeWords(words, 0, params_.shape.bits()) : std::string("\xff\xff\xff", 3));
    return forger_.Seal(env);
  }
  Forger forger_;
  crdt::FilterParams params_;
};

TEST_F(PeersTest, LastDataTimeMovesOnlyOnValidDeltasAndSyncsFromKnownMembers) {
  Cluster c(Options());
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 60s));
  c.RunFor(5s);  // membership and dropped anti-entropy rounds: no data yet
  Node& n0 = c.node(0);
  std::vector<PeerStats> peers = n0.Peers(c.now());
  ASSERT_EQ(peers.size(), 2u);  // self excluded, sorted
  EXPECT_EQ(peers[0].name, "n1");
  EXPECT_EQ(peers[1].name, "n2");
  for (const PeerStats& p : peers) {
    EXPECT_EQ(p.state, MemberState::kAlive);
    EXPECT_FALSE(p.since_data.has_value()) << p.name;
  }

  // A valid delta from n1: n1 is fresh, n2 still never.
  const Time t1 = c.now();
  n0.HandleDatagram(AddressOf(1), Delta("n1", true), t1);
  EXPECT_EQ(PeerOf(n0, "n1", t1)->since_data, Duration(0));
  EXPECT_FALSE(PeerOf(n0, "n2", t1)->since_data.has_value());

  // Time passes with only membership traffic: the lag grows with it.
  c.RunFor(2s);
  EXPECT_EQ(PeerOf(n0, "n1", c.now())->since_data, c.now() - t1);
  EXPECT_FALSE(PeerOf(n0, "n2", c.now())->since_data.has_value());

  // A malformed delta, data from self or from a stranger change nothing.
  n0.HandleStreamFrame(AddressOf(1), Delta("n1", false), c.now());
  EXPECT_GT(n0.Counters().rejected_by_reason["malformed"], 0u);
  n0.HandleDatagram(AddressOf(1), Delta("n0", true), c.now());
  n0.HandleDatagram("addr-stranger", Delta("stranger", true), c.now());
  EXPECT_EQ(PeerOf(n0, "n1", c.now())->since_data, c.now() - t1);
  EXPECT_FALSE(PeerOf(n0, "stranger", c.now()).has_value());
  EXPECT_EQ(n0.Peers(c.now()).size(), 2u);

  // A sync request from n2 (over a stream) and sync ranges from n1 count too.
  const Time t2 = c.now() + 10ms;
  wire::Envelope req = From("n2");
  req.set_sender_address(AddressOf(2));
  req.mutable_sync_request()->set_complete(false);
  n0.HandleStreamFrame(AddressOf(2), forger_.Seal(req), t2);
  EXPECT_EQ(PeerOf(n0, "n2", t2)->since_data, Duration(0));
  const Time t3 = t2 + 30ms;
  wire::Envelope ranges = From("n1");
  ranges.mutable_sync_ranges()->set_reply(false);
  n0.HandleStreamFrame(AddressOf(1), forger_.Seal(ranges), t3);
  EXPECT_EQ(PeerOf(n0, "n1", t3)->since_data, Duration(0));
  EXPECT_EQ(PeerOf(n0, "n2", t3)->since_data, Duration(30ms));
  // Other nodes heard nothing of this.
  for (const PeerStats& p : c.node(1).Peers(t3)) EXPECT_FALSE(p.since_data.has_value()) << p.name;
}

TEST(Peers, RealReplicationUpdatesLagAndProbesRecordRoundTrips) {
  ClusterOptions o;
  o.nodes = 3;
  o.dissemination = NodeConfig::Dissemination::kFlood;  // n2 sends to n1 directly, not only through n0
  o.seed = 22;
  o.filters = {SharedFilter("crawl")};
  o.anti_entropy_interval = 1000s;  // dissemination only (after the join syncs)
  // Nothing replicated from n2 ever reaches n0.
  o.drop = [](size_t from, const Outgoing& out, const wire::Envelope& env) {
    return from == 2 && out.to == AddressOf(0) && IsReplication(env);
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 60s));
  // Every peer answers probes eventually (zero-latency pump: RTT 0).
  ASSERT_TRUE(c.RunUntil(
      [&] {
        for (size_t i = 0; i < c.size(); ++i) {
          for (const PeerStats& p : c.node(i).Peers(c.now())) {
            if (!p.probe_rtt) return false;
          }
        }
        return true;
      },
      60s));
  for (const PeerStats& p : c.node(0).Peers(c.now())) EXPECT_EQ(*p.probe_rtt, Duration(0));
  c.RunFor(3s);
  ASSERT_TRUE(c.node(1).Add("crawl", "from-n1").ok());
  ASSERT_TRUE(c.node(2).Add("crawl", "from-n2").ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.node(0).Exists("crawl", "from-n1").value_or(false); }, 5s));
  std::optional<PeerStats> n1 = PeerOf(c.node(0), "n1", c.now());
  ASSERT_TRUE(n1 && n1->since_data);
  EXPECT_LE(*n1->since_data, Duration(5s));
  EXPECT_FALSE(PeerOf(c.node(0), "n2", c.now())->since_data.has_value());
  // n2's own data reached n1, which saw n2's delta.
  ASSERT_TRUE(c.RunUntil([&] { return c.node(1).Exists("crawl", "from-n2").value_or(false); }, 5s));
  EXPECT_TRUE(PeerOf(c.node(1), "n2", c.now())->since_data.has_value());
}

}  // namespace
}  // namespace pollen::node::testing
