// Single-instance behaviour of Membership: precedence rules, refutation,
// input validation and bounds, join retries, leave, piggyback limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node/core/membership.h"
#include "node/core/rng.h"
#include "tests/membership/messages.h"
#include "tests/membership/pump.h"

namespace pollen::node {
namespace {

using namespace std::chrono_literals;
using testing::Pump;

using testing::Gossip;
using testing::Update;

wire::MembershipMessage PushPull(const std::string& sender, std::vector<wire::MemberUpdate> members, bool reply) {
  wire::MembershipMessage m;
  m.set_sender(sender);
  m.mutable_push_pull()->set_reply(reply);
  for (auto& u : members) *m.mutable_push_pull()->add_members() = u;
  return m;
}

class MembershipTest : public ::testing::Test {
 protected:
  MembershipTest() : m_(Pump::Config("self", {}), 7) { m_.Start(now_); }

  void Apply(const std::vector<wire::MemberUpdate>& updates) {
    m_.Handle("peer:1", Gossip("peer", updates), now_);
  }
  MemberState StateOf(const std::string& name) { return m_.Find(name)->state; }
  std::vector<Event::Kind> Kinds() {
    std::vector<Event::Kind> out;
    for (const Event& e : m_.TakeEvents()) out.push_back(e.kind);
    return out;
  }

  Time now_{0};
  Membership m_;
};

TEST_F(MembershipTest, NoSeedsMeansJoinedAlone) {
  EXPECT_TRUE(m_.joined());
  EXPECT_EQ(m_.LiveCount(), 1u);
  ASSERT_EQ(m_.Members().size(), 1u);
  EXPECT_EQ(m_.Members()[0].name, "self");
  EXPECT_TRUE(m_.LivePeers().empty());
}

TEST_F(MembershipTest, PrecedenceIsIncarnationThenState) {
  using K = Event::Kind;
  Apply({Update("a", 1, wire::MEMBER_STATUS_ALIVE)});
  EXPECT_EQ(Kinds(), std::vector<K>{K::kMemberJoined});
  Apply({Update("a", 1, wire::MEMBER_STATUS_SUSPECT)});
  EXPECT_EQ(StateOf("a"), MemberState::kSuspect);
  Apply({Update("a", 1, wire::MEMBER_STATUS_ALIVE)});  // same incarnation: no refutation
  EXPECT_EQ(StateOf("a"), MemberState::kSuspect);
  Apply({Update("a", 0, wire::MEMBER_STATUS_ALIVE)});  // older: ignored
  EXPECT_EQ(StateOf("a"), MemberState::kSuspect);
  EXPECT_EQ(Kinds(), std::vector<K>{K::kMemberSuspect});
  Apply({Update("a", 2, wire::MEMBER_STATUS_ALIVE)});
  EXPECT_EQ(StateOf("a"), MemberState::kAlive);
  Apply({Update("a", 2, wire::MEMBER_STATUS_DEAD)});
  EXPECT_EQ(StateOf("a"), MemberState::kDead);
  Apply({Update("a", 2, wire::MEMBER_STATUS_SUSPECT)});  // weaker than dead at the same incarnation
  EXPECT_EQ(StateOf("a"), MemberState::kDead);
  EXPECT_EQ(Kinds(), (std::vector<K>{K::kMemberAlive, K::kMemberDead}));
  EXPECT_EQ(m_.LiveCount(), 1u);
  Apply({Update("a", 3, wire::MEMBER_STATUS_ALIVE)});
  EXPECT_EQ(StateOf("a"), MemberState::kAlive);
  EXPECT_EQ(m_.LiveCount(), 2u);
  Apply({Update("a", 3, wire::MEMBER_STATUS_LEFT)});
  EXPECT_EQ(StateOf("a"), MemberState::kLeft);
  Apply({Update("a", 3, wire::MEMBER_STATUS_ALIVE)});
  Apply({Update("a", 3, wire::MEMBER_STATUS_DEAD)});
  Apply({Update("a", 2, wire::MEMBER_STATUS_ALIVE)});
  EXPECT_EQ(StateOf("a"), MemberState::kLeft);
  EXPECT_EQ(Kinds(), (std::vector<K>{K::kMemberAlive, K::kMemberLeft}));
  EXPECT_EQ(m_.Find("a")->incarnation, 3u);
}

TEST_F(MembershipTest, AliveAtHigherIncarnationUpdatesAddress) {
  Apply({Update("a", 1, wire::MEMBER_STATUS_ALIVE)});
  auto u = Update("a", 2, wire::MEMBER_STATUS_ALIVE);
  u.set_address("elsewhere:2");
  Apply({u});
  EXPECT_EQ(m_.Find("a")->address, "elsewhere:2");
  auto same = Update("a", 2, wire::MEMBER_STATUS_SUSPECT);
  same.set_address("third:3");
  Apply({same});
  EXPECT_EQ(m_.Find("a")->address, "elsewhere:2");
}

TEST_F(MembershipTest, RefutesSuspicionAndDeathWithHigherIncarnation) {
  Apply({Update("peer", 0, wire::MEMBER_STATUS_ALIVE), Update("self", 0, wire::MEMBER_STATUS_SUSPECT)});
  EXPECT_EQ(m_.incarnation(), 1u);
  Apply({Update("self", 5, wire::MEMBER_STATUS_DEAD)});
  EXPECT_EQ(m_.incarnation(), 6u);
  Apply({Update("self", 3, wire::MEMBER_STATUS_DEAD)});  // older accusation: nothing to do
  EXPECT_EQ(m_.incarnation(), 6u);
  EXPECT_EQ(m_.Find("self")->state, MemberState::kAlive);
  // The refutation is piggybacked on the next message.
  m_.TakeOutgoing();
  m_.Handle("peer:1", [] {
    wire::MembershipMessage p;
    p.set_sender("peer");
    p.mutable_ping()->set_seq(9);
    p.mutable_ping()->set_target("self");
    return p;
  }(), now_);
  auto out = m_.TakeOutgoing();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to, "peer:1");
  ASSERT_TRUE(out[0].msg->has_ack());
  EXPECT_EQ(out[0].msg->ack().seq(), 9u);
  bool found = false;
  for (const auto& u : out[0].msg->updates()) {
    if (u.name() == "self") {
      found = true;
      EXPECT_EQ(u.incarnation(), 6u);
      EXPECT_EQ(u.status(), wire::MEMBER_STATUS_ALIVE);
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(MembershipTest, DeadInFullStateIsOnlySuspected) {
  m_.Handle("peer:1", PushPull("peer", {Update("peer", 0, wire::MEMBER_STATUS_ALIVE),
                                        Update("c", 4, wire::MEMBER_STATUS_DEAD)}, /*reply=*/false), now_);
  EXPECT_EQ(StateOf("c"), MemberState::kSuspect);
  EXPECT_EQ(StateOf("peer"), MemberState::kAlive);
  // A push (not a reply) is answered with the full state, self included.
  auto out = m_.TakeOutgoing();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].msg->has_push_pull());
  EXPECT_TRUE(out[0].msg->push_pull().reply());
  EXPECT_EQ(out[0].msg->push_pull().members_size(), 3);
  // Replies are not answered.
  m_.Handle("peer:1", PushPull("peer", {Update("peer", 0, wire::MEMBER_STATUS_ALIVE)}, true), now_);
  EXPECT_TRUE(m_.TakeOutgoing().empty());
}

TEST_F(MembershipTest, SuspectBecomesDeadAfterTimeout) {
  Apply({Update("a", 0, wire::MEMBER_STATUS_ALIVE), Update("b", 0, wire::MEMBER_STATUS_ALIVE)});
  Apply({Update("a", 0, wire::MEMBER_STATUS_SUSPECT)});
  const Duration timeout = m_.SuspicionTimeout();
  m_.Tick(now_ + timeout - 1ns);
  EXPECT_EQ(StateOf("a"), MemberState::kSuspect);
  EXPECT_LE(m_.NextWakeup(), now_ + timeout);
  m_.Tick(now_ + timeout);
  EXPECT_EQ(StateOf("a"), MemberState::kDead);
}

TEST_F(MembershipTest, RejectsGarbageWithoutStateChange) {
  auto before = m_.Members().size();
  wire::MembershipMessage m = Gossip("", {Update("a", 0, wire::MEMBER_STATUS_ALIVE)});
  m_.Handle("x:1", m, now_);
  EXPECT_EQ(m_.rejected().at("name"), 1u);
  m_.Handle("x:1", Gossip("self", {Update("a", 0, wire::MEMBER_STATUS_ALIVE)}), now_);
  EXPECT_EQ(m_.rejected().at("self"), 1u);
  // One bad update poisons the whole message.
  m_.Handle("x:1", Gossip("x", {Update("a", 0, wire::MEMBER_STATUS_ALIVE), Update("", 0, wire::MEMBER_STATUS_ALIVE)}),
            now_);
  auto no_addr = Update("b", 0, wire::MEMBER_STATUS_ALIVE);
  no_addr.clear_address();
  m_.Handle("x:1", Gossip("x", {no_addr}), now_);
  EXPECT_EQ(m_.rejected().at("address"), 1u);
  auto bad_status = Update("c", 0, wire::MEMBER_STATUS_ALIVE);
  bad_status.set_status(static_cast<wire::MemberStatus>(99));
  m_.Handle("x:1", Gossip("x", {bad_status}), now_);
  EXPECT_EQ(m_.rejected().at("status"), 1u);
  m_.Handle("x:1", Gossip("x", {Update(std::string(256, 'n'), 0, wire::MEMBER_STATUS_ALIVE)}), now_);
  EXPECT_EQ(m_.rejected().at("name"), 3u);
  std::vector<wire::MemberUpdate> many;
  for (int i = 0; i < 65; ++i) many.push_back(Update("m" + std::to_string(i), 0, wire::MEMBER_STATUS_ALIVE));
  m_.Handle("x:1", Gossip("x", many), now_);
  EXPECT_EQ(m_.rejected().at("too_many_updates"), 1u);
  wire::MembershipMessage no_body;
  no_body.set_sender("x");
  m_.Handle("x:1", no_body, now_);
  EXPECT_EQ(m_.rejected().at("no_body"), 1u);
  EXPECT_EQ(m_.Members().size(), before);
  EXPECT_TRUE(m_.TakeEvents().empty());
  EXPECT_TRUE(m_.TakeOutgoing().empty());
  EXPECT_FALSE(m_.Find("a").has_value());
}

TEST_F(MembershipTest, UnknownAcksAndStrangersPingReqsAreRejected) {
  wire::MembershipMessage ack;
  ack.set_sender("x");
  ack.mutable_ack()->set_seq(12345);
  m_.Handle("x:1", ack, now_);
  EXPECT_EQ(m_.rejected().at("unknown_ack"), 1u);
  wire::MembershipMessage req;
  req.set_sender("stranger");
  req.mutable_ping_req()->set_seq(1);
  req.mutable_ping_req()->set_target("victim");
  req.mutable_ping_req()->set_target_address("victim:1");
  m_.Handle("s:1", req, now_);
  EXPECT_EQ(m_.rejected().at("unknown_sender"), 1u);
  EXPECT_TRUE(m_.TakeOutgoing().empty());
  // A ping meant for another name is not acked.
  wire::MembershipMessage ping;
  ping.set_sender("x");
  ping.mutable_ping()->set_seq(3);
  ping.mutable_ping()->set_target("someone-else");
  m_.Handle("x:1", ping, now_);
  EXPECT_EQ(m_.rejected().at("target"), 1u);
  EXPECT_TRUE(m_.TakeOutgoing().empty());
}

TEST_F(MembershipTest, PingReqRelaysAreBoundedAndRelayed) {
  Apply({Update("peer", 0, wire::MEMBER_STATUS_ALIVE), Update("t", 0, wire::MEMBER_STATUS_ALIVE)});
  m_.TakeOutgoing();
  for (size_t i = 0; i < Membership::kMaxRelays + 50; ++i) {
    wire::MembershipMessage req;
    req.set_sender("peer");
    req.mutable_ping_req()->set_seq(1000 + i);
    req.mutable_ping_req()->set_target("t");
    req.mutable_ping_req()->set_target_address("ignored:9");
    m_.Handle("peer:1", req, now_);
  }
  auto out = m_.TakeOutgoing();
  EXPECT_EQ(out.size(), Membership::kMaxRelays);
  EXPECT_EQ(m_.rejected().at("relays_full"), 50u);
  ASSERT_TRUE(out[0].msg->has_ping());
  EXPECT_EQ(out[0].to, "t:1");  // the address this node knows, not the requester's
  EXPECT_EQ(out[0].msg->ping().target(), "t");
  // The target's ack is relayed to the requester with the requester's seq.
  wire::MembershipMessage ack;
  ack.set_sender("t");
  ack.mutable_ack()->set_seq(out[0].msg->ping().seq());
  m_.Handle("t:1", ack, now_);
  auto relayed = m_.TakeOutgoing();
  ASSERT_EQ(relayed.size(), 1u);
  EXPECT_EQ(relayed[0].to, "peer:1");
  EXPECT_EQ(relayed[0].msg->ack().seq(), 1000u);
  // Relays expire after the probe timeout.
  m_.Tick(now_ + m_.config().probe_timeout);
  m_.Handle("peer:1", [] {
    wire::MembershipMessage req;
    req.set_sender("peer");
    req.mutable_ping_req()->set_seq(1);
    req.mutable_ping_req()->set_target("t");
    req.mutable_ping_req()->set_target_address("t:1");
    return req;
  }(), now_ + m_.config().probe_timeout);
  EXPECT_EQ(m_.rejected().at("relays_full"), 50u);
}

// Compact frames: only to members that say they take them, by datagram,
// from a node that takes them too. A member's bit comes with its record as
// its address does (first record, then new incarnations only), and from its
// own word whatever the incarnation: each message says what its sender takes
// (compact, or MembershipMessage.features; an older build says nothing).
TEST(Membership, CompactFramesGoOnlyToMembersThatSayTheyTakeThem) {
  constexpr uint32_t kCompact = kMemberFeatureCompactFrames;
  auto ping_from = [](const std::string& sender, uint32_t features, bool reliable = false) {
    wire::MembershipMessage m;
    m.set_sender(sender);
    m.set_features(features);
    m.mutable_ping()->set_seq(42);
    m.mutable_ping()->set_target("self");
    m.mutable_ping()->set_reliable(reliable);
    return m;
  };
  auto announced = [](const std::string& name, uint64_t inc, uint32_t features) {
    wire::MemberUpdate u = Update(name, inc, wire::MEMBER_STATUS_ALIVE);
    u.set_features(features);
    return u;
  };
  MembershipConfig config = Pump::Config("self", {});
  config.features = kCompact;
  Membership m(config, 7);
  const Time now{0};
  m.Start(now);
  // The answer to each ping, by address: compact or not.
  auto acks = [&m]() {
    std::map<std::string, bool> out;
    for (const Membership::Send& s : m.TakeOutgoing()) {
      if (s.msg->has_ack()) out[s.to] = s.compact;
    }
    return out;
  };
  // The bits this node holds, as its full list (the answer to a join) says.
  auto held = [&]() {
    (void)m.TakeOutgoing();
    wire::MembershipMessage join;
    join.set_sender("z");
    join.mutable_push_pull()->set_join(true);
    *join.mutable_push_pull()->add_members() = announced("z", 0, 0);
    m.Handle("z:1", join, now);
    std::map<std::string, uint32_t> out;
    for (const Membership::Send& s : m.TakeOutgoing()) {
      for (const wire::MemberUpdate& u : s.msg->push_pull().members()) {
        if (u.name() != "z") out[u.name()] = u.features();
      }
    }
    return out;
  };
  using Held = std::map<std::string, uint32_t>;

  m.Handle("x:1", Gossip("x", {announced("a", 1, kCompact), announced("b", 1, 0)}), now);
  EXPECT_EQ(held(), (Held{{"self", kCompact}, {"a", kCompact}, {"b", 0}}));
  m.Handle("a:1", ping_from("a", kCompact), now);
  m.Handle("b:1", ping_from("b", 0), now);
  m.Handle("c:1", ping_from("c", kCompact), now);  // not a member
  EXPECT_EQ(acks(), (std::map<std::string, bool>{{"a:1", true}, {"b:1", false}, {"c:1", false}}));
  m.Handle("a:1", ping_from("a", kCompact, /*reliable=*/true), now);  // by stream: the full form
  EXPECT_EQ(acks(), (std::map<std::string, bool>{{"a:1", false}}));

  // Records: the same incarnation changes nothing, a new one brings its bits.
  m.Handle("x:1", Gossip("x", {Update("a", 1, wire::MEMBER_STATUS_SUSPECT), announced("b", 1, kCompact)}), now);
  EXPECT_EQ(held(), (Held{{"self", kCompact}, {"a", kCompact}, {"b", 0}}));
  m.Handle("x:1", Gossip("x", {announced("a", 2, 0), announced("b", 2, kCompact)}), now);
  EXPECT_EQ(held(), (Held{{"self", kCompact}, {"a", 0}, {"b", kCompact}}));

  // Own word, whatever the incarnation: b restarted into an older build
  // (its messages say nothing), then a compact message from it.
  m.Handle("b:1", ping_from("b", 0), now);
  EXPECT_EQ(acks(), (std::map<std::string, bool>{{"b:1", false}}));
  EXPECT_EQ(held()["b"], 0u);
  wire::MembershipMessage compact_ping = ping_from("b", 0);
  compact_ping.clear_sender();  // the envelope names it
  m.Handle("b:1", "b", compact_ping, now);
  EXPECT_EQ(acks(), (std::map<std::string, bool>{{"b:1", true}}));
  EXPECT_EQ(held()["b"], kCompact);
  // Its own update counts too: a's, piggybacked on a message of a's.
  m.Handle("a:1", Gossip("a", {announced("a", 2, kCompact)}), now);
  EXPECT_EQ(held()["a"], kCompact);
  // A join from b at incarnation 0, from an older build: answered in full.
  wire::MembershipMessage rejoin;
  rejoin.set_sender("b");
  rejoin.mutable_push_pull()->set_join(true);
  *rejoin.mutable_push_pull()->add_members() = announced("b", 0, 0);
  (void)m.TakeOutgoing();
  m.Handle("b:1", rejoin, now);
  size_t replies = 0;
  for (const Membership::Send& s : m.TakeOutgoing()) {
    replies += s.msg->has_push_pull();
    EXPECT_FALSE(s.compact);
  }
  EXPECT_EQ(replies, 1u);
  EXPECT_EQ(held()["b"], 0u);
}

TEST(Membership, ANodeWithoutCompactFramesSendsAndAnnouncesNone) {
  Membership m(Pump::Config("self", {}), 7);
  const Time now{0};
  m.Start(now);
  wire::MemberUpdate a = Update("a", 1, wire::MEMBER_STATUS_ALIVE);
  a.set_features(kMemberFeatureCompactFrames);
  m.Handle("x:1", Gossip("x", {a}), now);
  wire::MembershipMessage ping;
  ping.set_sender("a");
  ping.mutable_ping()->set_seq(1);
  m.Handle("a:1", ping, now);
  size_t sends = 0;
  for (const Membership::Send& s : m.TakeOutgoing()) {
    ++sends;
    EXPECT_FALSE(s.compact);
    for (const wire::MemberUpdate& u : s.msg->updates()) {
      if (u.name() == "self") {
        EXPECT_EQ(u.features(), 0u);
      }
    }
  }
  EXPECT_GT(sends, 0u);
}

// The probe numbers of a node with compact frames fit 3 bytes for years
// (21-bit start, one or a few per probe interval); without, they are 64-bit.
TEST(Membership, CompactFramesStartProbeNumbersSmall) {
  for (const bool compact : {false, true}) {
    MembershipConfig config = Pump::Config("self", {});
    config.features = compact ? kMemberFeatureCompactFrames : 0;
    uint64_t largest = 0;
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      Membership m(config, seed);
      Time now{0};
      m.Start(now);
      m.Handle("x:1", Gossip("x", {Update("a", 1, wire::MEMBER_STATUS_ALIVE)}), now);
      for (int i = 0; i < 5; ++i) {
        now += config.probe_interval;
        m.Tick(now);
        for (const Membership::Send& s : m.TakeOutgoing()) {
          if (s.msg->has_ping()) largest = std::max(largest, s.msg->ping().seq());
        }
      }
    }
    if (compact) {
      EXPECT_LT(largest, (uint64_t{1} << 21) + 5) << "20 seeds, 5 probes each";
    } else {
      EXPECT_GT(largest, uint64_t{1} << 40);
    }
  }
}

TEST(Membership, TableIsBoundedAndEvictsDeadFirst) {
  MembershipConfig c = Pump::Config("self", {});
  c.max_members = 8;
  Membership m(c, 1);
  m.Start(Time{0});
  std::vector<wire::MemberUpdate> list;
  for (int i = 0; i < 8; ++i) list.push_back(Update("m" + std::to_string(i), 0, wire::MEMBER_STATUS_ALIVE));
  m.Handle("p:1", PushPull("m0", list, true), Time{0});
  EXPECT_EQ(m.Members().size(), 8u);
  EXPECT_EQ(m.rejected().at("table_full"), 1u);
  m.Handle("p:1", Gossip("m0", {Update("m1", 0, wire::MEMBER_STATUS_DEAD)}), Time{1});
  m.Handle("p:1", Gossip("m0", {Update("new", 0, wire::MEMBER_STATUS_ALIVE)}), Time{2});
  EXPECT_EQ(m.Members().size(), 8u);
  EXPECT_TRUE(m.Find("new").has_value());
  EXPECT_FALSE(m.Find("m1").has_value());
  // A full list larger than the table is refused outright.
  std::vector<wire::MemberUpdate> huge;
  for (int i = 0; i < 9; ++i) huge.push_back(Update("h" + std::to_string(i), 0, wire::MEMBER_STATUS_ALIVE));
  m.Handle("p:1", PushPull("m0", huge, false), Time{3});
  EXPECT_EQ(m.rejected().at("too_many_updates"), 1u);
  EXPECT_FALSE(m.Find("h0").has_value());
}

TEST(Membership, JoinRetriesSeedsUntilAnswered) {
  Membership m(Pump::Config("j", {"a:1", "j:7946", "b:1", "a:1"}), 3);
  m.Start(Time{0});
  auto out = m.TakeOutgoing();
  ASSERT_EQ(out.size(), 2u);  // self and the duplicate skipped
  EXPECT_EQ(out[0].to, "a:1");
  EXPECT_EQ(out[1].to, "b:1");
  ASSERT_TRUE(out[0].msg->has_push_pull());
  EXPECT_TRUE(out[0].msg->push_pull().join());
  ASSERT_EQ(out[0].msg->push_pull().members_size(), 1);
  EXPECT_EQ(out[0].msg->push_pull().members(0).name(), "j");
  EXPECT_FALSE(m.joined());
  Time t{0};
  int joins = 0;
  for (int i = 0; i < 50; ++i) {
    t = m.NextWakeup();
    m.Tick(t);
    for (const auto& s : m.TakeOutgoing()) joins += s.msg->has_push_pull() && s.msg->push_pull().join();
  }
  EXPECT_GE(joins, 2 * 5);  // every probe interval, both seeds
  EXPECT_LE(t, Time{0} + 15s);
  m.Handle("a:1", PushPull("a", {Update("a", 0, wire::MEMBER_STATUS_ALIVE)}, true), t);
  EXPECT_TRUE(m.joined());
  EXPECT_EQ(m.LivePeers(), std::vector<Address>{"a:1"});
  joins = 0;
  for (int i = 0; i < 30; ++i) {
    t = m.NextWakeup();
    m.Tick(t);
    for (const auto& s : m.TakeOutgoing()) joins += s.msg->has_push_pull() && s.msg->push_pull().join();
  }
  EXPECT_EQ(joins, 0);
}

TEST(Membership, LeaveAnnouncesAndStopsProbing) {
  Membership m(Pump::Config("l", {}), 3);
  m.Start(Time{0});
  for (const char* n : {"a", "b", "c"}) {
    m.Handle("a:1", Gossip("a", {Update(n, 0, wire::MEMBER_STATUS_ALIVE)}), Time{0});
  }
  m.TakeOutgoing();
  m.Leave(Time{1});
  EXPECT_TRUE(m.left());
  EXPECT_EQ(m.incarnation(), 1u);
  EXPECT_EQ(m.LiveCount(), 3u);
  auto out = m.TakeOutgoing();
  ASSERT_EQ(out.size(), 3u);  // every live member hears it at once
  for (const auto& s : out) {
    bool has_leave = false;
    for (const auto& u : s.msg->updates()) has_leave |= u.name() == "l" && u.status() == wire::MEMBER_STATUS_LEFT;
    EXPECT_TRUE(has_leave) << s.to;
  }
  // Accusations after leaving are not refuted; no probes are sent.
  m.Handle("a:1", Gossip("a", {Update("l", 1, wire::MEMBER_STATUS_DEAD)}), Time{2});
  EXPECT_EQ(m.incarnation(), 1u);
  Time t{2};
  for (int i = 0; i < 100; ++i) {
    t = std::max(t, m.NextWakeup());
    ASSERT_LT(t, Time::max());
    m.Tick(t);
    for (const auto& s : m.TakeOutgoing()) {
      EXPECT_FALSE(s.msg->has_ping());
      EXPECT_FALSE(s.msg->has_ping_req());
      EXPECT_FALSE(s.msg->has_push_pull());
    }
  }
}

// A started Membership that learned `count` alive members (prefix0, prefix1,
// ...) from prefix0's full-state list; what that made it send is dropped.
std::unique_ptr<Membership> WithMembers(const MembershipConfig& c, const std::string& prefix, int count) {
  auto m = std::make_unique<Membership>(c, 5);
  m->Start(Time{0});
  std::vector<wire::MemberUpdate> list;
  for (int i = 0; i < count; ++i) list.push_back(Update(prefix + std::to_string(i), 0, wire::MEMBER_STATUS_ALIVE));
  m->Handle(prefix + "0:1", PushPull(prefix + "0", list, true), Time{0});
  m->TakeOutgoing();
  return m;
}

// Ticks `m` at its wakeups `ticks` times and shows every message it sends to
// `sent`; every probe is acked, so nobody is suspected.
template <class Sent>
void TickAckingProbes(Membership& m, int ticks, Sent&& sent) {
  for (int i = 0; i < ticks; ++i) {
    const Time t = m.NextWakeup();
    m.Tick(t);
    for (const auto& s : m.TakeOutgoing()) {
      sent(*s.msg);
      if (s.msg->has_ping()) {
        wire::MembershipMessage ack;
        ack.set_sender(s.msg->ping().target());
        ack.mutable_ack()->set_seq(s.msg->ping().seq());
        m.Handle(s.to, ack, t);
      }
    }
  }
}

TEST(Membership, PiggybackIsBoundedAndRetransmitsAreLimited) {
  MembershipConfig c = Pump::Config("s", {});
  c.max_piggyback = 4;
  std::unique_ptr<Membership> m = WithMembers(c, "m", 20);
  std::map<std::string, int> sent;
  TickAckingProbes(*m, 400, [&](const wire::MembershipMessage& msg) {
    EXPECT_LE(msg.updates_size(), 4);
    for (const auto& u : msg.updates()) ++sent[u.name()];
  });
  const int limit = static_cast<int>(std::ceil(3 * std::log10(21.0 + 1))) + 1;
  EXPECT_EQ(sent.size(), 21u);  // every member's update and self's went out
  for (const auto& [name, n] : sent) {
    EXPECT_GE(n, 1) << name;
    EXPECT_LE(n, limit) << name;
  }
}

TEST(Membership, PiggybackFillsTheByteBudgetAndNoMore) {
  MembershipConfig c = Pump::Config("s", {});
  c.max_piggyback_bytes = 400;
  std::unique_ptr<Membership> m = WithMembers(c, "member-", 60);
  size_t most = 0;
  TickAckingProbes(*m, 50, [&](const wire::MembershipMessage& msg) {
    if (msg.has_push_pull()) return;
    EXPECT_LE(msg.ByteSizeLong(), c.max_piggyback_bytes);
    most = std::max(most, static_cast<size_t>(msg.updates_size()));
  });
  // ~25 bytes an update: a 400-byte budget carries well over the old fixed 8.
  EXPECT_GE(most, 12u);
}

// An update bigger than the whole budget (255-byte name and address) still
// goes out, alone, and does not hold back the updates queued behind it.
TEST(Membership, OversizeUpdateIsSentAndDoesNotBlockTheQueue) {
  MembershipConfig c = Pump::Config("s", {});
  c.max_piggyback_bytes = 120;
  std::unique_ptr<Membership> m = WithMembers(c, "m", 10);
  wire::MemberUpdate big;
  big.set_name(std::string(255, 'b'));
  big.set_address(std::string(255, 'a'));
  big.set_status(wire::MEMBER_STATUS_ALIVE);
  m->Handle("m0:1", Gossip("m0", {big}), Time{0});
  m->TakeOutgoing();
  std::map<std::string, int> sent;
  TickAckingProbes(*m, 300, [&](const wire::MembershipMessage& msg) {
    for (const auto& u : msg.updates()) ++sent[u.name()];
  });
  EXPECT_GE(sent[big.name()], 1);
  for (int i = 0; i < 10; ++i) EXPECT_GE(sent["m" + std::to_string(i)], 2) << i;
}

// When the piggyback queue's order numbers run out they are renumbered in
// place: a node that renumbers (several times here) sends exactly what an
// identical node that did not sends, updates in the same order.
TEST(Membership, RenumberingThePiggybackQueueKeepsItsOrder) {
  MembershipConfig c = Pump::Config("s", {});
  c.max_piggyback = 3;  // the queue drains slowly: it is long when renumbered
  std::unique_ptr<Membership> plain = WithMembers(c, "m", 30);
  std::unique_ptr<Membership> renumbered = WithMembers(c, "m", 30);
  std::vector<std::string> sent_plain, sent_renumbered;
  int joins = 0;
  for (int round = 0; round < 40; ++round) {
    if (round % 10 == 0) renumbered->ExhaustQueueOrderForTesting(3);
    // Two newcomers a round: Enqueues, some of them past the renumbering.
    for (int k = 0; k < 2; ++k, ++joins) {
      const wire::MembershipMessage gossip =
          Gossip("m1", {Update("new" + std::to_string(joins), 0, wire::MEMBER_STATUS_ALIVE)});
      const Time t = plain->NextWakeup();
      plain->Handle("m1:1", gossip, t);
      renumbered->Handle("m1:1", gossip, t);
    }
    TickAckingProbes(*plain, 3, [&](const wire::MembershipMessage& msg) { sent_plain.push_back(msg.SerializeAsString()); });
    TickAckingProbes(*renumbered, 3,
                     [&](const wire::MembershipMessage& msg) { sent_renumbered.push_back(msg.SerializeAsString()); });
  }
  size_t updates = 0;
  for (const std::string& s : sent_plain) {
    wire::MembershipMessage msg;
    ASSERT_TRUE(msg.ParseFromString(s));
    updates += static_cast<size_t>(msg.updates_size());
  }
  EXPECT_GT(updates, 200u);  // the queue was busy throughout
  ASSERT_EQ(sent_plain.size(), sent_renumbered.size());
  for (size_t i = 0; i < sent_plain.size(); ++i) EXPECT_EQ(sent_plain[i], sent_renumbered[i]) << "message " << i;
}

TEST(Membership, PushPullPeriodScalesPastThirtyTwoMembers) {
  const auto scale_with = [](int others) {
    Membership m(Pump::Config("self", {}), 1);
    m.Start(Time{0});
    std::vector<wire::MemberUpdate> list;
    for (int i = 0; i < others; ++i) list.push_back(Update("m" + std::to_string(i), 0, wire::MEMBER_STATUS_ALIVE));
    if (others > 0) m.Handle("m0:1", PushPull("m0", list, true), Time{0});
    EXPECT_EQ(m.LiveCount(), static_cast<size_t>(others + 1));
    return m.PushPullScale();
  };
  EXPECT_EQ(scale_with(0), 1u);
  EXPECT_EQ(scale_with(31), 1u);   // 32 live
  EXPECT_EQ(scale_with(32), 2u);   // 33 live: ceil(log2(33/32)) + 1
  EXPECT_EQ(scale_with(63), 2u);   // 64
  EXPECT_EQ(scale_with(64), 3u);   // 65
  EXPECT_EQ(scale_with(999), 6u);  // 1000: ceil(4.97) + 1
}

// The O(1) live set (live_peer_count / LivePeerAddress / LiveAddressOf) always
// lists exactly the members LivePeers() derives from the table, through
// joins, suspicions, deaths, refutations, leaves and evictions.
TEST(Membership, LiveSetMatchesTheTableUnderRandomUpdates) {
  MembershipConfig c = Pump::Config("self", {});
  c.max_members = 24;  // small enough that evictions happen
  Membership m(c, 9);
  Time t{0};
  m.Start(t);
  Rng rng(42);
  const wire::MemberStatus statuses[] = {wire::MEMBER_STATUS_ALIVE, wire::MEMBER_STATUS_SUSPECT,
                                         wire::MEMBER_STATUS_DEAD, wire::MEMBER_STATUS_LEFT};
  std::vector<uint64_t> incarnation(40, 0);
  // What an owner caching on view_version() relies on: while it stays the
  // same, so do every liveness answer and every other member's entry.
  auto answers = [&m, &incarnation] {
    std::vector<std::string> out;
    for (size_t who = 0; who < incarnation.size(); ++who) {
      const std::string name = "n" + std::to_string(who);
      const Address* a = m.LiveAddressOf(name);
      out.push_back(name + (a ? "=" + *a : "") + (m.IsAlive(name) ? " alive" : ""));
    }
    out.push_back(m.SmallestLivePeer() ? *m.SmallestLivePeer() : "none");
    for (const MemberInfo& info : m.Members()) {
      if (info.name == "self") continue;
      out.push_back(absl::StrCat(info.name, "/", info.incarnation, "/", static_cast<int>(info.state), "@", info.address));
    }
    return out;
  };
  std::vector<std::string> seen = answers();
  uint64_t version = m.view_version();
  int version_moves = 0, version_stills = 0;
  for (int step = 0; step < 3000; ++step) {
    const size_t who = rng.Below(incarnation.size());
    incarnation[who] += rng.Below(2);
    const std::string name = "n" + std::to_string(who);
    wire::MemberUpdate u = Update(name, incarnation[who], statuses[rng.Below(4)]);
    u.set_address(name + ":" + std::to_string(1 + incarnation[who] % 3));  // moves with a newer incarnation
    m.Handle("n0:1", Gossip("n0", {u}), t);
    if (rng.Below(8) == 0) {
      t += 700ms;
      m.Tick(t);  // probes lapse, suspicions expire
    }
    m.TakeOutgoing();
    if (m.view_version() == version) {
      ASSERT_EQ(answers(), seen) << "view_version unchanged at step " << step;
      ++version_stills;
    } else {
      version = m.view_version();
      seen = answers();
      ++version_moves;
    }
    std::vector<Address> listed;
    for (size_t i = 0; i < m.live_peer_count(); ++i) listed.push_back(m.LivePeerAddress(i));
    std::sort(listed.begin(), listed.end());
    ASSERT_EQ(listed, m.LivePeers()) << "step " << step;
    size_t dead = 0;
    std::string smallest;  // Members() is sorted: the first live one
    for (const MemberInfo& info : m.Members()) {
      if (info.name == "self") continue;
      const bool live = info.state == MemberState::kAlive || info.state == MemberState::kSuspect;
      ASSERT_EQ(m.LiveAddressOf(info.name) != nullptr, live) << info.name << " step " << step;
      dead += info.state == MemberState::kDead ? 1 : 0;
      if (live && smallest.empty()) smallest = info.name;
    }
    ASSERT_EQ(m.dead_count(), dead) << "step " << step;
    ASSERT_EQ(m.SmallestLivePeer() ? *m.SmallestLivePeer() : "", smallest) << "step " << step;
  }
  EXPECT_GT(version_moves, 100);  // the check above ran both ways
  EXPECT_GT(version_stills, 100);
  EXPECT_EQ(m.LiveAddressOf("self"), nullptr);
  EXPECT_EQ(m.LiveAddressOf("never-seen"), nullptr);
}

TEST(Membership, ProbeTimeoutLeadsToIndirectThenSuspicion) {
  Membership m(Pump::Config("p", {}), 11);
  m.Start(Time{0});
  for (const char* n : {"a", "b", "c", "d"}) {
    m.Handle("a:1", Gossip("a", {Update(n, 0, wire::MEMBER_STATUS_ALIVE)}), Time{0});
  }
  m.TakeOutgoing();
  std::string target;
  Time t{0};
  for (int i = 0; i < 20 && target.empty(); ++i) {
    t = m.NextWakeup();
    m.Tick(t);
    for (const auto& s : m.TakeOutgoing()) {
      if (s.msg->has_ping()) target = s.msg->ping().target();
    }
  }
  ASSERT_FALSE(target.empty());
  const Time probe_start = t;
  m.Tick(probe_start + m.config().probe_timeout);
  int reqs = 0, stream_pings = 0;
  for (const auto& s : m.TakeOutgoing()) {
    if (s.msg->has_ping()) {
      // The reliable fallback: the same probe, by stream, to the target itself.
      ++stream_pings;
      EXPECT_TRUE(s.reliable);
      EXPECT_TRUE(s.msg->ping().reliable());
      EXPECT_EQ(s.msg->ping().target(), target);
      EXPECT_EQ(s.to, target + ":1");
      continue;
    }
    if (!s.msg->has_ping_req()) continue;
    EXPECT_FALSE(s.reliable);
    ++reqs;
    EXPECT_EQ(s.msg->ping_req().target(), target);
    EXPECT_NE(s.to, target + ":1");
  }
  EXPECT_EQ(reqs, 3);
  EXPECT_EQ(stream_pings, 1);
  m.Tick(probe_start + m.config().probe_interval);
  EXPECT_EQ(m.Find(target)->state, MemberState::kSuspect);
}

// The target's ack to the stream ping ends the probe: no suspicion. And a
// member answers a reliable ping by stream, an ordinary one by datagram.
TEST(Membership, ReliableFallbackPingIsAnsweredByStreamAndSparesTheTarget) {
  for (const bool fallback : {true, false}) {
    MembershipConfig c = Pump::Config("p", {});
    c.reliable_fallback_ping = fallback;
    Membership m(c, 11);
    m.Start(Time{0});
    m.Handle("a:1", Gossip("a", {Update("a", 0, wire::MEMBER_STATUS_ALIVE)}), Time{0});
    m.TakeOutgoing();
    Time t{0};
    std::optional<Membership::Send> ping;
    for (int i = 0; i < 20 && !ping; ++i) {
      t = m.NextWakeup();
      m.Tick(t);
      for (auto& s : m.TakeOutgoing()) {
        if (s.msg->has_ping()) ping = std::move(s);
      }
    }
    ASSERT_TRUE(ping.has_value());
    EXPECT_FALSE(ping->reliable);  // the direct probe is a datagram
    m.Tick(t + m.config().probe_timeout);
    std::optional<Membership::Send> stream_ping;
    for (auto& s : m.TakeOutgoing()) {
      if (s.msg->has_ping()) stream_ping = std::move(s);
    }
    ASSERT_EQ(stream_ping.has_value(), fallback);
    if (fallback) {
      // The target's side: a reliable ping gets its ack by stream.
      Membership a(Pump::Config("a", {}), 12);
      a.Start(Time{0});
      a.Handle("p:1", *stream_ping->msg, t + m.config().probe_timeout);
      std::vector<Membership::Send> acks = a.TakeOutgoing();
      ASSERT_EQ(acks.size(), 1u);
      ASSERT_TRUE(acks[0].msg->has_ack());
      EXPECT_TRUE(acks[0].reliable);
      m.Handle("a:1", *acks[0].msg, t + m.config().probe_timeout + 1ms);
      EXPECT_FALSE(m.Find("a")->probe_rtt.has_value());  // not the direct ping's round trip
      // An ordinary ping gets its ack by datagram.
      a.Handle("p:1", *ping->msg, t + m.config().probe_timeout);
      std::vector<Membership::Send> plain = a.TakeOutgoing();
      ASSERT_EQ(plain.size(), 1u);
      EXPECT_FALSE(plain[0].reliable);
    }
    m.Tick(t + m.config().probe_interval);
    EXPECT_EQ(m.Find("a")->state, fallback ? MemberState::kAlive : MemberState::kSuspect);
  }
}

TEST(Membership, TickAlwaysMovesTheWakeupForward) {
  Membership m(Pump::Config("w", {"seed:1"}), 2);
  m.Start(Time{0});
  Time t{0};
  for (int i = 0; i < 1000; ++i) {
    Time next = m.NextWakeup();
    ASSERT_LT(next, Time::max());
    t = std::max(t, next);
    m.Tick(t);
    ASSERT_GT(m.NextWakeup(), t);
    m.TakeOutgoing();
  }
}

TEST_F(MembershipTest, DirectAckRecordsProbeRoundTrip) {
  Apply({Update("peer", 0, wire::MEMBER_STATUS_ALIVE)});
  EXPECT_FALSE(m_.Find("peer")->probe_rtt.has_value());
  EXPECT_FALSE(m_.Find("self")->probe_rtt.has_value());
  // Tick until the ping to "peer" goes out.
  std::optional<uint64_t> seq;
  Time sent{0};
  for (int i = 0; i < 10 && !seq; ++i) {
    now_ = m_.NextWakeup();
    m_.Tick(now_);
    for (const auto& s : m_.TakeOutgoing()) {
      if (s.to == "peer:1" && s.msg->has_ping()) {
        seq = s.msg->ping().seq();
        sent = now_;
      }
    }
  }
  ASSERT_TRUE(seq.has_value());
  // An ack with another seq matches nothing and records nothing.
  wire::MembershipMessage wrong;
  wrong.set_sender("peer");
  wrong.mutable_ack()->set_seq(*seq + 1000);
  m_.Handle("peer:1", wrong, sent + 5ms);
  EXPECT_FALSE(m_.Find("peer")->probe_rtt.has_value());
  wire::MembershipMessage ack;
  ack.set_sender("peer");
  ack.mutable_ack()->set_seq(*seq);
  m_.Handle("peer:1", ack, sent + 37ms);
  ASSERT_TRUE(m_.Find("peer")->probe_rtt.has_value());
  EXPECT_EQ(*m_.Find("peer")->probe_rtt, Duration(37ms));
  // Members() carries the same value; a repeated ack changes nothing.
  m_.Handle("peer:1", ack, sent + 90ms);
  for (const MemberInfo& mi : m_.Members()) {
    if (mi.name == "peer") {
      ASSERT_TRUE(mi.probe_rtt.has_value());
      EXPECT_EQ(*mi.probe_rtt, Duration(37ms));
    } else {
      EXPECT_FALSE(mi.probe_rtt.has_value());
    }
  }
}

TEST(Membership, ProbeRoundTripsArePlausibleInThePump) {
  // The pump delays each message by 1 ms + [0, 20) ms, so a direct probe's
  // round trip is within [2 ms, 42 ms) of virtual time.
  Pump pump(11);
  const std::vector<std::string> names = {"a", "b", "c", "d"};
  for (const std::string& n : names) pump.Add(n, {Pump::AddressOf(names[0])});
  for (const std::string& n : names) pump.Start(n);
  auto all_have_rtt = [&] {
    for (const std::string& n : names) {
      for (const MemberInfo& mi : pump.node(n).Members()) {
        if (mi.name != n && !mi.probe_rtt) return false;
      }
      if (pump.node(n).Members().size() != names.size()) return false;
    }
    return true;
  };
  ASSERT_TRUE(pump.RunFor(120s, all_have_rtt));
  pump.RunFor(10s);
  for (const std::string& n : names) {
    for (const MemberInfo& mi : pump.node(n).Members()) {
      if (mi.name == n) {
        EXPECT_FALSE(mi.probe_rtt.has_value());
        continue;
      }
      ASSERT_TRUE(mi.probe_rtt.has_value()) << n << " -> " << mi.name;
      EXPECT_GE(*mi.probe_rtt, Duration(2ms)) << n << " -> " << mi.name;
      EXPECT_LT(*mi.probe_rtt, Duration(42ms)) << n << " -> " << mi.name;
    }
  }
}

}  // namespace
}  // namespace pollen::node
