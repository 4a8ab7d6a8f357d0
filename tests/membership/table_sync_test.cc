// The table's anti-entropy (push/pull opened by a digest summary) and the
// warm start: single instances, messages carried by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "node/core/membership.h"
#include "node/core/rng.h"
#include "tests/membership/messages.h"
#include "tests/membership/pump.h"

namespace pollen::node {
namespace {

using namespace std::chrono_literals;
using testing::Gossip;
using testing::Pump;
using testing::Update;

using MemberList = std::vector<std::pair<std::string, Address>>;

MemberList Names(const std::vector<std::string>& names) {
  MemberList out;
  for (const std::string& n : names) out.emplace_back(n, Pump::AddressOf(n));
  return out;
}

MembershipConfig WarmConfig(const std::string& self, const std::vector<std::string>& cluster) {
  MembershipConfig c = Pump::Config(self, {Pump::AddressOf("seed")});
  c.push_pull_every = 2;  // a push/pull within two probe intervals
  c.warm_members = std::make_shared<const MemberList>(Names(cluster));
  return c;
}

// Ticks `m` until it sends a push/pull (acking its probes meanwhile) and
// returns it; nullopt after `ticks` wakeups without one.
std::optional<Membership::Send> NextPushPull(Membership& m, int ticks = 200) {
  for (int i = 0; i < ticks; ++i) {
    const Time t = m.NextWakeup();
    m.Tick(t);
    for (Membership::Send& s : m.TakeOutgoing()) {
      if (s.msg->has_push_pull()) return std::move(s);
      if (s.msg->has_ping()) {
        wire::MembershipMessage ack;
        ack.set_sender(s.msg->ping().target());
        ack.mutable_ack()->set_seq(s.msg->ping().seq());
        m.Handle(s.to, ack, t);
      }
    }
  }
  return std::nullopt;
}

TEST(WarmStart, ListsEveryMemberAliveWithoutJoiningOrGossiping) {
  MembershipConfig c = WarmConfig("self", {"a", "self", "b", "a", "c"});
  Membership m(c, 3);
  EXPECT_FALSE(m.joined());
  m.Start(Time{0});
  EXPECT_TRUE(m.joined());
  EXPECT_EQ(m.LiveCount(), 4u);  // self, a, b, c: self and the duplicate skipped
  for (const std::string name : {"a", "b", "c"}) {
    ASSERT_TRUE(m.Find(name).has_value()) << name;
    EXPECT_EQ(m.Find(name)->state, MemberState::kAlive);
    EXPECT_EQ(m.Find(name)->incarnation, 0u);
    EXPECT_EQ(m.Find(name)->address, Pump::AddressOf(name));
  }
  EXPECT_TRUE(m.TakeEvents().empty());
  EXPECT_TRUE(m.TakeOutgoing().empty());  // no join to the seed
  // Nothing queued: over a minute of acked probes, no message piggybacks an
  // update and none is a join.
  Time t{0};
  int messages = 0;
  while (t < Time{0} + 60s) {
    t = m.NextWakeup();
    m.Tick(t);
    for (const Membership::Send& s : m.TakeOutgoing()) {
      ++messages;
      EXPECT_EQ(s.msg->updates_size(), 0);
      EXPECT_FALSE(s.msg->has_push_pull() && s.msg->push_pull().join());
      if (!s.msg->has_ping()) continue;
      wire::MembershipMessage ack;
      ack.set_sender(s.msg->ping().target());
      ack.mutable_ack()->set_seq(s.msg->ping().seq());
      m.Handle(s.to, ack, t);
    }
  }
  EXPECT_GE(messages, 50);  // it did probe
}

TEST(WarmStart, StopsAtTheTableBound) {
  MembershipConfig c = WarmConfig("self", {"a", "b", "c", "d", "e", "f"});
  c.max_members = 4;
  Membership m(c, 3);
  m.Start(Time{0});
  EXPECT_EQ(m.Members().size(), 4u);  // self and the first three
  EXPECT_TRUE(m.Find("c").has_value());
  EXPECT_FALSE(m.Find("d").has_value());
}

TEST(TableDigest, EqualTablesReachedInAnyOrderHaveEqualDigests) {
  Rng rng(11);
  std::vector<wire::MemberUpdate> updates;
  for (int i = 0; i < 40; ++i) {
    const auto status = static_cast<wire::MemberStatus>(rng.Below(4));  // alive .. left
    updates.push_back(Update("m" + std::to_string(rng.Below(12)), rng.Below(4), status));
  }
  for (int trial = 0; trial < 50; ++trial) {
    Membership x(Pump::Config("self", {}), 1), y(Pump::Config("self", {}), 2);
    x.Start(Time{0});
    y.Start(Time{0});
    std::vector<wire::MemberUpdate> shuffled = updates;
    for (size_t i = shuffled.size(); i > 1; --i) std::swap(shuffled[i - 1], shuffled[rng.Below(i)]);
    for (const auto& u : updates) x.Handle("p:1", Gossip("p", {u}), Time{0});
    for (const auto& u : shuffled) y.Handle("p:1", Gossip("p", {u}), Time{0});
    // The lattice makes the tables equal; the digest must say so.
    ASSERT_EQ(x.Members().size(), y.Members().size());
    EXPECT_EQ(x.TableDigest(), y.TableDigest()) << trial;
  }
}

// The digest is kept as the table changes (new members, state and
// incarnation changes, address moves, suspicions timing out, evictions at
// the table bound); it must equal that of a table built afresh from the
// same final entries.
TEST(TableDigest, KeptDigestEqualsThatOfATableRebuiltFromItsEntries) {
  Rng rng(23);
  for (int trial = 0; trial < 20; ++trial) {
    MembershipConfig c = Pump::Config("self", {});
    c.max_members = 9;  // 12 names compete for 8 places: evictions
    Membership kept(c, 1);
    kept.Start(Time{0});
    Time t{0};
    for (int i = 0; i < 200; ++i) {
      const auto status = static_cast<wire::MemberStatus>(rng.Below(4));  // alive .. left
      wire::MemberUpdate u = Update("m" + std::to_string(rng.Below(12)), rng.Below(6), status);
      if (rng.Below(4) == 0) u.set_address("moved" + std::to_string(rng.Below(3)) + ":1");
      kept.Handle("p:1", Gossip("p", {u}), t);
      if (rng.Below(10) == 0) {  // let suspicions time out now and then
        t += std::chrono::seconds(30);
        kept.Tick(t);
      }
      kept.TakeOutgoing();
    }
    ASSERT_EQ(kept.incarnation(), 0u);  // self was never named: the rebuilt table's self matches
    Membership rebuilt(c, 2);
    rebuilt.Start(Time{0});
    for (const MemberInfo& m : kept.Members()) {
      if (m.name == "self") continue;
      static constexpr wire::MemberStatus kWire[] = {wire::MEMBER_STATUS_ALIVE, wire::MEMBER_STATUS_SUSPECT,
                                                     wire::MEMBER_STATUS_DEAD, wire::MEMBER_STATUS_LEFT};
      wire::MemberUpdate u = Update(m.name, m.incarnation, kWire[static_cast<int>(m.state)]);
      u.set_address(m.address);
      rebuilt.Handle("p:1", Gossip("p", {u}), Time{0});
    }
    ASSERT_EQ(rebuilt.Members().size(), kept.Members().size()) << trial;
    EXPECT_EQ(rebuilt.TableDigest(), kept.TableDigest()) << trial;
  }
}

TEST(TableDigest, ChangesWithEveryFieldItCovers) {
  Membership m(Pump::Config("self", {}), 1);
  m.Start(Time{0});
  m.Handle("a:1", Gossip("a", {Update("a", 0, wire::MEMBER_STATUS_ALIVE)}), Time{0});
  std::vector<uint64_t> seen = {m.TableDigest()};
  auto changed = [&] {
    const uint64_t d = m.TableDigest();
    const bool fresh = std::find(seen.begin(), seen.end(), d) == seen.end();
    seen.push_back(d);
    return fresh;
  };
  m.Handle("a:1", Gossip("a", {Update("b", 0, wire::MEMBER_STATUS_ALIVE)}), Time{0});  // a member
  EXPECT_TRUE(changed());
  m.Handle("a:1", Gossip("a", {Update("b", 0, wire::MEMBER_STATUS_SUSPECT)}), Time{0});  // a state
  EXPECT_TRUE(changed());
  m.Handle("a:1", Gossip("a", {Update("b", 1, wire::MEMBER_STATUS_ALIVE)}), Time{0});  // an incarnation
  EXPECT_TRUE(changed());
  wire::MemberUpdate moved = Update("b", 2, wire::MEMBER_STATUS_ALIVE);
  moved.set_address("elsewhere:1");
  m.Handle("a:1", Gossip("a", {moved}), Time{0});  // an address (and incarnation)
  EXPECT_TRUE(changed());
  m.Handle("a:1", Gossip("a", {Update("self", 0, wire::MEMBER_STATUS_SUSPECT)}), Time{0});  // self refutes
  EXPECT_EQ(m.incarnation(), 1u);
  EXPECT_TRUE(changed());
}

TEST(TableSync, SummaryBetweenEqualTablesIsTheWholeExchange) {
  const std::vector<std::string> cluster = {"a", "b", "c"};
  Membership a(WarmConfig("a", cluster), 1), b(WarmConfig("b", cluster), 2);
  a.Start(Time{0});
  b.Start(Time{0});
  ASSERT_EQ(a.TableDigest(), b.TableDigest());
  int to_b = 0;
  for (int round = 0; round < 12; ++round) {
    std::optional<Membership::Send> s = NextPushPull(a);
    ASSERT_TRUE(s.has_value());
    const wire::MemberPushPull& pp = s->msg->push_pull();
    EXPECT_TRUE(pp.summary());
    EXPECT_EQ(pp.members_size(), 0);
    EXPECT_EQ(pp.table_digest(), a.TableDigest());
    EXPECT_LT(s->msg->ByteSizeLong(), 40u);
    if (s->to != Pump::AddressOf("b")) continue;  // "c" is not simulated
    ++to_b;
    b.Handle(Pump::AddressOf("a"), *s->msg, a.NextWakeup());
    EXPECT_TRUE(b.TakeOutgoing().empty());
  }
  EXPECT_GE(to_b, 2);  // the equal-digest path ran
}

// Two tables equal but for one member's address (the same incarnation and
// state): their digests differ.
TEST(TableDigest, CoversTheAddress) {
  MembershipConfig x = WarmConfig("self", {"a", "b"});
  MembershipConfig y = x;
  y.warm_members = std::make_shared<const MemberList>(MemberList{{"a", Pump::AddressOf("a")}, {"b", "elsewhere:1"}});
  Membership mx(x, 1), my(y, 1);
  mx.Start(Time{0});
  my.Start(Time{0});
  ASSERT_EQ(mx.Find("b")->incarnation, my.Find("b")->incarnation);
  EXPECT_NE(mx.TableDigest(), my.TableDigest());
}

// A summary carries no table: a joining node that gets one keeps retrying
// its seeds; a full list ends the join.
TEST(TableSync, SummaryDoesNotEndAJoin) {
  Membership m(Pump::Config("n", {Pump::AddressOf("seed")}), 1);
  m.Start(Time{0});
  m.TakeOutgoing();
  wire::MembershipMessage summary;
  summary.set_sender("seed");
  summary.mutable_push_pull()->set_summary(true);
  summary.mutable_push_pull()->set_table_digest(12345);
  m.Handle(Pump::AddressOf("seed"), summary, Time{0});
  EXPECT_FALSE(m.joined());
  m.TakeOutgoing();
  m.Tick(Time{0} + m.config().probe_interval);
  bool rejoined = false;
  for (const Membership::Send& s : m.TakeOutgoing()) rejoined |= s.msg->has_push_pull() && s.msg->push_pull().join();
  EXPECT_TRUE(rejoined);
}

TEST(TableSync, SummaryBetweenDifferentTablesLeadsToAFullExchange) {
  const std::vector<std::string> cluster = {"a", "b"};
  Membership a(WarmConfig("a", cluster), 1), b(WarmConfig("b", cluster), 2);
  a.Start(Time{0});
  b.Start(Time{0});
  // Each learns a member the other has not heard of.
  a.Handle("x:1", Gossip("x", {Update("x", 0, wire::MEMBER_STATUS_ALIVE)}), Time{0});
  b.Handle("y:1", Gossip("y", {Update("y", 3, wire::MEMBER_STATUS_ALIVE)}), Time{0});
  a.TakeOutgoing();
  b.TakeOutgoing();
  ASSERT_NE(a.TableDigest(), b.TableDigest());
  std::optional<Membership::Send> summary;
  while (!summary.has_value() || summary->to != Pump::AddressOf("b")) summary = NextPushPull(a);
  ASSERT_TRUE(summary->msg->push_pull().summary());
  const Time t = a.NextWakeup();
  b.Handle(Pump::AddressOf("a"), *summary->msg, t);
  std::vector<Membership::Send> from_b = b.TakeOutgoing();
  ASSERT_EQ(from_b.size(), 1u);
  ASSERT_TRUE(from_b[0].msg->has_push_pull());
  const wire::MemberPushPull& full = from_b[0].msg->push_pull();
  EXPECT_FALSE(full.summary());
  EXPECT_FALSE(full.reply());  // a is to answer with its own list
  EXPECT_EQ(full.members_size(), 3);  // b, a, y
  a.Handle(Pump::AddressOf("b"), *from_b[0].msg, t);
  std::vector<Membership::Send> from_a = a.TakeOutgoing();
  ASSERT_EQ(from_a.size(), 1u);
  ASSERT_TRUE(from_a[0].msg->has_push_pull());
  EXPECT_TRUE(from_a[0].msg->push_pull().reply());
  b.Handle(Pump::AddressOf("a"), *from_a[0].msg, t);
  EXPECT_TRUE(b.TakeOutgoing().empty());  // replies are not answered
  EXPECT_TRUE(a.Find("y").has_value());
  EXPECT_TRUE(b.Find("x").has_value());
  EXPECT_EQ(a.TableDigest(), b.TableDigest());
}

TEST(TableSync, SummaryWithAnythingElseIsRejectedWhole) {
  Membership m(Pump::Config("self", {}), 1);
  m.Start(Time{0});
  const uint64_t before = m.TableDigest();
  for (int variant = 0; variant < 3; ++variant) {
    wire::MembershipMessage msg;
    msg.set_sender("p");
    auto* pp = msg.mutable_push_pull();
    pp->set_summary(true);
    pp->set_table_digest(before + 1);
    if (variant == 0) *pp->add_members() = Update("q", 0, wire::MEMBER_STATUS_ALIVE);
    if (variant == 1) pp->set_join(true);
    if (variant == 2) pp->set_reply(true);
    m.Handle("p:1", msg, Time{0});
  }
  EXPECT_EQ(m.rejected().at("summary"), 3u);
  EXPECT_EQ(m.TableDigest(), before);
  EXPECT_TRUE(m.TakeOutgoing().empty());
  EXPECT_TRUE(m.TakeEvents().empty());
}

}  // namespace
}  // namespace pollen::node
