// Compact membership frames (NodeConfig::compact_membership) on the test
// pump: between nodes that take them, membership datagrams go compact; to
// and from a node that does not, the full form; and the cluster behaves the
// same either way (every member alive everywhere, no suspicion).
#include <gtest/gtest.h>

#include <cstdint>

#include "protocol/seal.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

struct MembershipForms {
  uint64_t compact = 0;
  uint64_t full = 0;
  uint64_t misformed = 0;  // a compact seal with an address or a sender inside, or the reverse
};

void Count(const Outgoing& out, const wire::Envelope& env, MembershipForms& n) {
  if (!env.has_membership()) return;
  const bool compact_seal = static_cast<uint8_t>(out.bytes[0]) == protocol::kCompactVersion;
  const bool no_address = env.sender_address().empty() && env.membership().sender().empty();
  if (compact_seal != no_address || (compact_seal && out.channel != Channel::kDatagram)) {
    ++n.misformed;
  } else {
    ++(compact_seal ? n.compact : n.full);
  }
}

TEST(CompactMembership, CompactBetweenNodesThatTakeItFullToTheOthers) {
  ClusterOptions o;
  o.nodes = 6;
  o.filters = {SharedFilter("crawl", 100'000)};
  // n0 stands for an older build: it sends and announces no compact frame.
  o.configure = [](size_t i, NodeConfig& c) { c.compact_membership = i != 0; };
  bool counting = false;
  MembershipForms between_new, with_old;
  o.drop = [&](size_t from, const Outgoing& out, const wire::Envelope& env) {
    if (counting) Count(out, env, from == 0 || out.to == AddressOf(0) ? with_old : between_new);
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 60s));
  counting = true;
  c.RunFor(60s);
  EXPECT_EQ(between_new.misformed + with_old.misformed, 0u);
  EXPECT_EQ(with_old.compact, 0u);
  EXPECT_GT(with_old.full, 20u);  // probes both ways
  EXPECT_GT(between_new.compact, 100u);
  EXPECT_LT(between_new.full, between_new.compact / 10);  // joins and full lists
  EXPECT_TRUE(c.AllMembersLive());
  for (size_t n = 0; n < c.size(); ++n) {
    const NodeCounters counters = c.node(n).Counters();
    EXPECT_EQ(counters.rejected_by_reason.count("malformed"), 0u) << "n" << n;
    for (const MemberInfo& m : c.node(n).Members()) EXPECT_EQ(m.state, MemberState::kAlive) << m.name;
  }
}

// A node restarted into a build without compact frames (emulated: compact
// frames to it are dropped, as it could not open them) is sent the full form
// from its join on, and stays alive everywhere.
TEST(CompactMembership, ANodeRestartedIntoAnOlderBuildGetsTheFullForm) {
  ClusterOptions o;
  o.nodes = 5;
  o.filters = {SharedFilter("crawl", 100'000)};
  bool rolled_back = false;
  o.configure = [&rolled_back](size_t i, NodeConfig& c) {
    if (i == 2 && rolled_back) c.compact_membership = false;
  };
  bool counting = false;
  MembershipForms to_old;
  o.drop = [&](size_t, const Outgoing& out, const wire::Envelope& env) {
    if (!rolled_back || out.to != AddressOf(2)) return false;
    if (counting) Count(out, env, to_old);
    return static_cast<uint8_t>(out.bytes[0]) == protocol::kCompactVersion;  // unopenable there
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 60s));
  c.RunFor(10s);
  rolled_back = true;
  c.Restart(2);
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 30s));
  c.RunFor(10s);  // it has probed every member
  counting = true;
  c.RunFor(60s);
  EXPECT_EQ(to_old.compact, 0u);
  EXPECT_GT(to_old.full, 20u);
  EXPECT_TRUE(c.AllMembersLive());
}

// A compact ping from a member the receiver has not heard of yet (it just
// joined elsewhere) names no address: the ack goes to the datagram's source.
TEST(CompactMembership, AnUnknownSendersCompactPingIsAnsweredAtItsSource) {
  ClusterOptions o;
  o.nodes = 2;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 60s));
  wire::Envelope env;
  env.set_version(kWireVersion);
  env.set_sender_name("newcomer");
  wire::MemberPing& ping = *env.mutable_membership()->mutable_ping();
  ping.set_seq(7);
  ping.set_target(NameOf(1));
  (void)c.node(1).TakeOutgoing();
  c.node(1).HandleDatagram("addr-newcomer", Forger(TestSecret()).Seal(env, /*set_defaults=*/false), c.now());
  bool acked = false;
  for (const Outgoing& out : c.node(1).TakeOutgoing()) {
    std::optional<wire::Envelope> reply = Peek(TestSecret(), out.bytes);
    ASSERT_TRUE(reply.has_value());
    if (reply->has_membership() && reply->membership().has_ack()) {
      EXPECT_EQ(out.to, "addr-newcomer");
      EXPECT_EQ(reply->membership().ack().seq(), 7u);
      acked = true;
    }
  }
  EXPECT_TRUE(acked);
  EXPECT_EQ(c.node(1).Counters().rejected_by_reason.count("membership_name"), 0u);
}

// A membership message without a sender inside is the compact form: only by
// datagram and without an address; otherwise malformed, and not answered.
TEST(CompactMembership, ACompactFrameByStreamOrWithAnAddressIsMalformed) {
  ClusterOptions o;
  o.nodes = 2;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 60s));
  Forger forger(TestSecret());
  for (const bool by_stream : {true, false}) {
    wire::Envelope env;
    env.set_version(kWireVersion);
    env.set_sender_name(NameOf(0));
    if (!by_stream) env.set_sender_address(AddressOf(0));
    env.mutable_membership()->mutable_ping()->set_seq(7);
    const uint64_t malformed = c.node(1).Counters().rejected_by_reason["malformed"];
    (void)c.node(1).TakeOutgoing();
    const std::string frame = forger.Seal(env, /*set_defaults=*/false);
    if (by_stream) {
      c.node(1).HandleStreamFrame(AddressOf(0), frame, c.now());
    } else {
      c.node(1).HandleDatagram(AddressOf(0), frame, c.now());
    }
    EXPECT_EQ(c.node(1).Counters().rejected_by_reason["malformed"], malformed + 1) << "by stream " << by_stream;
    for (const Outgoing& out : c.node(1).TakeOutgoing()) {
      std::optional<wire::Envelope> reply = Peek(TestSecret(), out.bytes);
      ASSERT_TRUE(reply.has_value());
      EXPECT_FALSE(reply->has_membership() && reply->membership().has_ack()) << "by stream " << by_stream;
    }
  }
}

}  // namespace
}  // namespace pollen::node::testing
