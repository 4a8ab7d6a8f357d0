// Owner-routed test-and-add (node/core/routing.h): rendezvous ranking, one
// "new" per key however many nodes add it at once, lost replies, silent
// owners, batching per owner, and malformed requests.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "node/core/catalog.h"
#include "node/core/routing.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

FilterConfig RoutedFilter() {
  FilterConfig f = SharedFilter("crawl");
  f.routed = true;
  return f;
}

ClusterOptions Options(size_t nodes) {
  ClusterOptions o;
  o.nodes = nodes;
  o.filters = {RoutedFilter()};
  return o;
}

// Starts the cluster and waits until every node lists every member alive.
void Join(Cluster& c) {
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
}

bool AllPresentKey(Cluster& c, const std::string& key) {
  for (size_t n = 0; n < c.size(); ++n) {
    auto r = c.node(n).Exists("crawl", key);
    if (!r.ok() || !*r) return false;
  }
  return true;
}

uint64_t Ticket(Node& node, const std::vector<std::string>& keys, Time now) {
  std::vector<std::string_view> views(keys.begin(), keys.end());
  absl::StatusOr<uint64_t> t = node.BeginAdd("crawl", views, now);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : 0;
}

// Steps until node i has answered `want` tickets (or 5 s pass).
std::vector<RoutedAddResult> Answers(Cluster& c, size_t i, size_t want) {
  std::vector<RoutedAddResult> got;
  auto take = [&] {
    for (RoutedAddResult& r : c.node(i).TakeRoutedAdds()) got.push_back(std::move(r));
    return got.size() >= want;
  };
  c.Deliver();
  if (!take()) c.RunUntil(take, 5s);
  return got;
}

TEST(Rendezvous, OwnerDependsOnTheSetNotItsOrderAndMovesOnlyWithItsMember) {
  const crdt::ClusterSecret secret = TestSecret();
  Rendezvous a(secret), b(secret), fewer(secret);
  a.Reset({"n0", "n1", "n2", "n3", "n4"});
  b.Reset({"n4", "n2", "n0", "n3", "n1"});
  fewer.Reset({"n0", "n1", "n3", "n4"});  // n2 gone
  std::map<std::string, int> owned;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t h = a.KeyHash(Key(i));
    auto [owner, second] = a.TopTwo(h);
    ASSERT_NE(owner, nullptr);
    ASSERT_NE(second, nullptr);
    EXPECT_NE(*owner, *second);
    EXPECT_EQ(*owner, *b.TopTwo(h).first);
    // Without n2, its keys go to their second choice and nobody else's move.
    EXPECT_EQ(*fewer.TopTwo(h).first, *owner == "n2" ? *second : *owner);
    ++owned[*owner];
  }
  // Each of 5 members owns a fifth of the keys: 2000 +- 5 sigma (sigma = 40).
  for (const auto& [name, count] : owned) {
    EXPECT_GT(count, 1800) << name;
    EXPECT_LT(count, 2200) << name;
  }
  Rendezvous other_secret(TestSecret(8));
  other_secret.Reset({"n0", "n1", "n2", "n3", "n4"});
  EXPECT_NE(other_secret.KeyHash("k"), a.KeyHash("k"));  // owners are keyed by the cluster secret
}

TEST(Routing, ConcurrentAddsOfOneKeyAtEveryNodeAnswerNewOnce) {
  Cluster c(Options(5));
  Join(c);
  constexpr int kKeys = 200;
  std::map<std::pair<size_t, uint64_t>, int> key_of;  // (node, ticket) -> key
  for (int k = 0; k < kKeys; ++k) {
    for (size_t n = 0; n < c.size(); ++n) key_of[{n, Ticket(c.node(n), {Key(k)}, c.now())}] = k;
  }
  std::vector<int> news(kKeys, 0);
  uint64_t remote = 0;
  for (size_t n = 0; n < c.size(); ++n) {
    std::vector<RoutedAddResult> answers = Answers(c, n, kKeys);
    ASSERT_EQ(answers.size(), static_cast<size_t>(kKeys)) << "node " << n;
    for (const RoutedAddResult& r : answers) {
      ASSERT_TRUE(r.status.ok());
      ASSERT_EQ(r.added.size(), 1u);
      EXPECT_EQ(r.fallback_keys, 0u);
      remote += r.remote_keys;
      news[key_of.at({n, r.ticket})] += r.added[0] ? 1 : 0;
      // Read-your-writes: the asking node holds the key once it has the answer.
      auto here = c.node(n).Exists("crawl", Key(key_of.at({n, r.ticket})));
      ASSERT_TRUE(here.ok());
      EXPECT_TRUE(*here);
    }
  }
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(news[k], 1) << Key(k);
  EXPECT_GT(remote, 0u);  // other nodes decided most keys (4 in 5)
  uint64_t served = 0;
  for (size_t n = 0; n < c.size(); ++n) served += c.node(n).Counters().routed_served;
  EXPECT_EQ(served, remote);
}

TEST(Routing, PresentKeysAnswerAtOnceWithoutAHop) {
  Cluster c(Options(4));
  Join(c);
  for (int k = 0; k < 20; ++k) ASSERT_TRUE(c.node(0).Add("crawl", Key(k)).ok());  // plain adds
  ASSERT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 20); }, 5s));
  std::vector<std::string> keys;
  for (int k = 0; k < 20; ++k) keys.push_back(Key(k));
  Ticket(c.node(2), keys, c.now());
  // No delivery, no tick: already answered.
  std::vector<RoutedAddResult> answers = c.node(2).TakeRoutedAdds();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].remote_keys, 0u);
  EXPECT_EQ(std::count(answers[0].added.begin(), answers[0].added.end(), true), 0);
  EXPECT_EQ(c.node(2).Counters().routed_present, 20u);
}

TEST(Routing, BatchesGoOneRequestPerOwner) {
  ClusterOptions o = Options(4);
  o.inspect = true;
  Cluster c(o);
  Join(c);
  const uint64_t before = c.delivered().count("datagram/18") ? c.delivered().at("datagram/18") : 0;
  std::vector<std::string> keys;
  for (int k = 0; k < 60; ++k) keys.push_back(Key(k));
  Ticket(c.node(1), keys, c.now());
  std::vector<RoutedAddResult> answers = Answers(c, 1, 1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(std::count(answers[0].added.begin(), answers[0].added.end(), true), 60);
  const uint64_t requests = c.delivered().at("datagram/18") - before;  // Envelope.route_add = 18
  EXPECT_LE(requests, 3u);  // one per other owner, however many keys each owns
  EXPECT_GE(requests, 1u);
  EXPECT_EQ(answers[0].remote_keys + c.node(1).Counters().routed_owned, 60u);
}

TEST(Routing, ARetryAfterALostReplyGetsTheSameAnswer) {
  ClusterOptions o = Options(3);
  int dropped_replies = 0;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    return env.has_route_reply() && dropped_replies++ == 0;  // the first reply only
  };
  Cluster c(o);
  Join(c);
  // A key node 0 does not own, so its add goes out.
  std::vector<std::string> keys;
  for (int k = 0; keys.empty(); ++k) {
    Rendezvous r(TestSecret());
    r.Reset({"n0", "n1", "n2"});
    if (*r.TopTwo(r.KeyHash(Key(k))).first != "n0") keys.push_back(Key(k));
  }
  Ticket(c.node(0), keys, c.now());
  std::vector<RoutedAddResult> answers = Answers(c, 0, 1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(dropped_replies, 2);  // the first dropped, the retry's delivered
  // The owner added the key at the first request; it answers the retry from
  // memory ("new"), not from its filter ("already present").
  EXPECT_TRUE(answers[0].added[0]);
  EXPECT_EQ(answers[0].fallback_keys, 0u);
  EXPECT_EQ(answers[0].remote_keys, 1u);
}

TEST(Routing, AnOwnerReportsTheKeysItDecidedForOthersOnceForTheLog) {
  ClusterOptions o = Options(3);
  o.report_peer_adds = true;
  int dropped_replies = 0;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    return env.has_route_reply() && dropped_replies++ == 0;  // the first reply: the asker asks again
  };
  Cluster c(o);
  Join(c);
  for (size_t n = 0; n < c.size(); ++n) c.node(n).TakePeerAdds();  // nothing routed yet
  // Keys node 0 does not own, grouped by their owner.
  Rendezvous r(TestSecret());
  r.Reset({"n0", "n1", "n2"});
  std::vector<std::string> keys;
  std::map<std::string, std::set<std::string>> owned_by;
  for (int k = 0; keys.size() < 20; ++k) {
    const std::string owner = *r.TopTwo(r.KeyHash(Key(k))).first;
    if (owner == "n0") continue;
    keys.push_back(Key(k));
    owned_by[owner].insert(Key(k));
  }
  Ticket(c.node(0), keys, c.now());
  std::vector<std::vector<PeerAdds>> reported(c.size());
  std::vector<RoutedAddResult> answers;
  ASSERT_TRUE(c.RunUntil(
      [&] {
        for (size_t n = 0; n < c.size(); ++n) {
          for (PeerAdds& a : c.node(n).TakePeerAdds()) reported[n].push_back(std::move(a));
        }
        for (RoutedAddResult& a : c.node(0).TakeRoutedAdds()) answers.push_back(std::move(a));
        return !answers.empty();
      },
      5s));
  EXPECT_EQ(std::count(answers[0].added.begin(), answers[0].added.end(), true), 20);
  ASSERT_EQ(owned_by.size(), 2u);
  EXPECT_EQ(dropped_replies, 3);  // both owners replied, and one of them again to the retry (from memory)
  EXPECT_TRUE(reported[0].empty());  // the asker's keys are its client's: logged by the RESP layer
  for (size_t n = 1; n < c.size(); ++n) {
    std::multiset<std::string> got;
    for (const PeerAdds& a : reported[n]) {
      EXPECT_EQ(a.filter, "crawl");
      got.insert(a.keys.begin(), a.keys.end());
    }
    const std::set<std::string>& want = owned_by[c.node(n).name()];
    // Each decided key exactly once: the retry re-sent the same request id.
    EXPECT_EQ(got, std::multiset<std::string>(want.begin(), want.end())) << c.node(n).name();
  }
  // The answer to the retry, from memory, is reported without keys: the
  // driver holds it until the first request's keys are durable too.
  int repeats = 0;
  for (size_t n = 1; n < c.size(); ++n) {
    for (const PeerAdds& a : reported[n]) repeats += a.keys.empty();
  }
  EXPECT_EQ(repeats, 1);
}

TEST(Routing, KeysAddedForPeersAreNotKeptUnlessReported) {
  Cluster c(Options(3));
  Join(c);
  std::vector<std::string> keys;
  for (int k = 0; k < 30; ++k) keys.push_back(Key(k));
  Ticket(c.node(0), keys, c.now());
  ASSERT_EQ(Answers(c, 0, 1).size(), 1u);
  EXPECT_GT(c.node(1).Counters().routed_served + c.node(2).Counters().routed_served, 0u);
  for (size_t n = 0; n < c.size(); ++n) EXPECT_TRUE(c.node(n).TakePeerAdds().empty());
}

TEST(Routing, AnAddWhoseFilterIsDeletedInFlightIsNotCounted) {
  Cluster c(Options(3));
  Join(c);
  Rendezvous r(TestSecret());
  r.Reset({"n0", "n1", "n2"});
  std::vector<std::string> keys;
  for (int k = 0; keys.size() < 5; ++k) {
    if (*r.TopTwo(r.KeyHash(Key(k))).first != "n0") keys.push_back(Key(k));
  }
  const uint64_t before = c.node(0).Counters().adds;
  Ticket(c.node(0), keys, c.now());
  ASSERT_TRUE(c.node(0).Delete("crawl", c.now()).ok());  // while the owners are asked
  std::vector<RoutedAddResult> answers = Answers(c, 0, 1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(answers[0].status));
  // The caller makes the filter again and adds there (the RESP layer does):
  // that add is the one counted.
  EXPECT_EQ(c.node(0).Counters().adds, before);
  ASSERT_TRUE(c.node(0).Reserve(RoutedFilter(), c.now()).ok());
  Ticket(c.node(0), keys, c.now());
  ASSERT_EQ(Answers(c, 0, 1).size(), 1u);
  EXPECT_EQ(c.node(0).Counters().adds, before + keys.size());
}

TEST(Routing, ASilentOwnerFallsBackToTheLocalAnswerAndCountsIt) {
  ClusterOptions o = Options(3);
  bool silence = false;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) { return silence && env.has_route_add(); };
  Cluster c(o);
  Join(c);
  silence = true;
  std::vector<std::string> keys;
  for (int k = 0; k < 30; ++k) keys.push_back(Key(k));
  const Time began = c.now();
  Ticket(c.node(0), keys, began);
  std::vector<RoutedAddResult> answers = Answers(c, 0, 1);
  ASSERT_EQ(answers.size(), 1u);
  const uint64_t owned_here = c.node(0).Counters().routed_owned;
  EXPECT_EQ(answers[0].fallback_keys + owned_here, 30u);
  EXPECT_GT(answers[0].fallback_keys, 0u);
  EXPECT_EQ(c.node(0).Counters().routed_fallbacks, answers[0].fallback_keys);
  EXPECT_EQ(std::count(answers[0].added.begin(), answers[0].added.end(), true), 30);  // decided here: all new
  // Three attempts at the owner and one at the next choice, 100 ms each.
  EXPECT_GE(c.now() - began, 4 * 100ms);
}

// The owner added the key (its bits reached the next-ranked member) but
// every reply was lost: the stand-in answers the first stand-in request
// "new", so the key is not answered "present" everywhere.
TEST(Routing, AStandInAnswersNewWhenTheOwnersAnswerWasLost) {
  ClusterOptions o = Options(3);
  bool silence = false;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) { return silence && env.has_route_reply(); };
  Cluster c(o);
  Join(c);
  Rendezvous r(TestSecret());
  r.Reset({"n0", "n1", "n2"});
  std::string key;
  for (int k = 0; key.empty(); ++k) {
    auto [owner, second] = r.TopTwo(r.KeyHash(Key(k)));
    if (*owner != "n0" && *second != "n0") key = Key(k);  // n0 asks; owner and stand-in are the others
  }
  silence = true;
  Ticket(c.node(0), {key}, c.now());
  std::vector<RoutedAddResult> first = Answers(c, 0, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].added[0]);  // new, from the stand-in or the local fallback
  EXPECT_EQ(first[0].fallback_keys, 1u);
  // Its bits are everywhere now; a second asker that also loses the owner's
  // reply is answered "present" by the stand-in, which already said "new" once.
  silence = true;
  ASSERT_TRUE(c.RunUntil([&] { return AllPresentKey(c, key); }, 5s));
  Ticket(c.node(0), {key}, c.now());  // present here: answered at once
  std::vector<RoutedAddResult> again = c.node(0).TakeRoutedAdds();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0].added[0]);
}

TEST(Routing, AFilterThatIsNotRoutedAnswersAtOnce) {
  ClusterOptions o = Options(3);
  o.filters = {SharedFilter("crawl")};
  Cluster c(o);
  Join(c);
  Ticket(c.node(0), {Key(1), Key(1)}, c.now());
  std::vector<RoutedAddResult> answers = c.node(0).TakeRoutedAdds();
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].added, (std::vector<bool>{true, false}));
  EXPECT_FALSE(c.node(0).IsRouted("crawl"));
  EXPECT_EQ(c.node(0).BeginAdd("nope", {}, c.now()).status().code(), absl::StatusCode::kNotFound);
}

TEST(Routing, MalformedRequestsAreRejectedAndChangeNothing) {
  Cluster c(Options(2));
  Join(c);
  std::vector<wire::Envelope> envelopes;
  for (wire::RouteAdd& add : MalformedKeyRequests<wire::RouteAdd>(kMaxRouteKeys, "crawl")) {
    *envelopes.emplace_back().mutable_route_add() = std::move(add);
  }
  const ForgedOutcome out = SendForged(c, 1, "crawl", envelopes);
  EXPECT_EQ(out.malformed, 4u);
  EXPECT_TRUE(out.bits_unchanged);
  EXPECT_EQ(c.node(1).Counters().routed_served, 0u);
}

TEST(Routing, RoutedIsPartOfTheCatalogEntry) {
  FilterConfig digest;
  digest.name = "d";
  digest.scope = Scope::kDigest;
  digest.owner = "n0";
  digest.routed = true;
  EXPECT_FALSE(ValidateFilterConfig(digest).ok());
  Cluster c(Options(2));
  Join(c);
  EXPECT_TRUE(c.node(1).IsRouted("crawl"));
  auto info = c.node(1).Info("crawl");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->config.routed);
}

}  // namespace
}  // namespace pollen::node::testing
