// Whole-cluster behaviour of Membership, driven by the in-test pump (virtual
// time; every bound below is in virtual time and follows from the protocol's
// parameters, not from how fast this machine is).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "tests/membership/pump.h"

namespace pollen::node::testing {
namespace {

std::vector<std::string> Without(std::vector<std::string> v, const std::string& x) {
  v.erase(std::remove(v.begin(), v.end(), x), v.end());
  return v;
}

// Starts `names` (the first is the seed every node joins through) and runs
// until everybody sees everybody alive.
void StartAndConverge(Pump& pump, const std::vector<std::string>& names, Duration bound,
                      bool reliable_fallback_ping = true) {
  for (const std::string& n : names) {
    MembershipConfig c = Pump::Config(n, {Pump::AddressOf(names[0])});
    c.reliable_fallback_ping = reliable_fallback_ping;
    pump.Add(c);
  }
  for (const std::string& n : names) pump.Start(n);
  ASSERT_TRUE(pump.RunFor(bound, [&] { return pump.AllSee(names, names, MemberState::kAlive); }))
      << "no convergence by t=" << pump.now().count();
}

// The time by which a crashed member must be dead everywhere: every live
// member probes every other within two rounds of the randomized round-robin,
// then the suspicion timeout runs, plus dissemination slack.
Duration DetectionBound(const Pump& pump, const std::string& observer, size_t n) {
  const MembershipConfig& c = pump.nodes().at(observer)->config();
  const double timeout = c.suspicion_multiplier * std::log10(static_cast<double>(n) + 1.0);
  return c.probe_interval * (2 * static_cast<int64_t>(n - 1) + 2) +
         Duration(static_cast<int64_t>(timeout * c.probe_interval.count())) + 5s;
}

TEST(MembershipCluster, FiveJoinThroughOneSeedAndStayAlive) {
  Pump pump(1);
  auto names = Names("n", 5);
  StartAndConverge(pump, names, 30s);
  for (const std::string& n : names) {
    EXPECT_TRUE(pump.node(n).joined()) << n;
    EXPECT_EQ(pump.node(n).LiveCount(), 5u) << n;
    EXPECT_EQ(pump.node(n).LivePeers().size(), 4u) << n;
    EXPECT_EQ(pump.node(n).Members().size(), 5u) << n;
  }
  // Each node saw the other four join, once.
  for (const std::string& n : names) {
    EXPECT_EQ(pump.EventsAbout(n, Event::Kind::kMemberJoined).size(), 4u) << n;
  }
  // Without faults nobody is ever suspected.
  pump.RunFor(120s);
  for (const std::string& n : names) {
    EXPECT_TRUE(pump.EventsAbout(n, Event::Kind::kMemberSuspect).empty()) << n;
    EXPECT_TRUE(pump.EventsAbout(n, Event::Kind::kMemberDead).empty()) << n;
  }
  EXPECT_TRUE(pump.AllSee(names, names, MemberState::kAlive));
  // Probes, gossip and periodic push/pull all ran.
  auto by_type = pump.sent_by_type();
  EXPECT_GT(by_type["ping"], 400u);
  EXPECT_GT(by_type["ack"], 400u);
  EXPECT_GT(by_type["push_pull"], 5u);
}

TEST(MembershipCluster, CrashedMemberSuspectedThenDeadEverywhereWithinBound) {
  Pump pump(2);
  auto names = Names("n", 5);
  StartAndConverge(pump, names, 30s);
  pump.RunFor(10s);
  const Time crash = pump.now();
  pump.Stop("n3");
  auto others = Without(names, "n3");
  const Duration bound = DetectionBound(pump, "n0", names.size());
  ASSERT_TRUE(pump.RunFor(bound, [&] { return pump.AllSee(others, {"n3"}, MemberState::kDead); }))
      << "n3 not dead everywhere " << (pump.now() - crash).count() << "ns after the crash";
  // Somebody suspected it first (no direct jump from alive to dead by probing).
  auto suspects = pump.EventsAbout("n3", Event::Kind::kMemberSuspect);
  ASSERT_FALSE(suspects.empty());
  auto deads = pump.EventsAbout("n3", Event::Kind::kMemberDead);
  ASSERT_FALSE(deads.empty());
  EXPECT_LE(suspects.front().at, deads.front().at);
  EXPECT_GE(suspects.front().at, crash);
  // The suspicion lasted at least the suspicion timeout where it started.
  const MembershipConfig& c = pump.node("n0").config();
  const Duration min_timeout =
      Duration(static_cast<int64_t>(c.suspicion_multiplier * std::log10(2.0) * c.probe_interval.count()));
  EXPECT_GE(deads.front().at - suspects.front().at, min_timeout);
  // Nobody else was declared dead, and the survivors see 4 live members.
  for (const std::string& n : others) {
    EXPECT_TRUE(pump.EventsAbout(n, Event::Kind::kMemberDead).empty()) << n;
    EXPECT_EQ(pump.node(n).LiveCount(), 4u);
  }
}

TEST(MembershipCluster, SuspectedMemberRefutesAndStaysAlive) {
  Pump pump(3);
  auto names = Names("n", 5);
  StartAndConverge(pump, names, 30s);
  pump.RunFor(5s);
  // Cut n2 off completely until somebody suspects it, then heal at once.
  pump.SetDrop([](const std::string& from, const std::string& to) { return from == "n2" || to == "n2"; });
  ASSERT_TRUE(pump.RunFor(30s, [&] { return !pump.EventsAbout("n2", Event::Kind::kMemberSuspect).empty(); }));
  pump.SetDrop(nullptr);
  ASSERT_TRUE(pump.RunFor(30s, [&] { return pump.node("n2").incarnation() >= 1 &&
                                            pump.AllSee(names, {"n2"}, MemberState::kAlive); }));
  pump.RunFor(30s);
  EXPECT_TRUE(pump.EventsAbout("n2", Event::Kind::kMemberDead).empty());
  EXPECT_TRUE(pump.AllSee(names, names, MemberState::kAlive));
  for (const std::string& n : Without(names, "n2")) {
    EXPECT_GE(pump.node(n).Find("n2")->incarnation, 1u) << n;
  }
}

TEST(MembershipCluster, InjectedSuspicionIsRefuted) {
  Pump pump(4);
  auto names = Names("n", 4);
  StartAndConverge(pump, names, 30s);
  wire::MembershipMessage msg;
  msg.set_sender("n3");
  msg.mutable_gossip();
  auto* u = msg.add_updates();
  u->set_name("n1");
  u->set_address(Pump::AddressOf("n1"));
  u->set_incarnation(0);
  u->set_status(wire::MEMBER_STATUS_SUSPECT);
  pump.Inject("n3", "n0", msg);
  EXPECT_EQ(pump.node("n0").Find("n1")->state, MemberState::kSuspect);
  ASSERT_TRUE(pump.RunFor(20s, [&] {
    return pump.AllSee(names, {"n1"}, MemberState::kAlive) && pump.node("n0").Find("n1")->incarnation == 1;
  }));
  pump.RunFor(30s);
  EXPECT_TRUE(pump.EventsAbout("n1", Event::Kind::kMemberDead).empty());
  EXPECT_EQ(pump.node("n1").incarnation(), 1u);
  EXPECT_FALSE(pump.EventsAbout("n1", Event::Kind::kMemberAlive).empty());
}

TEST(MembershipCluster, IndirectProbesKeepMemberWithBrokenLinkAlive) {
  Pump pump(5);
  auto names = Names("n", 5);
  StartAndConverge(pump, names, 30s);
  // n0 and n1 cannot talk to each other, but both talk to everybody else.
  pump.SetDrop([](const std::string& a, const std::string& b) {
    return (a == "n0" && b == "n1") || (a == "n1" && b == "n0");
  });
  pump.RunFor(120s);
  EXPECT_TRUE(pump.EventsAbout("n1", Event::Kind::kMemberSuspect).empty());
  EXPECT_TRUE(pump.EventsAbout("n0", Event::Kind::kMemberSuspect).empty());
  EXPECT_TRUE(pump.AllSee(names, names, MemberState::kAlive));
  EXPECT_GT(pump.sent_by_type()["ping_req"], 10u);
}

TEST(MembershipCluster, GracefulLeaveIsLeftEverywhereAndNotResurrected) {
  Pump pump(6);
  auto names = Names("n", 5);
  StartAndConverge(pump, names, 30s);
  pump.RunFor(3s);
  pump.node("n4").Leave(pump.now());
  EXPECT_TRUE(pump.node("n4").left());
  EXPECT_EQ(pump.node("n4").incarnation(), 1u);
  const Time left_at = pump.now();
  pump.RunFor(1s);
  pump.Stop("n4");  // the process exits shortly after leaving
  auto others = Without(names, "n4");
  ASSERT_TRUE(pump.RunFor(10s, [&] { return pump.AllSee(others, {"n4"}, MemberState::kLeft); }));
  pump.RunFor(120s);  // several reconnect and push/pull rounds
  EXPECT_TRUE(pump.AllSee(others, {"n4"}, MemberState::kLeft));
  for (const LoggedEvent& e : pump.events()) {
    if (e.event.subject != "n4" || e.at < left_at) continue;
    EXPECT_NE(e.event.kind, Event::Kind::kMemberAlive);
    EXPECT_NE(e.event.kind, Event::Kind::kMemberJoined);
    EXPECT_NE(e.event.kind, Event::Kind::kMemberDead);
    EXPECT_NE(e.event.kind, Event::Kind::kMemberSuspect);
  }
  for (const std::string& n : others) {
    EXPECT_EQ(pump.node(n).LiveCount(), 4u) << n;
    EXPECT_EQ(pump.node(n).Find("n4")->incarnation, 1u) << n;
  }
}

// Splits `n` nodes into the first `side_a` and the rest, waits until each side
// holds the other dead, heals, and returns how long after the heal every member
// was alive everywhere (or nullopt if not within `bound`).
std::optional<Duration> PartitionAndHeal(uint64_t seed, int n, int side_a, double loss, Duration reconnect,
                                         Duration bound) {
  Pump pump(seed);
  auto names = Names("n", n, 10);
  for (const std::string& x : names) {
    MembershipConfig c = Pump::Config(x, {Pump::AddressOf(names[0])});
    c.dead_reconnect_interval = reconnect;
    pump.Add(c);
  }
  for (const std::string& x : names) pump.Start(x);
  EXPECT_TRUE(pump.RunFor(60s, [&] { return pump.AllSee(names, names, MemberState::kAlive); }));
  std::vector<std::string> a(names.begin(), names.begin() + side_a), b(names.begin() + side_a, names.end());
  std::set<std::string> in_a(a.begin(), a.end());
  pump.SetDrop([&](const std::string& x, const std::string& y) { return in_a.count(x) != in_a.count(y); });
  pump.SetLossRate(loss);
  EXPECT_TRUE(pump.RunFor(60s, [&] {
    return pump.AllSee(a, b, MemberState::kDead) && pump.AllSee(b, a, MemberState::kDead);
  }));
  pump.RunFor(20s);  // reconnect attempts fail while partitioned
  EXPECT_TRUE(pump.AllSee(a, b, MemberState::kDead) && pump.AllSee(b, a, MemberState::kDead));
  EXPECT_TRUE(pump.AllSee(a, a, MemberState::kAlive) && pump.AllSee(b, b, MemberState::kAlive));
  pump.SetDrop(nullptr);
  const Time heal = pump.now();
  if (!pump.RunFor(bound, [&] { return pump.AllSee(names, names, MemberState::kAlive); })) return std::nullopt;
  const Duration took = pump.now() - heal;
  // And it stays merged once losses stop.
  pump.SetLossRate(0);
  pump.RunFor(60s);
  EXPECT_TRUE(pump.AllSee(names, names, MemberState::kAlive));
  for (const std::string& x : names) EXPECT_EQ(pump.node(x).LiveCount(), static_cast<size_t>(n));
  return took;
}

TEST(MembershipCluster, PartitionThenHealMergesBackByItself) {
  // Bound: one dead_reconnect_interval for the first join to cross (the
  // reconnect timers run with a random phase), then a few rounds of
  // refutation and gossip.
  const Duration reconnect = 5s;
  const Duration bound = reconnect + 30s;
  Duration worst{0};
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto took = PartitionAndHeal(seed, 5, 2, 0.0, reconnect, bound);
    ASSERT_TRUE(took.has_value()) << "2/3 split, seed " << seed;
    worst = std::max(worst, *took);
    took = PartitionAndHeal(seed, 10, 5, 0.05, reconnect, bound);
    ASSERT_TRUE(took.has_value()) << "5/5 split with 5% loss, seed " << seed;
    worst = std::max(worst, *took);
  }
  std::printf("partition heal: all alive everywhere at most %.1f s after heal (reconnect interval %.0f s)\n",
              std::chrono::duration<double>(worst).count(), std::chrono::duration<double>(reconnect).count());
}

TEST(MembershipCluster, WithoutDeadReconnectsAHealedPartitionStaysSplit) {
  // The control for the test above: what merges the sides is the periodic
  // join to dead members (push/pull only goes to live ones).
  auto took = PartitionAndHeal(1, 5, 2, 0.0, std::chrono::hours(1), 120s);
  EXPECT_FALSE(took.has_value());
}

TEST(MembershipCluster, SeedDownAtStartJoinCompletesWhenItComesUp) {
  Pump pump(8);
  auto names = Names("n", 4);
  for (const std::string& n : names) pump.Add(n, {Pump::AddressOf("n0")});
  for (const std::string& n : Without(names, "n0")) pump.Start(n);
  pump.RunFor(10s);
  for (const std::string& n : Without(names, "n0")) {
    EXPECT_FALSE(pump.node(n).joined()) << n;
    EXPECT_EQ(pump.node(n).LiveCount(), 1u);
  }
  EXPECT_GE(pump.sent_by_type()["join"], 3u * 9u);  // retried every probe interval
  pump.Start("n0");
  ASSERT_TRUE(pump.RunFor(30s, [&] { return pump.AllSee(names, names, MemberState::kAlive); }));
  for (const std::string& n : names) EXPECT_TRUE(pump.node(n).joined()) << n;
  // Joined nodes stop sending joins.
  const uint64_t joins = pump.sent_by_type()["join"];
  pump.RunFor(30s);
  EXPECT_EQ(pump.sent_by_type()["join"], joins);
}

TEST(MembershipCluster, RestartedMemberWithoutStateRejoinsAboveItsDeath) {
  Pump pump(11);
  auto names = Names("n", 5);
  StartAndConverge(pump, names, 30s);
  pump.Stop("n3");
  auto others = Without(names, "n3");
  ASSERT_TRUE(pump.RunFor(60s, [&] { return pump.AllSee(others, {"n3"}, MemberState::kDead); }));
  const uint64_t dead_inc = pump.node("n0").Find("n3")->incarnation;
  // A fresh process: same name and address, incarnation 0, empty table.
  pump.Add("n3", {Pump::AddressOf("n0")});
  pump.Start("n3");
  EXPECT_EQ(pump.node("n3").incarnation(), 0u);
  ASSERT_TRUE(pump.RunFor(30s, [&] { return pump.AllSee(names, names, MemberState::kAlive); }));
  EXPECT_GT(pump.node("n3").incarnation(), dead_inc);
  for (const std::string& n : others) {
    EXPECT_EQ(pump.node(n).Find("n3")->incarnation, pump.node("n3").incarnation()) << n;
    EXPECT_FALSE(pump.EventsAbout("n3", Event::Kind::kMemberAlive).empty());
  }
}

std::string RunScenario(uint64_t seed) {
  Pump pump(seed);
  auto names = Names("n", 6);
  for (const std::string& n : names) pump.Add(n, {Pump::AddressOf("n0"), Pump::AddressOf("n1")});
  for (const std::string& n : names) pump.Start(n);
  pump.SetLossRate(0.05);
  pump.RunFor(20s);
  pump.SetDrop([](const std::string& a, const std::string& b) { return (a < "n3") != (b < "n3"); });
  pump.RunFor(30s);
  pump.SetDrop(nullptr);
  pump.Stop("n5");
  pump.RunFor(40s);
  return pump.Trace();
}

TEST(MembershipCluster, SameSeedsGiveIdenticalEventSequences) {
  const std::string first = RunScenario(42);
  const std::string second = RunScenario(42);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, second);
  // The trace really depends on the seed (it is not a constant).
  EXPECT_NE(first, RunScenario(43));
}

TEST(MembershipCluster, HundredMembersConverge) {
  Pump pump(9);
  auto names = Names("m", 100, 100);  // m100..m199: names sort like numbers
  std::vector<Address> seeds = {Pump::AddressOf("m100"), Pump::AddressOf("m101"), Pump::AddressOf("m102")};
  for (const std::string& n : names) pump.Add(n, seeds);
  for (const std::string& n : names) {
    pump.Start(n);
    pump.RunFor(50ms);  // staggered starts over 5 s
  }
  ASSERT_TRUE(pump.RunFor(120s, [&] { return pump.AllSee(names, names, MemberState::kAlive); }))
      << "100 members did not converge by t=" << pump.now().count();
  std::printf("100 members: all alive everywhere at t=%.1f s, %llu messages\n",
              std::chrono::duration<double>(pump.now()).count(), (unsigned long long)pump.sent());
  for (const std::string& n : names) EXPECT_EQ(pump.node(n).LiveCount(), 100u);
  pump.RunFor(30s);
  EXPECT_TRUE(pump.AllSee(names, names, MemberState::kAlive));
  for (const std::string& n : names) EXPECT_TRUE(pump.EventsAbout(n, Event::Kind::kMemberDead).empty()) << n;
}

// Random loss makes probes fail and members get suspected, but refutations
// (pushed straight to the accused and re-sent by it) must always win the race
// against the suspicion timeout: no live member is ever declared dead. (Run
// without the reliable fallback ping, which would spare nearly every
// suspicion: the test after this one.)
TEST(MembershipCluster, LossCausesNoFalseDeaths) {
  for (double loss : {0.10, 0.20}) {
    uint64_t suspicions = 0;
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      Pump pump(100 + seed);
      auto names = Names("n", 10, 10);
      StartAndConverge(pump, names, 60s, /*reliable_fallback_ping=*/false);
      pump.SetLossRate(loss);
      pump.RunFor(180s);
      for (const std::string& n : names) {
        EXPECT_TRUE(pump.EventsAbout(n, Event::Kind::kMemberDead).empty()) << n << " loss " << loss << " seed " << seed;
        suspicions += pump.EventsAbout(n, Event::Kind::kMemberSuspect).size();
      }
      pump.SetLossRate(0);
      ASSERT_TRUE(pump.RunFor(30s, [&] { return pump.AllSee(names, names, MemberState::kAlive); }));
    }
    // The loss really did cause suspicions (else this test proves nothing).
    EXPECT_GT(suspicions, 10u) << "loss " << loss;
    std::printf("loss %.0f%%, 10 members, 5 seeds x 180 s: %llu suspect events, 0 false deaths\n", loss * 100,
                (unsigned long long)suspicions);
  }
}

// The stream ping after a failed direct probe: datagram loss alone (streams
// are not lost) suspects nobody, while a member that is really gone still
// dies everywhere. Without it the same seeds and loss give dozens of
// suspicions (the test above asserts > 10).
TEST(MembershipCluster, ReliableFallbackPingSparesLossyLinksButNotTheDead) {
  uint64_t suspicions = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Pump pump(100 + seed);
    auto names = Names("n", 10, 10);
    StartAndConverge(pump, names, 60s);
    pump.SetLossRate(0.2);
    pump.RunFor(180s);
    for (const std::string& n : names) suspicions += pump.EventsAbout(n, Event::Kind::kMemberSuspect).size();
    pump.Stop("n13");
    const auto others = Without(names, "n13");
    EXPECT_TRUE(pump.RunFor(120s, [&] { return pump.AllSee(others, {"n13"}, MemberState::kDead); })) << seed;
  }
  EXPECT_EQ(suspicions, 0u);
}

}  // namespace
}  // namespace pollen::node::testing
