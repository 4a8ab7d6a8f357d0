// Lifeguard in Membership (membership.h): the local health score and the
// probe timing it stretches, nacks from ping-req helpers, suspicion timeouts
// that shrink with distinct accusers, and the stall guard. Each test also
// checks that plain SWIM (lifeguard = false) behaves as before where it differs.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "node/core/membership.h"
#include "tests/membership/messages.h"
#include "tests/membership/pump.h"

namespace pollen::node {
namespace {

using namespace std::chrono_literals;
using testing::Pump;

using testing::Gossip;
using testing::Update;

wire::MembershipMessage Body(const std::string& sender) {
  wire::MembershipMessage m;
  m.set_sender(sender);
  return m;
}

const std::vector<std::string> kPeers = {"a", "b", "c", "d", "e"};

// "self" with five alive peers: LiveCount() 6, so K = 4 - 2 = 2.
Membership MakeMember(bool lifeguard) {
  MembershipConfig c = Pump::Config("self", {});
  c.lifeguard = lifeguard;
  Membership m(std::move(c), 11);
  m.Start(Time{0});
  for (const std::string& p : kPeers) m.Handle(p + ":1", Gossip(p, {Update(p, 0, wire::MEMBER_STATUS_ALIVE)}), Time{0});
  m.TakeOutgoing();
  m.TakeEvents();
  return m;
}

struct SentProbe {
  std::string target;
  uint64_t seq = 0;
  Time at{0};
};

// Ticks at each wakeup from `t` until a ping goes out (at most 50 wakeups).
std::optional<SentProbe> NextPing(Membership& m, Time& t) {
  for (int i = 0; i < 50; ++i) {
    t = std::max(t, m.NextWakeup());
    m.Tick(t);
    for (const auto& s : m.TakeOutgoing()) {
      if (s.msg->has_ping()) return SentProbe{s.msg->ping().target(), s.msg->ping().seq(), t};
    }
  }
  return std::nullopt;
}

// Ticks at the probe timeout; returns the helpers asked to ping the target.
std::vector<std::string> Indirect(Membership& m, const SentProbe& p) {
  m.Tick(p.at + m.ProbeTimeout());
  std::vector<std::string> helpers;
  for (const auto& s : m.TakeOutgoing()) {
    if (s.msg->has_ping_req()) helpers.push_back(s.to.substr(0, s.to.find(':')));
  }
  return helpers;
}

// Ticks at every wakeup up to `until` and then at `until`, so that no tick is
// late (a late one is a stall). Every ping is answered at once. Returns what
// was sent.
std::vector<Membership::Send> RunTo(Membership& m, Time until) {
  std::vector<Membership::Send> sent;
  for (int i = 0; i < 100'000; ++i) {
    const Time at = std::min(m.NextWakeup(), until);
    m.Tick(at);
    for (auto& s : m.TakeOutgoing()) {
      if (s.msg->has_ping()) {
        wire::MembershipMessage ack = Body(s.msg->ping().target());
        ack.mutable_ack()->set_seq(s.msg->ping().seq());
        m.Handle(s.to, ack, at);
      }
      sent.push_back(std::move(s));
    }
    if (at == until) break;
  }
  return sent;
}

wire::MembershipMessage Nack(const std::string& helper, uint64_t seq) {
  wire::MembershipMessage n = Body(helper);
  n.mutable_nack()->set_seq(seq);
  return n;
}

TEST(Lifeguard, MissingNacksRaiseTheHealthScoreWhichStretchesProbing) {
  Membership m = MakeMember(true);
  Time t{0};
  auto probe = NextPing(m, t);
  ASSERT_TRUE(probe);
  const std::vector<std::string> helpers = Indirect(m, *probe);
  ASSERT_EQ(helpers.size(), 3u);
  // One helper nacks (twice: a duplicated datagram counts once); two are silent.
  m.Handle(helpers[0] + ":1", Nack(helpers[0], probe->seq), probe->at + 500ms);
  m.Handle(helpers[0] + ":1", Nack(helpers[0], probe->seq), probe->at + 500ms);
  EXPECT_EQ(m.health_score(), 0u);
  // The verdict comes with the next probe: suspect, and two missing nacks.
  t = probe->at + 500ms;
  auto second = NextPing(m, t);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->at, probe->at + 1s);
  EXPECT_EQ(m.Find(probe->target)->state, MemberState::kSuspect);
  EXPECT_EQ(m.health_score(), 2u);
  EXPECT_EQ(m.ProbeInterval(), 3s);
  EXPECT_EQ(m.ProbeTimeout(), 1200ms);
  // Indirect probes wait for the stretched timeout.
  m.Tick(second->at + 400ms);
  for (const auto& s : m.TakeOutgoing()) EXPECT_FALSE(s.msg->has_ping_req());
  // The second target answers: -1, and the next probe is 3 s after the second.
  wire::MembershipMessage ack = Body(second->target);
  ack.mutable_ack()->set_seq(second->seq);
  m.Handle(second->target + ":1", ack, second->at + 10ms);
  t = second->at + 10ms;
  auto third = NextPing(m, t);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->at, second->at + 3s);
  EXPECT_EQ(m.health_score(), 1u);
  EXPECT_EQ(m.ProbeInterval(), 2s);
}

TEST(Lifeguard, FullyNackedFailureCostsNothingAndTheScoreIsBounded) {
  Membership m = MakeMember(true);
  Time t{0};
  auto probe = NextPing(m, t);
  ASSERT_TRUE(probe);
  for (const std::string& h : Indirect(m, *probe)) m.Handle(h + ":1", Nack(h, probe->seq), probe->at + 500ms);
  t = probe->at + 500ms;
  ASSERT_TRUE(NextPing(m, t));
  EXPECT_EQ(t, probe->at + 1s);
  EXPECT_EQ(m.health_score(), 0u);  // the helpers could not reach it either: the target's fault
  // A nack that matches no probe (late, or from a member not asked) changes nothing.
  m.Handle("a:1", Nack("a", probe->seq), t);
  EXPECT_EQ(m.rejected().at("unknown_nack"), 1u);
  // Refutations add up, but never past max_health_multiplier - 1.
  for (uint64_t inc = 0; inc < 20; ++inc) {
    m.Handle("a:1", Gossip("a", {Update("self", m.incarnation(), wire::MEMBER_STATUS_SUSPECT, "a")}), t);
  }
  EXPECT_EQ(m.health_score(), m.config().max_health_multiplier - 1);
  EXPECT_EQ(m.ProbeInterval(), 8s);

  Membership swim = MakeMember(false);
  swim.Handle("a:1", Gossip("a", {Update("self", 0, wire::MEMBER_STATUS_SUSPECT, "a")}), Time{0});
  EXPECT_EQ(swim.incarnation(), 1u);  // refuted
  EXPECT_EQ(swim.health_score(), 0u);
}

TEST(Lifeguard, AScoreChangeMidProbeKeepsThatProbesTimeout) {
  Membership m = MakeMember(true);
  Time t{0};
  auto probe = NextPing(m, t);
  ASSERT_TRUE(probe);
  m.Handle("a:1", Gossip("a", {Update("self", m.incarnation(), wire::MEMBER_STATUS_SUSPECT, "a")}),
           probe->at + 100ms);
  ASSERT_EQ(m.health_score(), 1u);
  ASSERT_EQ(m.ProbeTimeout(), 800ms);
  m.TakeOutgoing();
  size_t reqs = 0;
  for (const auto& s : RunTo(m, probe->at + m.config().probe_timeout)) reqs += s.msg->has_ping_req() ? 1 : 0;
  EXPECT_EQ(reqs, 3u);  // at the timeout the probe started with, 400 ms
}

TEST(Lifeguard, OnlyAccusationsCountAsIllHealth) {
  Membership m = MakeMember(true);
  // A previous life of this node, alive at a higher incarnation: refuted, not an accusation.
  m.Handle("a:1", Gossip("a", {Update("self", 5, wire::MEMBER_STATUS_ALIVE)}), Time{0});
  EXPECT_EQ(m.incarnation(), 6u);
  EXPECT_EQ(m.health_score(), 0u);
  m.Handle("a:1", Gossip("a", {Update("self", 6, wire::MEMBER_STATUS_DEAD)}), Time{0});
  EXPECT_EQ(m.incarnation(), 7u);
  EXPECT_EQ(m.health_score(), 1u);
}

TEST(Lifeguard, HelperNacksASilentTargetButRelaysAnAnswer) {
  for (const bool lifeguard : {true, false}) {
    SCOPED_TRACE(lifeguard);
    Membership m = MakeMember(lifeguard);
    auto ping_req = [](uint64_t seq) {
      wire::MembershipMessage r = Body("a");
      r.mutable_ping_req()->set_seq(seq);
      r.mutable_ping_req()->set_target("b");
      r.mutable_ping_req()->set_target_address("b:1");
      return r;
    };
    const Time t0{std::chrono::seconds(10)};
    RunTo(m, t0);
    m.Handle("a:1", ping_req(77), t0);
    m.TakeOutgoing();
    const Duration nack_after = m.config().probe_timeout * 4 / 5;
    for (const auto& s : RunTo(m, t0 + nack_after - 1ns)) EXPECT_FALSE(s.msg->has_nack());
    std::vector<uint64_t> nacks;
    for (const auto& s : RunTo(m, t0 + nack_after)) {
      if (s.msg->has_nack()) {
        EXPECT_EQ(s.to, "a:1");
        nacks.push_back(s.msg->nack().seq());
      }
    }
    EXPECT_EQ(nacks, lifeguard ? std::vector<uint64_t>{77} : std::vector<uint64_t>{});

    // A target that answers in time: its ack is relayed, and no nack follows.
    m.Handle("a:1", ping_req(78), t0);
    uint64_t relay_seq = 0;
    for (const auto& s : m.TakeOutgoing()) {
      if (s.msg->has_ping()) relay_seq = s.msg->ping().seq();
    }
    wire::MembershipMessage ack = Body("b");
    ack.mutable_ack()->set_seq(relay_seq);
    m.Handle("b:1", ack, t0 + 10ms);
    auto out = m.TakeOutgoing();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].msg->ack().seq(), 78u);
    for (const auto& s : RunTo(m, t0 + m.config().probe_timeout)) EXPECT_FALSE(s.msg->has_nack());
  }
}

TEST(Lifeguard, DistinctAccusersShortenTheSuspicionToTheSwimTimeout) {
  Membership m = MakeMember(true);
  const Duration min = m.SuspicionTimeout();
  const Duration max = Duration(static_cast<int64_t>(static_cast<double>(min.count()) * 6.0));
  EXPECT_EQ(m.SuspicionTimeoutAfter(0), max);
  const Duration after_one =
      Duration(static_cast<int64_t>(static_cast<double>(max.count()) -
                                    std::log(2.0) / std::log(3.0) * static_cast<double>((max - min).count())));
  EXPECT_EQ(m.SuspicionTimeoutAfter(1), after_one);
  EXPECT_EQ(m.SuspicionTimeoutAfter(2), min);

  const Time t0{std::chrono::seconds(5)};
  RunTo(m, t0);
  m.Handle("b:1", Gossip("b", {Update("a", 0, wire::MEMBER_STATUS_SUSPECT, "b")}), t0);
  RunTo(m, t0 + min);
  EXPECT_EQ(m.Find("a")->state, MemberState::kSuspect);  // one accuser: not yet
  // The same accuser again, or the accused itself, confirms nothing.
  m.Handle("b:1", Gossip("b", {Update("a", 0, wire::MEMBER_STATUS_SUSPECT, "b")}), t0 + min);
  m.Handle("c:1", Gossip("c", {Update("a", 0, wire::MEMBER_STATUS_SUSPECT, "a")}), t0 + min);
  RunTo(m, t0 + after_one);
  EXPECT_EQ(m.Find("a")->state, MemberState::kSuspect);
  // A second accuser: confirmed once; the deadline is already past, so dead.
  m.Handle("c:1", Gossip("c", {Update("a", 0, wire::MEMBER_STATUS_SUSPECT, "c")}), t0 + after_one);
  RunTo(m, t0 + after_one);
  EXPECT_EQ(m.Find("a")->state, MemberState::kDead);

  // A confirmation is gossiped on with its accuser.
  const Time t1 = t0 + after_one;
  m.Handle("b:1", Gossip("b", {Update("d", 0, wire::MEMBER_STATUS_SUSPECT, "b")}), t1);
  m.Handle("c:1", Gossip("c", {Update("d", 0, wire::MEMBER_STATUS_SUSPECT, "c")}), t1);
  m.Handle("e:1", Gossip("e", {Update("d", 0, wire::MEMBER_STATUS_SUSPECT, "e")}), t1);  // K = 2 reached
  m.Handle("b:1", Gossip("b", {Update("d", 0, wire::MEMBER_STATUS_SUSPECT, "x")}), t1);  // beyond K: ignored
  m.TakeOutgoing();
  wire::MembershipMessage probe = Body("b");
  probe.mutable_ping()->set_seq(1);
  m.Handle("b:1", probe, t1);
  std::string carried;
  for (const auto& s : m.TakeOutgoing()) {
    for (const auto& u : s.msg->updates()) {
      if (u.name() == "d" && u.status() == wire::MEMBER_STATUS_SUSPECT) carried = u.accuser();
    }
  }
  EXPECT_EQ(carried, "e");
  const Duration min_now = m.SuspicionTimeout();  // "a" is dead: one live member fewer
  RunTo(m, t1 + min_now - 1ns);
  EXPECT_EQ(m.Find("d")->state, MemberState::kSuspect);
  RunTo(m, t1 + min_now);
  EXPECT_EQ(m.Find("d")->state, MemberState::kDead);

  Membership swim = MakeMember(false);
  EXPECT_EQ(swim.SuspicionTimeoutAfter(0), swim.SuspicionTimeout());
}

TEST(Lifeguard, FewMembersGetTheSwimTimeoutAtOnce) {
  MembershipConfig c = Pump::Config("self", {});
  Membership m(std::move(c), 3);
  m.Start(Time{0});
  m.Handle("a:1", Gossip("a", {Update("a", 0, wire::MEMBER_STATUS_ALIVE), Update("b", 0, wire::MEMBER_STATUS_ALIVE)}),
           Time{0});
  ASSERT_EQ(m.LiveCount(), 3u);  // below K + 2 = 4: nobody left to confirm
  EXPECT_EQ(m.SuspicionTimeoutAfter(0), m.SuspicionTimeout());
}

TEST(Lifeguard, AStalledNodeJudgesNoProbeAndGivesLapsedSuspicionsAnotherInterval) {
  for (const bool lifeguard : {true, false}) {
    SCOPED_TRACE(lifeguard);
    Membership m = MakeMember(lifeguard);
    Time t{0};
    auto probe = NextPing(m, t);
    ASSERT_TRUE(probe);
    // "e" is suspect, and its deadline falls inside the stall.
    const std::string suspect = probe->target == "e" ? "d" : "e";
    m.Handle("a:1", Gossip("a", {Update(suspect, 0, wire::MEMBER_STATUS_SUSPECT, "a")}), probe->at);
    const Time deadline = probe->at + m.SuspicionTimeoutAfter(0);
    m.TakeOutgoing();
    m.TakeEvents();
    // The node does not run until well past that deadline.
    const Time resumed = deadline + 5s;
    m.Tick(resumed);
    if (!lifeguard) {
      EXPECT_EQ(m.Find(probe->target)->state, MemberState::kSuspect);
      EXPECT_EQ(m.Find(suspect)->state, MemberState::kDead);
      EXPECT_EQ(m.stalls(), 0u);
      continue;
    }
    EXPECT_EQ(m.stalls(), 1u);
    EXPECT_EQ(m.health_score(), 1u);
    EXPECT_EQ(m.Find(probe->target)->state, MemberState::kAlive);  // no verdict on the lost probe
    EXPECT_EQ(m.Find(suspect)->state, MemberState::kSuspect);
    // Its refutation, read from the backlog, clears it.
    m.Handle(suspect + ":1", Gossip(suspect, {Update(suspect, 1, wire::MEMBER_STATUS_ALIVE)}), resumed + 1ms);
    EXPECT_EQ(m.Find(suspect)->state, MemberState::kAlive);
    for (const Event& e : m.TakeEvents()) {
      EXPECT_NE(e.kind, Event::Kind::kMemberSuspect);
      EXPECT_NE(e.kind, Event::Kind::kMemberDead);
    }
    // Ticks on time are not stalls.
    Time on_time = resumed + 1ms;
    for (int i = 0; i < 50; ++i) {
      on_time = std::max(on_time, m.NextWakeup());
      m.Tick(on_time);
      m.TakeOutgoing();
    }
    EXPECT_EQ(m.stalls(), 1u);
  }
}

TEST(Lifeguard, ALapsedSuspicionWithoutRefutationStillEndsInDeath) {
  Membership m = MakeMember(true);
  m.Handle("a:1", Gossip("a", {Update("e", 0, wire::MEMBER_STATUS_SUSPECT, "a")}), Time{0});
  const Time resumed = Time{0} + m.SuspicionTimeoutAfter(0) + 5s;
  m.Tick(resumed);
  ASSERT_EQ(m.stalls(), 1u);
  EXPECT_EQ(m.Find("e")->state, MemberState::kSuspect);
  const Time grace_end = resumed + m.ProbeInterval();
  RunTo(m, grace_end - 1ns);
  EXPECT_EQ(m.Find("e")->state, MemberState::kSuspect);
  RunTo(m, grace_end);
  EXPECT_EQ(m.Find("e")->state, MemberState::kDead);
  EXPECT_EQ(m.stalls(), 1u);
}

TEST(Lifeguard, AnOversizedAccuserIsRejectedWhole) {
  Membership m = MakeMember(true);
  m.Handle("a:1", Gossip("a", {Update("b", 0, wire::MEMBER_STATUS_SUSPECT, std::string(256, 'x'))}), Time{0});
  EXPECT_EQ(m.Find("b")->state, MemberState::kAlive);
  EXPECT_EQ(m.rejected().at("name"), 1u);
}

}  // namespace
}  // namespace pollen::node
