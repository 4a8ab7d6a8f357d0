// WAIT and the quorum EXISTS (node/core/peer_checks.h): WAIT counts only
// peers that hold every key, pushes the keys so it needs no gossip round,
// never overstates when peers are silent; a quorum EXISTS finds a key only a
// peer has; malformed checks change nothing.
#include <gtest/gtest.h>

#include <algorithm>

#include "node/core/peer_checks.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

ClusterOptions Options(size_t nodes) {
  ClusterOptions o;
  o.nodes = nodes;
  o.filters = {SharedFilter("crawl")};
  return o;
}

void Join(Cluster& c) {
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
}

std::vector<std::string> Keys(int from, int to) {
  std::vector<std::string> keys;
  for (int k = from; k < to; ++k) keys.push_back(Key(k));
  return keys;
}

// Steps until node i has answered one check (or `limit` passes).
std::optional<PeerCheckResult> Answer(Cluster& c, size_t i, Duration limit = 5s) {
  std::optional<PeerCheckResult> got;
  auto take = [&] {
    for (PeerCheckResult& r : c.node(i).TakePeerChecks()) got = std::move(r);
    return got.has_value();
  };
  c.Deliver();
  if (!take()) c.RunUntil(take, limit);
  return got;
}

size_t NodesHolding(Cluster& c, const std::vector<std::string>& keys, size_t except) {
  size_t n = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i == except) continue;
    bool all = true;
    for (const std::string& k : keys) {
      auto r = c.node(i).Exists("crawl", k);
      all = all && r.ok() && *r;
    }
    n += all ? 1 : 0;
  }
  return n;
}

void AddAt(Cluster& c, size_t i, const std::vector<std::string>& keys) {
  std::vector<std::string_view> views(keys.begin(), keys.end());
  ASSERT_TRUE(c.node(i).AddMany("crawl", views).ok());
}

TEST(Wait, PushesTheKeysAndCountsEveryPeerThatHoldsThem) {
  Cluster c(Options(4));
  Join(c);
  const std::vector<std::string> keys = Keys(0, 2500);  // three chunks per peer
  AddAt(c, 0, keys);
  ASSERT_EQ(NodesHolding(c, keys, 0), 0u);  // no gossip round yet
  auto t = c.node(0).BeginWait({KeyBatch{"crawl", keys}}, 2, 1s, c.now());
  ASSERT_TRUE(t.ok()) << t.status();
  std::optional<PeerCheckResult> r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->status.ok());
  EXPECT_EQ(r->ticket, *t);
  EXPECT_EQ(r->peers_acked, 3u);  // everyone answered in the same round trip
  EXPECT_TRUE(r->every_live_peer);
  EXPECT_EQ(r->latency, Duration(0));  // one delivery, no gossip round, no resend
  EXPECT_EQ(NodesHolding(c, keys, 0), 3u);
}

TEST(Wait, EachPeerReportsThePushedKeysForItsLog) {
  ClusterOptions o = Options(3);
  o.report_peer_adds = true;
  Cluster c(o);
  Join(c);
  for (size_t n = 0; n < c.size(); ++n) c.node(n).TakePeerAdds();
  const std::vector<std::string> keys = Keys(0, 50);
  AddAt(c, 0, keys);
  auto t = c.node(0).BeginWait({KeyBatch{"crawl", keys}}, 2, 1s, c.now());
  ASSERT_TRUE(t.ok()) << t.status();
  c.Deliver();  // the pushes reach the peers, whose replies are queued behind their reports
  EXPECT_TRUE(c.node(0).TakePeerAdds().empty());  // its own client's keys: logged by the RESP layer
  for (size_t n = 1; n < c.size(); ++n) {
    std::vector<std::string> got;
    for (const PeerAdds& a : c.node(n).TakePeerAdds()) {
      EXPECT_EQ(a.filter, "crawl");
      got.insert(got.end(), a.keys.begin(), a.keys.end());
    }
    EXPECT_EQ(got, keys) << c.node(n).name();
  }
  std::optional<PeerCheckResult> r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 2u);
}

TEST(Wait, KeysOfAReplacedFilterAreNotPushed) {
  Cluster c(Options(3));
  Join(c);
  const std::vector<std::string> keys = Keys(0, 10);
  AddAt(c, 0, keys);
  const uint64_t incarnation = c.node(0).Version("crawl")->incarnation;
  // Recorded against another incarnation of "crawl" (one deleted and made
  // again since): not pushed, and 0 at once (nobody holds them).
  auto t = c.node(0).BeginWait({KeyBatch{"crawl", keys, incarnation + 1}}, 2, 1s, c.now());
  ASSERT_TRUE(t.ok()) << t.status();
  std::optional<PeerCheckResult> r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 0u);
  EXPECT_FALSE(r->every_live_peer);  // the connection keeps its record (and its next WAIT answers 0)
  EXPECT_EQ(NodesHolding(c, keys, 0), 0u);
  // The incarnation that took them: pushed.
  t = c.node(0).BeginWait({KeyBatch{"crawl", keys, incarnation}}, 2, 1s, c.now());
  ASSERT_TRUE(t.ok()) << t.status();
  r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 2u);
  EXPECT_EQ(NodesHolding(c, keys, 0), 2u);
}

TEST(Wait, NeverCountsAPeerThatDidNotAnswer) {
  ClusterOptions o = Options(4);
  o.drop = [](size_t, const Outgoing& out, const wire::Envelope& env) {
    return env.has_key_check() && out.to == AddressOf(2);  // n2 never hears of the keys
  };
  o.gossip_interval = 1h;  // nor gets them by gossip during the test
  Cluster c(o);
  Join(c);
  const std::vector<std::string> keys = Keys(0, 40);
  AddAt(c, 0, keys);
  const Time began = c.now();
  ASSERT_TRUE(c.node(0).BeginWait({KeyBatch{"crawl", keys}}, 3, 2s, began).ok());
  std::optional<PeerCheckResult> r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 2u);
  EXPECT_FALSE(r->every_live_peer);
  EXPECT_GE(c.now() - began, 2s);  // three wanted: waited for the timeout
  EXPECT_LE(r->peers_acked, NodesHolding(c, keys, 0));
  // Two wanted: answered at once; n2 had a short grace (a quarter route timeout).
  ASSERT_TRUE(c.node(0).BeginWait({KeyBatch{"crawl", keys}}, 2, 2s, c.now()).ok());
  const Time second = c.now();
  r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 2u);
  EXPECT_LE(c.now() - second, 100ms);
}

TEST(Wait, ZeroReplicasAndNoKeysAnswerAtOnce) {
  Cluster c(Options(3));
  Join(c);
  ASSERT_TRUE(c.node(0).BeginWait({KeyBatch{"crawl", Keys(0, 5)}}, 0, 0s, c.now()).ok());
  std::vector<PeerCheckResult> now = c.node(0).TakePeerChecks();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].peers_acked, 0u);
  EXPECT_FALSE(now[0].every_live_peer);  // nobody was asked: the keys must be kept
  ASSERT_TRUE(c.node(0).BeginWait({}, 5, 0s, c.now()).ok());
  now = c.node(0).TakePeerChecks();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].peers_acked, 2u);  // nothing to hold: every live peer holds it
  // Keys of a filter unknown here are skipped, not an error.
  ASSERT_TRUE(c.node(0).BeginWait({KeyBatch{"nope", Keys(0, 5)}}, 1, 0s, c.now()).ok());
  EXPECT_EQ(c.node(0).TakePeerChecks().size(), 1u);
  EXPECT_EQ(c.node(0).BeginWait({KeyBatch{"crawl", Keys(0, 5)}}, 1, -1s, c.now()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Wait, ChunksFollowTheByteLimitAndAnOversizeKeyAnswersZeroAtOnce) {
  Cluster c(Options(3));
  Join(c);
  std::vector<std::string> big;  // 300 KiB in 300 keys: two chunks by bytes, one by count
  for (int k = 0; k < 300; ++k) big.push_back(Key(k) + std::string(1024, 'x'));
  AddAt(c, 0, big);
  ASSERT_TRUE(c.node(0).BeginWait({KeyBatch{"crawl", big}}, 2, 1s, c.now()).ok());
  std::optional<PeerCheckResult> r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 2u);  // no chunk over kMaxCheckBytes for the peers to reject
  EXPECT_EQ(c.node(1).Counters().rejected_by_reason["malformed"], 0u);
  const std::vector<std::string> huge = {std::string(kMaxCheckKeyBytes + 1, 'h')};
  AddAt(c, 0, huge);
  ASSERT_TRUE(c.node(0).BeginWait({KeyBatch{"crawl", huge}}, 1, 1s, c.now()).ok());
  std::vector<PeerCheckResult> now = c.node(0).TakePeerChecks();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].peers_acked, 0u);  // no peer can be asked about it
  EXPECT_FALSE(now[0].every_live_peer);
}

TEST(Wait, ALoneNodeKeepsItsKeys) {
  Cluster c(Options(1));
  Join(c);
  AddAt(c, 0, Keys(0, 3));
  ASSERT_TRUE(c.node(0).BeginWait({KeyBatch{"crawl", Keys(0, 3)}}, 1, 1s, c.now()).ok());
  std::vector<PeerCheckResult> now = c.node(0).TakePeerChecks();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].peers_acked, 0u);
  EXPECT_FALSE(now[0].every_live_peer);  // nobody holds them: a later WAIT must send them
}

TEST(Wait, SilentPeersMeanZeroAtTheTimeout) {
  ClusterOptions o = Options(3);
  o.drop = [](size_t, const Outgoing&, const wire::Envelope& env) { return env.has_key_check_reply(); };
  Cluster c(o);
  Join(c);
  AddAt(c, 1, Keys(0, 3));
  const Time began = c.now();
  ASSERT_TRUE(c.node(1).BeginWait({KeyBatch{"crawl", Keys(0, 3)}}, 1, 300ms, began).ok());
  std::optional<PeerCheckResult> r = Answer(c, 1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 0u);
  EXPECT_GE(c.now() - began, 300ms);
  EXPECT_LT(c.now() - began, 500ms);
}

TEST(Wait, ResendsToASilentPeerBackOff) {
  ClusterOptions o = Options(2);
  int checks_sent = 0;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    if (env.has_key_check()) ++checks_sent;
    return env.has_key_check_reply();
  };
  Cluster c(o);
  Join(c);
  AddAt(c, 1, Keys(0, 3));
  checks_sent = 0;
  ASSERT_TRUE(c.node(1).BeginWait({KeyBatch{"crawl", Keys(0, 3)}}, 1, 10s, c.now()).ok());
  std::optional<PeerCheckResult> r = Answer(c, 1, 15s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->peers_acked, 0u);
  // Sent at 0, then 0.1, 0.3, 0.7, 1.5, 3.1 s and every 1.6 s after: 10 in
  // 10 s (a fixed 100 ms would be 100).
  EXPECT_GE(checks_sent, 8);
  EXPECT_LE(checks_sent, 12);
}

TEST(QuorumExists, FindsAKeyOnlyAPeerHas) {
  ClusterOptions o = Options(4);
  o.gossip_interval = 1h;
  Cluster c(o);
  Join(c);
  AddAt(c, 2, {Key(7)});
  auto local = c.node(0).Exists("crawl", Key(7));
  ASSERT_TRUE(local.ok());
  ASSERT_FALSE(*local);  // not here yet
  AddAt(c, 0, {Key(8)});
  const std::vector<std::string> keys_owned = {Key(7), Key(8), Key(9)};
  const std::vector<std::string_view> keys(keys_owned.begin(), keys_owned.end());
  ASSERT_TRUE(c.node(0).BeginQuorumExists("crawl", keys, 3, c.now()).ok());
  std::optional<PeerCheckResult> r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->present, (std::vector<bool>{true, true, false}));  // a peer's, ours, nobody's
  EXPECT_EQ(r->peers_answered, 3u);
  // Asking does not add: the key is still absent at the asker and the others.
  EXPECT_FALSE(*c.node(0).Exists("crawl", Key(7)));
  EXPECT_FALSE(*c.node(1).Exists("crawl", Key(9)));
  // Every key present here: answered at once, nobody asked.
  const std::vector<std::string> mine_owned = {Key(8)};
  const std::vector<std::string_view> mine(mine_owned.begin(), mine_owned.end());
  ASSERT_TRUE(c.node(0).BeginQuorumExists("crawl", mine, 3, c.now()).ok());
  std::vector<PeerCheckResult> now = c.node(0).TakePeerChecks();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].present, std::vector<bool>{true});
  EXPECT_EQ(c.node(0).BeginQuorumExists("nope", mine, 1, c.now()).status().code(), absl::StatusCode::kNotFound);
}

TEST(QuorumExists, ASilentPeerLeavesTheAnswerToTheOthersAtTheDeadline) {
  ClusterOptions o = Options(3);
  o.gossip_interval = 1h;
  o.drop = [](size_t, const Outgoing& out, const wire::Envelope& env) {
    return env.has_key_check() && out.to == AddressOf(1);
  };
  Cluster c(o);
  Join(c);
  AddAt(c, 2, {Key(3)});
  const std::vector<std::string> keys_owned = {Key(3)};
  const std::vector<std::string_view> keys(keys_owned.begin(), keys_owned.end());
  const Time began = c.now();
  ASSERT_TRUE(c.node(0).BeginQuorumExists("crawl", keys, 2, began).ok());
  std::optional<PeerCheckResult> r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->present, std::vector<bool>{true});  // n2 said so; every key answered: no wait for n1
  EXPECT_EQ(r->peers_answered, 1u);
  EXPECT_LT(c.now() - began, 100ms);
  const std::vector<std::string> absent_owned = {Key(4)};
  const std::vector<std::string_view> absent(absent_owned.begin(), absent_owned.end());
  const Time second = c.now();
  ASSERT_TRUE(c.node(0).BeginQuorumExists("crawl", absent, 2, second).ok());
  r = Answer(c, 0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->present, std::vector<bool>{false});
  EXPECT_GE(c.now() - second, 4 * 100ms);  // kRouteAttempts route timeouts for n1
}

TEST(KeyCheck, MalformedChecksAreRejectedAndChangeNothing) {
  Cluster c(Options(2));
  Join(c);
  std::vector<wire::Envelope> envelopes;
  for (wire::KeyCheck& check : MalformedKeyRequests<wire::KeyCheck>(kMaxCheckKeys, "crawl")) {
    check.set_add(true);
    *envelopes.emplace_back().mutable_key_check() = std::move(check);
  }
  const ForgedOutcome out = SendForged(c, 1, "crawl", envelopes);
  EXPECT_EQ(out.malformed, 4u);
  EXPECT_TRUE(out.bits_unchanged);
}

TEST(CheckAnswered, TheCompletionRule) {
  CheckTicket t;
  t.add = true;
  t.wanted = 2;
  t.peers.resize(3);
  for (auto& p : t.peers) p.chunks_left = 1;
  const Time now{std::chrono::seconds(10)};
  EXPECT_FALSE(CheckAnswered(t, now));
  t.peers[0].chunks_left = 0;
  t.peers[1].chunks_left = 0;
  t.complete_peers = 2;
  t.grace_end = now + 25ms;
  EXPECT_FALSE(CheckAnswered(t, now));  // the straggler's grace
  EXPECT_TRUE(CheckAnswered(t, now + 25ms));
  t.peers[2].failed = true;
  EXPECT_TRUE(CheckAnswered(t, now));  // nobody left to answer
  CheckTicket q;
  q.present = {true, false};
  q.peers.resize(1);
  q.peers[0].chunks_left = 1;
  q.deadline = now + 1s;
  EXPECT_FALSE(CheckAnswered(q, now));
  q.present[1] = true;
  EXPECT_TRUE(CheckAnswered(q, now));  // every key present
  q.present[1] = false;
  EXPECT_TRUE(CheckAnswered(q, now + 1s));  // the deadline
}

}  // namespace
}  // namespace pollen::node::testing
