// Tree dissemination (NodeConfig::Dissemination::kTree) on the test pump:
// every key reaches every node by the tree alone, each new bit is sent about
// once per node, and the cluster converges through loss and a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "node/core/catalog.h"
#include "node/core/rng.h"
#include "node/core/dissemination.h"
#include "protocol/seal.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

ClusterOptions TreeOptions(size_t nodes, uint64_t seed = 1) {
  ClusterOptions o;
  o.nodes = nodes;
  o.seed = seed;
  o.filters = {SharedFilter("crawl", 100'000)};
  o.dissemination = NodeConfig::Dissemination::kTree;
  return o;
}

uint64_t SetBits(Node& node) {
  auto info = node.Info("crawl", InfoParts::kCounts);
  EXPECT_TRUE(info.ok());
  uint64_t bits = 0;
  for (const GenerationInfo& g : info->generations) bits += g.set_bits;
  return bits;
}

uint64_t TreeBytes(Cluster& c) {
  uint64_t bytes = 0;
  for (size_t n = 0; n < c.size(); ++n) bytes += c.node(n).Counters().bytes_out_by_type["tree"];
  return bytes;
}

// Starts `o`'s cluster and lets it settle, sets `counting`, adds 200 keys
// round-robin, and stores in `*bytes` the tree bytes sent until every node
// holds them all (within 5 s). With `warm`, every node adds a key of its own
// 2 s before counting starts, so every link has carried and acknowledged a
// push. Use under ASSERT_NO_FATAL_FAILURE.
void TreeBytesOf200Keys(const ClusterOptions& o, bool& counting, uint64_t* bytes, bool warm = false) {
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(20s);
  if (warm) {
    for (size_t n = 0; n < c.size(); ++n) ASSERT_TRUE(c.node(n).Add("crawl", "warm-" + std::to_string(n)).ok());
    c.RunFor(2s);
  }
  counting = true;
  const uint64_t before = TreeBytes(c);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(c.node(static_cast<size_t>(i) % c.size()).Add("crawl", Key(i)).ok());
    if (i % 10 == 9) c.Step();
  }
  ASSERT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 200); }, 5s));
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 5s));
  *bytes = TreeBytes(c) - before;
}

// A tree push, number `seq` of stream 77, of one delta of "crawl" (as
// TreeOptions declares it) with the full filter reference, setting `bits` in
// word `word`; the envelope's header is left empty (Forger::Seal fills it in
// unless told not to).
wire::Envelope CrawlPush(uint64_t seq, uint64_t word, uint64_t bits) {
  auto entry = MakeCatalogEntry(SharedFilter("crawl", 100'000), TestSecret(), 0, "");
  EXPECT_TRUE(entry.ok());
  wire::Envelope env;
  wire::Delta* delta = env.mutable_tree()->mutable_data()->add_deltas();
  ToWire(entry->params, delta->mutable_filter());
  const std::vector<crdt::WordBits> words = {{word, bits}};
  delta->set_positions(EncodeWords(words, 0, entry->params.shape.bits()));
  env.mutable_tree()->set_stream(77);
  env.mutable_tree()->set_seq(seq);
  return env;
}

uint64_t BitsSent(Cluster& c) {
  uint64_t sent = 0;
  for (size_t n = 0; n < c.size(); ++n) sent += c.node(n).Counters().delta_bits_sent;
  return sent;
}

TEST(TreeDissemination, EachNewBitCrossesEachNodeAboutOnce) {
  ClusterOptions o = TreeOptions(16);
  o.anti_entropy_interval = 1000s;  // the tree alone (after the join syncs)
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(20s);  // the tree settles
  const uint64_t bits_before = SetBits(c.node(0));
  const uint64_t sent_before = BitsSent(c);
  Rng rng(5);
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(c.node(rng.Below(c.size())).Add("crawl", Key(i)).ok());
    if (i % 20 == 19) c.Step();  // spread over several pushes
  }
  ASSERT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 300); }, 3s));
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 3s));
  const double new_bits = static_cast<double>(SetBits(c.node(0)) - bits_before);
  const double per_bit = static_cast<double>(BitsSent(c) - sent_before) / new_bits;
  const double n_minus_1 = static_cast<double>(c.size() - 1);
  // Every node must receive each bit (>= N-1, less a few bits that two keys
  // share); flooding sends ~9·(N-1). The bound is 1.3·(N-1).
  EXPECT_GE(per_bit, 0.95 * n_minus_1);
  EXPECT_LE(per_bit, 1.3 * n_minus_1);
  uint64_t parent_changes = 0;
  for (size_t n = 0; n < c.size(); ++n) parent_changes += c.node(n).Counters().tree_parent_changes;
  EXPECT_GT(parent_changes, 0u);  // a tree formed
}

TEST(TreeDissemination, ConvergesUnderLossAndAfterACrash) {
  ClusterOptions o = TreeOptions(20, 12);
  o.datagram_loss = 0.1;
  o.anti_entropy_interval = 5s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);
  Rng rng(13);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(c.node(rng.Below(c.size())).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 300); }, 60s));
  // Node 0 (the smallest name: the tree's root) restarts without state; keys
  // added meanwhile and after still reach everyone.
  c.Restart(0);
  for (int i = 300; i < 400; ++i) ASSERT_TRUE(c.node(1 + rng.Below(c.size() - 1)).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 400); }, 90s));
}

// With anti-entropy off (after the join syncs), only resends can repair a
// lost push (node/core/push_delivery.h): at 10% loss every key still reaches
// every node, and each new bit costs at most the 1.6·(N-1).
// Without resends, lost pushes stay lost and the keys below them missing.
TEST(TreeDissemination, LostPushesAreSentAgain) {
  ClusterOptions o = TreeOptions(20, 21);
  o.datagram_loss = 0.1;
  o.anti_entropy_interval = 1000s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(20s);
  const uint64_t bits_before = SetBits(c.node(0));
  const uint64_t sent_before = BitsSent(c);
  Rng rng(22);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(c.node(rng.Below(c.size())).Add("crawl", Key(i)).ok());
    if (i % 10 == 9) c.Step();
  }
  ASSERT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 200); }, 10s));
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 10s));
  uint64_t resends = 0;
  for (size_t n = 0; n < c.size(); ++n) resends += c.node(n).Counters().tree_resends;
  EXPECT_GT(resends, 0u);
  const double per_bit = static_cast<double>(BitsSent(c) - sent_before) /
                         static_cast<double>(SetBits(c.node(0)) - bits_before);
  EXPECT_LE(per_bit, 1.6 * static_cast<double>(c.size() - 1));
}

// A parent pushes only to neighbours whose last beacon names it, so a child
// whose beacon is lost misses what its new parent pushes meanwhile: a
// changed beacon goes out in several rounds, and a parent syncs with a child
// it adopts. Here only beacons are lost (30%), anti-entropy is otherwise off,
// and keys added while the tree forms reach everyone. Without the adoption
// sync, 6 of 7 loss seeds left some subtree without most keys for good.
TEST(TreeDissemination, ALostBeaconDoesNotCutASubtreeOff) {
  for (uint64_t seed : {1, 4, 5, 32}) {
    ClusterOptions o = TreeOptions(24, 31);
    o.anti_entropy_interval = 1000s;
    Rng loss(seed);
    o.drop = [&loss](size_t, const Outgoing&, const wire::Envelope& env) {
      return env.has_tree() && env.tree().has_beacon() && !env.tree().has_data() && loss.Below(10) < 3;
    };
    Cluster c(o);
    c.StartAll();
    ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
    for (int round = 0; round < 10; ++round) {  // the tree is still settling
      for (int i = 0; i < 10; ++i) {
        const int key = round * 10 + i;
        ASSERT_TRUE(c.node(static_cast<size_t>(key) % c.size()).Add("crawl", Key(key)).ok());
      }
      c.RunFor(300ms);
    }
    EXPECT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 100); }, 15s)) << "loss seed " << seed;
  }
}

// A tree that stands still backs its periodic beacons off (node_impl.h,
// kMaxBeaconBackoff): over 300 quiet seconds each link carries a beacon about
// every 40 s instead of every tree_beacon_interval (5 s), i.e. ~60 per link
// without the backoff. A key added afterwards still reaches every node by
// the tree alone.
TEST(TreeDissemination, ASteadyTreeBacksItsBeaconsOff) {
  ClusterOptions o = TreeOptions(16, 41);
  o.anti_entropy_interval = 1000s;
  bool counting = false;
  std::map<std::pair<size_t, std::string>, uint64_t> beacons;  // (sender, to) -> beacon frames
  o.drop = [&](size_t from, const Outgoing& out, const wire::Envelope& env) {
    if (counting && env.has_tree() && env.tree().has_beacon()) ++beacons[{from, out.to}];
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(60s);  // the tree settles; its last changes' beacons back off
  counting = true;
  c.RunFor(300s);
  counting = false;
  ASSERT_FALSE(beacons.empty());
  uint64_t total = 0;
  for (const auto& [link, n] : beacons) total += n;
  const double per_link = static_cast<double>(total) / static_cast<double>(beacons.size());
  EXPECT_LE(per_link, 15.0) << beacons.size() << " links";
  ASSERT_TRUE(c.node(3).Add("crawl", Key(1)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 1, 2); }, 3s));
}

// A node that restarts under its name, before anyone declares it dead,
// comes back with no tree links, while its old neighbours still hold theirs
// (and may be its children, whose unchanged beacons are backed off). The
// first tree frame from one of them relinks it, and its hello brings the
// neighbour's beacon back, so with anti-entropy off keys still reach every
// node in seconds. Without the relink, a restart of node 5 left node 14
// without 38 of 40 keys for 25.8 s.
TEST(TreeDissemination, ARestartedNodeTakesBackItsOldLinksAtTheirFirstFrame) {
  for (size_t restarted : {5, 11}) {
    ClusterOptions o = TreeOptions(16, 43);
    o.anti_entropy_interval = 1000s;
    Cluster c(o);
    c.StartAll();
    ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
    c.RunFor(60s);  // beacons backed off
    c.Restart(restarted);
    c.RunFor(1s);
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(c.node(static_cast<size_t>(i) % c.size()).Add("crawl", Key(i)).ok());
      c.RunFor(100ms);
    }
    EXPECT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 40); }, 4s)) << "restarted node " << restarted;
  }
}

// After a partition long enough for each side to declare the other dead,
// each side's overlay has refilled from itself and forms its own tree; the
// root of the side without the smallest name links to it again, so keys
// cross by the tree alone (anti-entropy is off once the join syncs are done).
TEST(TreeDissemination, OneTreeAgainAfterALongPartition) {
  ClusterOptions o = TreeOptions(24, 4);
  o.anti_entropy_interval = 1000s;
  bool split = false;
  auto side = [](const std::string& address) { return std::stoul(address.substr(5)) % 2; };
  o.drop = [&split, side](size_t from, const Outgoing& out, const wire::Envelope&) {
    return split && from % 2 != side(out.to);
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(20s);
  split = true;
  c.RunFor(120s);
  split = false;
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 120s));
  c.RunFor(60s);  // the join syncs, then the tree joins up
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i % 12) * 2).Add("crawl", Key(i)).ok());
  for (int i = 60; i < 120; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i % 12) * 2 + 1).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 120); }, 5s));
}

// The same seeds give the same frames: the tree draws only from the node Rng.
TEST(TreeDissemination, IsDeterministic) {
  auto run = [] {
    ClusterOptions o = TreeOptions(8, 3);
    o.inspect = true;
    Cluster c(o);
    c.StartAll();
    c.RunFor(10s);
    for (int i = 0; i < 50; ++i) EXPECT_TRUE(c.node(static_cast<size_t>(i) % 8).Add("crawl", Key(i)).ok());
    c.RunFor(5s);
    std::vector<uint64_t> sent;
    for (size_t n = 0; n < c.size(); ++n) sent.push_back(c.node(n).Counters().bytes_out);
    return sent;
  };
  EXPECT_EQ(run(), run());
}

// Pushes name a filter the neighbour holds by name and digest (catalog.h,
// CompactRef), or by an alias of that (filter_aliases.h): every key still
// reaches every node, nearly every delta goes compact, and the tree sends
// fewer bytes than with full references.
TEST(TreeDissemination, PushesNameKnownFiltersCompactly) {
  uint64_t tree_bytes[2] = {0, 0};
  for (bool compact : {false, true}) {
    ClusterOptions o = TreeOptions(12);
    o.anti_entropy_interval = 1000s;
    o.compact_refs = compact;
    bool counting = false;
    uint64_t compact_deltas = 0, full_deltas = 0;
    o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
      if (counting && env.has_tree()) {
        for (const wire::Delta& d : env.tree().data().deltas()) {
          ++(IsCompactRef(d.filter()) || d.filter().alias() != 0 ? compact_deltas : full_deltas);
        }
      }
      return false;
    };
    ASSERT_NO_FATAL_FAILURE(TreeBytesOf200Keys(o, counting, &tree_bytes[compact])) << "compact " << compact;
    if (compact) {
      EXPECT_GT(compact_deltas, 20 * full_deltas);
    } else {
      EXPECT_EQ(compact_deltas, 0u);
      EXPECT_GT(full_deltas, 0u);
    }
  }
  EXPECT_LT(tree_bytes[1], tree_bytes[0]);
}

// Pushes and delivery control to a neighbour that advertises it leave the
// sender's address out (the neighbour's member list has it); beacons keep it,
// and so does everything sent to a neighbour that does not advertise it (an
// older node: node 0 here). Every key still reaches every node, by the tree
// alone, and the tree sends fewer bytes.
TEST(TreeDissemination, PushesLeaveTheSenderAddressOutWhereTheNeighbourTakesIt) {
  uint64_t tree_bytes[2] = {0, 0};
  for (bool implicit : {false, true}) {
    ClusterOptions o = TreeOptions(12);
    o.anti_entropy_interval = 1000s;
    o.configure = [implicit](size_t i, NodeConfig& c) { c.tree_implicit_sender = implicit && i != 0; };
    bool counting = false;
    // Pushes by whether they carry the address, and whether node 0 (the
    // older node) sends or receives them.
    uint64_t bare = 0, addressed_old = 0, addressed_others = 0, bare_to_old = 0, bare_beacons = 0;
    o.drop = [&](size_t from, const Outgoing& out, const wire::Envelope& env) {
      if (!counting || !env.has_tree()) return false;
      const bool has_address = !env.sender_address().empty();
      const bool old = from == 0 || out.to == AddressOf(0);
      if (env.tree().has_data()) ++(!has_address ? bare : old ? addressed_old : addressed_others);
      if (!has_address && out.to == AddressOf(0)) ++bare_to_old;
      if (!has_address && env.tree().has_beacon()) ++bare_beacons;
      return false;
    };
    ASSERT_NO_FATAL_FAILURE(TreeBytesOf200Keys(o, counting, &tree_bytes[implicit])) << "implicit " << implicit;
    EXPECT_EQ(bare_to_old, 0u);
    EXPECT_EQ(bare_beacons, 0u);
    EXPECT_GT(addressed_old, 0u);
    if (implicit) {
      // Links made during the run send with the address until the new
      // neighbour's beacon arrives: a few.
      EXPECT_GT(bare, 50 * addressed_others);
    } else {
      EXPECT_EQ(bare, 0u);
    }
  }
  EXPECT_LT(tree_bytes[1], tree_bytes[0]);
}

// A compact reference the receiver cannot resolve (it lacks the filter, or
// holds it with other parameters) does not count as received: the push is
// NACKed at once, nothing is merged, and the NACKed push comes again with full
// references.
TEST(TreeDissemination, AnUnresolvedCompactReferenceIsNackedAndResentInFull) {
  ClusterOptions o = TreeOptions(2);
  o.anti_entropy_interval = 1000s;
  // n0's first push after `watch` is lost on its way to n1; its resend is kept.
  bool watch = false;
  std::optional<std::pair<uint32_t, uint64_t>> lost;  // (stream, seq)
  std::vector<wire::Tree> resends;
  o.drop = [&](size_t from, const Outgoing&, const wire::Envelope& env) {
    if (!watch || from != 0 || !env.has_tree() || env.tree().seq() == 0) return false;
    const wire::Tree& t = env.tree();
    if (!lost) {
      lost = {t.stream(), t.seq()};
      EXPECT_TRUE(IsCompactRef(t.data().deltas(0).filter()));
      return true;
    }
    if (std::make_pair(t.stream(), t.seq()) == *lost) resends.push_back(t);
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);  // n0 and n1 are tree neighbours and have seen each other's beacons

  wire::Envelope env = CrawlPush(1, 5, 0xff);
  env.set_sender_name(NameOf(0));
  env.set_sender_address(AddressOf(0));
  wire::FilterRef* ref = env.mutable_tree()->mutable_data()->mutable_deltas(0)->mutable_filter();
  const uint64_t digest = ParamsDigest(Unvalidated(*ref));
  CompactRef(ref);
  ref->set_digest(digest ^ 1);  // not n1's parameters
  (void)c.node(1).TakeOutgoing();
  const uint64_t bits_before = SetBits(c.node(1));
  c.node(1).HandleDatagram(AddressOf(0), Forger(TestSecret(), 0xC0FFEE).Seal(env), c.now());
  NodeCounters counters = c.node(1).Counters();
  EXPECT_EQ(counters.rejected_by_reason["unresolved_ref"], 1u);
  EXPECT_EQ(counters.rejected_by_reason["malformed"], 0u);
  EXPECT_EQ(SetBits(c.node(1)), bits_before);
  bool nacked = false;
  for (const Outgoing& out : c.node(1).TakeOutgoing()) {
    std::optional<wire::Envelope> e = Peek(TestSecret(), out.bytes);
    ASSERT_TRUE(e.has_value());
    nacked = nacked || (out.to == AddressOf(0) && e->has_tree() && e->tree().ack_stream() == 77 &&
                        e->tree().nack_size() == 1 && e->tree().nack(0) == 1);
  }
  EXPECT_TRUE(nacked);

  // A push lost on the way goes again with full references (a NACK may be
  // about a reference the link could not resolve).
  watch = true;
  ASSERT_TRUE(c.node(0).Add("crawl", Key(1)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 1, 2); }, 5s));
  ASSERT_TRUE(lost.has_value());
  ASSERT_FALSE(resends.empty());
  for (const wire::Delta& d : resends.front().data().deltas()) EXPECT_FALSE(IsCompactRef(d.filter()));
}

// Between real neighbours: n1 has not learned a filter n0 created (everything
// that would carry its catalog entry to n1 is lost), n0's announcement ends,
// and n0 adds a key. The compact push is refused and NACKed, and the full
// resend is held for want of the entry (HeldDeltas, for one anti-entropy
// interval); once nothing is hidden the key reaches n1.
TEST(TreeDissemination, AFilterTheNeighbourLacksArrivesByTheFullResend) {
  ClusterOptions o = TreeOptions(2);
  o.anti_entropy_interval = 5s;  // brings the entry once nothing is hidden
  bool hide = false;  // n0 -> n1: only membership and tree frames without catalog entries
  o.drop = [&](size_t from, const Outgoing&, const wire::Envelope& env) {
    if (!hide || from != 0) return false;
    return !env.has_membership() && !(env.has_tree() && env.tree().data().catalog_size() == 0);
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);
  hide = true;
  ASSERT_TRUE(c.node(0).Reserve(SharedFilter("late"), c.now()).ok());
  c.RunFor(20s);  // the announcement rounds pass; n1 never heard of "late"
  ASSERT_FALSE(c.node(1).Exists("late", Key(1)).ok());
  ASSERT_TRUE(c.node(0).Add("late", Key(1)).ok());
  c.RunFor(2s);
  EXPECT_GE(c.node(1).Counters().rejected_by_reason["unresolved_ref"], 1u);
  EXPECT_GE(c.node(0).Counters().tree_resends, 1u);
  EXPECT_GE(c.node(1).Counters().held_deltas, 1u);  // the full resend, held for want of the entry
  hide = false;
  ASSERT_TRUE(c.RunUntil(
      [&] {
        auto r = c.node(1).Exists("late", Key(1));
        return r.ok() && *r;
      },
      30s));
}

// One run of TreeBytesOf200Keys (warm) with a wire form off, one with it on
// (`enable` sets it in a node's config), node 0 never using it (an older
// node). `count` sorts what each tree-run frame shows: the new form, the old
// form where the new one would do, or the new form where it must not go; it
// counts apart the frames to or from node 0. Expects the new form only on the second run, never to or from
// node 0, ten times more often than the old form between new nodes, and
// fewer tree bytes.
struct FormCounts {
  uint64_t fresh = 0;      // the new form
  uint64_t old = 0;        // the old form, where the new one applies
  uint64_t misplaced = 0;  // the new form on a frame it does not apply to
};
using FormCounter = std::function<void(const Outgoing& out, const wire::Envelope& env, FormCounts& counts)>;
void ExpectTheNewFormWhereAdvertised(const std::function<void(NodeConfig&, bool)>& enable, const FormCounter& count) {
  uint64_t tree_bytes[2] = {0, 0};
  for (bool on : {false, true}) {
    ClusterOptions o = TreeOptions(12);
    o.anti_entropy_interval = 1000s;
    o.configure = [&enable, on](size_t i, NodeConfig& c) { enable(c, on && i != 0); };
    bool counting = false;
    FormCounts between_new, at_old;
    o.drop = [&](size_t from, const Outgoing& out, const wire::Envelope& env) {
      if (counting) count(out, env, from == 0 || out.to == AddressOf(0) ? at_old : between_new);
      return false;
    };
    ASSERT_NO_FATAL_FAILURE(TreeBytesOf200Keys(o, counting, &tree_bytes[on], /*warm=*/true)) << "on " << on;
    EXPECT_EQ(at_old.fresh + at_old.misplaced + between_new.misplaced, 0u) << "on " << on;
    if (on) {
      EXPECT_GT(between_new.fresh, 10 * between_new.old);
    } else {
      EXPECT_EQ(between_new.fresh, 0u);
      EXPECT_GT(between_new.old, 0u);
    }
  }
  EXPECT_LT(tree_bytes[1], tree_bytes[0]);
}

// Once a link has acknowledged a push that defined it, pushes name the filter
// by its alias alone (a definition counts as the old form).
TEST(TreeDissemination, PushesNameFiltersByAliasOnceTheLinkHasAcknowledgedOne) {
  ExpectTheNewFormWhereAdvertised([](NodeConfig& c, bool on) { c.tree_filter_aliases = on; },
                                  [](const Outgoing&, const wire::Envelope& env, FormCounts& n) {
                                    if (!env.has_tree()) return;
                                    for (const wire::Delta& d : env.tree().data().deltas()) {
                                      const wire::FilterRef& ref = d.filter();
                                      if (ref.alias() != 0 && ref.digest() == 0) ++n.fresh;
                                      if (ref.digest() != 0) ++n.old;  // compact, or defining an alias
                                    }
                                  });
}

// Aliases in forged frames from a linked neighbour: one the receiver does not
// know makes the push not received (NACKed at once, nothing merged); one
// outside a numbered push, or beside full parameters, or outside a tree push,
// or given a second meaning, is malformed. A definition is learned only from
// a push that was taken, of the link's current stream.
TEST(TreeDissemination, AnUnknownOrMisplacedAliasChangesNothing) {
  ClusterOptions o = TreeOptions(2);
  o.anti_entropy_interval = 1000s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);  // n0 and n1 are tree neighbours
  auto entry = MakeCatalogEntry(SharedFilter("crawl", 100'000), TestSecret(), 0, "");
  ASSERT_TRUE(entry.ok());
  const crdt::FilterParams& params = entry->params;
  uint64_t counter = 0xC0FFEE;
  uint64_t word = 5;  // each push sets bits in a word of its own
  using Shape = std::function<void(wire::FilterRef*)>;
  // Sends n1 push `seq` of `stream`: one delta per shape, each shaping its
  // filter reference (the full one to start with). Returns whether n1
  // NACKed that push (at once, with any older numbers still missing).
  auto send = [&](const std::vector<Shape>& shapes, uint64_t seq, uint32_t stream = 77, bool as_gossip = false) {
    wire::Envelope env;
    env.set_sender_name(NameOf(0));
    env.set_sender_address(AddressOf(0));
    wire::Gossip* g = as_gossip ? env.mutable_gossip() : env.mutable_tree()->mutable_data();
    for (const Shape& shape : shapes) {
      wire::Delta* delta = g->add_deltas();
      ToWire(params, delta->mutable_filter());
      shape(delta->mutable_filter());
      const std::vector<crdt::WordBits> words = {{word += 3, 0xff}};
      delta->set_positions(EncodeWords(words, 0, params.shape.bits()));
    }
    if (!as_gossip) {
      env.mutable_tree()->set_stream(stream);
      env.mutable_tree()->set_seq(seq);
    }
    (void)c.node(1).TakeOutgoing();
    c.node(1).HandleDatagram(AddressOf(0), Forger(TestSecret(), ++counter).Seal(env), c.now());
    bool nacked = false;
    for (const Outgoing& out : c.node(1).TakeOutgoing()) {
      std::optional<wire::Envelope> e = Peek(TestSecret(), out.bytes);
      EXPECT_TRUE(e.has_value());
      nacked = nacked || (e.has_value() && out.to == AddressOf(0) && e->has_tree() && e->tree().ack_stream() == stream &&
                          std::count(e->tree().nack().begin(), e->tree().nack().end(), seq) == 1);
    }
    return nacked;
  };
  const Shape use5 = [](wire::FilterRef* r) { r->Clear(), r->set_alias(5); };
  const Shape use6 = [](wire::FilterRef* r) { r->Clear(), r->set_alias(6); };
  const Shape define6 = [](wire::FilterRef* r) { CompactRef(r), r->set_alias(6); };
  auto rejected = [&](const char* reason) { return c.node(1).Counters().rejected_by_reason[reason]; };
  uint64_t bits = SetBits(c.node(1));

  EXPECT_TRUE(send({use5}, 1));
  EXPECT_EQ(rejected("unresolved_ref"), 1u);
  EXPECT_EQ(rejected("malformed"), 0u);
  EXPECT_FALSE(send({use5}, 0));  // not numbered
  EXPECT_EQ(rejected("malformed"), 1u);
  EXPECT_FALSE(send({[](wire::FilterRef* r) { r->set_alias(5); }}, 2));  // beside full parameters
  EXPECT_EQ(rejected("malformed"), 2u);
  EXPECT_FALSE(send({[](wire::FilterRef* r) { CompactRef(r), r->set_alias(5); }}, 0, 77, /*as_gossip=*/true));
  EXPECT_EQ(rejected("malformed"), 3u);
  EXPECT_EQ(rejected("unresolved_ref"), 1u);
  EXPECT_EQ(SetBits(c.node(1)), bits);

  // A definition in a push refused for another delta is not learned.
  const Shape unresolvable = [&](wire::FilterRef* r) { CompactRef(r), r->set_digest(ParamsDigest(params) ^ 1); };
  EXPECT_TRUE(send({define6, unresolvable}, 3));
  EXPECT_EQ(rejected("unresolved_ref"), 2u);
  EXPECT_TRUE(send({use6}, 4));
  EXPECT_EQ(rejected("unresolved_ref"), 3u);
  EXPECT_EQ(SetBits(c.node(1)), bits);

  // A definition is taken, and the alias then stands for the filter.
  EXPECT_FALSE(send({define6}, 5));
  EXPECT_GT(SetBits(c.node(1)), bits);
  bits = SetBits(c.node(1));
  EXPECT_FALSE(send({use6}, 6));
  EXPECT_GT(SetBits(c.node(1)), bits);
  bits = SetBits(c.node(1));
  EXPECT_FALSE(send({[](wire::FilterRef* r) { r->set_name("other"), CompactRef(r), r->set_alias(6); }}, 7));
  EXPECT_EQ(rejected("malformed"), 4u);  // 6 already means "crawl"
  EXPECT_EQ(rejected("unresolved_ref"), 3u);

  // The sender restarted (stream 78); a late push of stream 77 still in
  // flight teaches nothing and does not wipe stream 78's aliases.
  const Shape define1 = [](wire::FilterRef* r) { CompactRef(r), r->set_alias(1); };
  EXPECT_FALSE(send({define1}, 1, 78));
  EXPECT_FALSE(send({define6}, 8, 77));
  EXPECT_FALSE(send({[](wire::FilterRef* r) { r->Clear(), r->set_alias(1); }}, 2, 78));
  EXPECT_EQ(rejected("unresolved_ref"), 3u);
  EXPECT_EQ(rejected("malformed"), 4u);
}

// A receiver that restarts loses its alias table while its neighbour's stream
// goes on: the neighbour's next alias-only push is refused and NACKed, the
// neighbour defines its aliases again, and every key reaches the restarted
// node by the tree alone, after which pushes go by alias again.
TEST(TreeDissemination, AReceiverThatLostItsAliasesGetsThemDefinedAgain) {
  ClusterOptions o = TreeOptions(2);
  o.anti_entropy_interval = 1000s;
  bool counting = false;
  uint64_t alias_only = 0;
  o.drop = [&](size_t from, const Outgoing&, const wire::Envelope& env) {
    if (counting && from == 0 && env.has_tree()) {
      for (const wire::Delta& d : env.tree().data().deltas()) alias_only += d.filter().alias() != 0 && d.filter().digest() == 0;
    }
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);
  counting = true;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
    c.RunFor(300ms);
  }
  ASSERT_GT(alias_only, 10u);  // the link uses its alias
  c.Restart(1);
  c.RunFor(2s);  // n1 is back in n0's tree links
  alias_only = 0;
  for (int i = 20; i < 60; ++i) {
    ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
    c.RunFor(300ms);
  }
  ASSERT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 20, 60); }, 5s));
  const uint64_t refused = c.node(1).Counters().rejected_by_reason["unresolved_ref"];
  EXPECT_GE(refused, 1u);
  EXPECT_LE(refused, 3u);
  EXPECT_GT(alias_only, 30u);
}

// Once a link has acknowledged a push of the sender's stream, pushes to it go
// bare: no version, sender name or address (the neighbour attributes them by
// their seal's sender id). Probes, beacons, hellos and frames without data
// stay named.
TEST(TreeDissemination, PushesGoBareOnceTheLinkHasAcknowledgedOne) {
  ExpectTheNewFormWhereAdvertised([](NodeConfig& c, bool on) { c.tree_bare_pushes = on; },
                                  [](const Outgoing&, const wire::Envelope& env, FormCounts& n) {
                                    if (!env.has_tree()) return;
                                    const bool bare = env.sender_name().empty();
                                    EXPECT_EQ(bare, env.version() == 0);
                                    const wire::Tree& t = env.tree();
                                    const bool plain_push = t.seq() != 0 && t.probe() == 0 && !t.has_beacon() && t.link() == 0;
                                    if (bare) {
                                      ++(plain_push ? n.fresh : n.misplaced);
                                    } else if (plain_push) {
                                      ++n.old;
                                    }
                                  });
}

// A receiver that restarts no longer knows its neighbour's seal sender id,
// while the neighbour's stream, acknowledged before, goes on, busy (a push
// every 100 ms: no probe goes). Here the neighbour's named tree frames are
// held back until the first bare push has been dropped (counted as
// unattributed) and answered with "name yourself" (Tree.link = 3). The
// neighbour's pushes right after that answer are named, and every key
// reaches the restarted node by the tree alone.
TEST(TreeDissemination, ARestartedReceiverLearnsTheBareSenderAgain) {
  ClusterOptions o = TreeOptions(2);
  o.anti_entropy_interval = 1000s;
  Cluster* cluster = nullptr;
  bool hold_named = false;
  std::optional<Time> asked;  // when node 1 first sent "name yourself"
  uint64_t named_after = 0;   // node 0's named pushes within 200 ms of it
  o.drop = [&](size_t from, const Outgoing&, const wire::Envelope& env) {
    if (!env.has_tree()) return false;
    const bool named = !env.sender_name().empty();
    if (from == 1 && env.tree().link() == 3 && !asked) asked = cluster->now();
    if (from == 0 && named && env.tree().seq() != 0 && asked && cluster->now() <= *asked + 200ms) ++named_after;
    return hold_named && from == 0 && named;
  };
  Cluster c(o);
  cluster = &c;
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
    c.RunFor(300ms);
  }
  c.Restart(1);
  hold_named = true;
  auto unattributed = [&] { return c.node(1).Counters().rejected_by_reason["unattributed"]; };
  for (int i = 10; i < 40; ++i) {
    ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
    c.RunFor(100ms);
    if (unattributed() > 0) hold_named = false;
  }
  EXPECT_GE(unattributed(), 1u);
  ASSERT_TRUE(asked.has_value());
  EXPECT_GE(named_after, 1u);
  ASSERT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 10, 40); }, 5s));
}

// A bare push from a seal sender id this node has not learned changes
// nothing, is counted and is answered with "name yourself" (Tree.link = 3);
// a bare tree frame that is not a plain push is malformed; a bare frame of
// another kind, or a tree push that says no version but names its sender, is
// refused by version.
TEST(TreeDissemination, AnUnattributableBarePushChangesNothing) {
  ClusterOptions o = TreeOptions(2);
  o.anti_entropy_interval = 1000s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);
  wire::Envelope env = CrawlPush(1, 5, 0xff);
  Forger stranger(TestSecret(), 0xBADBAD);
  const uint64_t bits_before = SetBits(c.node(1));
  (void)c.node(1).TakeOutgoing();
  c.node(1).HandleDatagram(AddressOf(0), stranger.Seal(env, /*set_defaults=*/false), c.now());
  auto rejected = [&](const char* reason) { return c.node(1).Counters().rejected_by_reason[reason]; };
  EXPECT_EQ(rejected("unattributed"), 1u);
  EXPECT_EQ(SetBits(c.node(1)), bits_before);
  std::vector<Outgoing> out = c.node(1).TakeOutgoing();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].to, AddressOf(0));  // the frame's source
  std::optional<wire::Envelope> answer = Peek(TestSecret(), out[0].bytes);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->tree().link(), 3u);
  EXPECT_EQ(answer->sender_name(), NameOf(1));
  env.mutable_tree()->set_seq(2);  // again at once: counted, but asked at most once a second
  c.node(1).HandleDatagram(AddressOf(0), stranger.Seal(env, /*set_defaults=*/false), c.now());
  EXPECT_EQ(rejected("unattributed"), 2u);
  EXPECT_TRUE(c.node(1).TakeOutgoing().empty());

  wire::Envelope named = env;
  named.set_sender_name(NameOf(0));
  c.node(1).HandleDatagram(AddressOf(0), stranger.Seal(named, /*set_defaults=*/false), c.now());
  EXPECT_EQ(rejected("version"), 1u);
  wire::Envelope probe = env;  // a bare probe: only plain pushes go bare
  probe.mutable_tree()->set_probe(1);
  c.node(1).HandleDatagram(AddressOf(0), stranger.Seal(probe, /*set_defaults=*/false), c.now());
  EXPECT_EQ(rejected("malformed"), 1u);
  wire::Envelope other;
  *other.mutable_gossip() = env.tree().data();
  c.node(1).HandleDatagram(AddressOf(0), stranger.Seal(other, /*set_defaults=*/false), c.now());
  EXPECT_EQ(rejected("version"), 2u);
  EXPECT_EQ(SetBits(c.node(1)), bits_before);
}

// Pushes and delivery control to a neighbour that advertises it are sealed
// with the compact header (protocol/seal.h); beacons, hellos and everything
// else keep the full one.
TEST(TreeDissemination, TreeFramesGoCompactlySealedWhereTheNeighbourOpensThem) {
  ExpectTheNewFormWhereAdvertised([](NodeConfig& c, bool on) { c.tree_compact_seal = on; },
                                  [](const Outgoing& out, const wire::Envelope& env, FormCounts& n) {
                                    const bool compact = static_cast<uint8_t>(out.bytes[0]) == protocol::kCompactVersion;
                                    const bool delivery = env.has_tree() && !env.tree().has_beacon() && env.tree().link() == 0;
                                    if (delivery) ++(compact ? n.fresh : n.old);
                                    // Membership has a switch of its own (compact_membership_test.cc).
                                    if (!delivery && compact && !env.has_membership()) ++n.misplaced;
                                  });
}

// A seal sender id is random per boot: two neighbours naming frames under
// one id (embedded nodes sharing a seed) get neither attributed by it, for
// good (a later named frame does not teach it again), and the clash is
// counted once.
TEST(TreeDissemination, OneSealSenderIdForTwoNamesAttributesNeither) {
  ClusterOptions o = TreeOptions(3);
  o.anti_entropy_interval = 1000s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(10s);
  Forger twin(TestSecret(), 0x7777);
  auto named_from = [&](size_t i) {  // a named hello-less tree frame from node i: delivery control only
    wire::Envelope env;
    env.set_version(kWireVersion);
    env.set_sender_name(NameOf(i));
    env.set_sender_address(AddressOf(i));
    env.mutable_tree()->set_ack_stream(5);
    env.mutable_tree()->set_ack(1);
    return twin.Seal(env, /*set_defaults=*/false);
  };
  c.node(0).HandleDatagram(AddressOf(1), named_from(1), c.now());
  c.node(0).HandleDatagram(AddressOf(2), named_from(2), c.now());
  EXPECT_EQ(c.node(0).Counters().rejected_by_reason["seal_sender_collision"], 1u);
  wire::Envelope bare = CrawlPush(1, 9, 0xf0);
  const uint64_t bits_before = SetBits(c.node(0));
  c.node(0).HandleDatagram(AddressOf(1), twin.Seal(bare, /*set_defaults=*/false), c.now());
  EXPECT_EQ(c.node(0).Counters().rejected_by_reason["unattributed"], 1u);
  c.node(0).HandleDatagram(AddressOf(1), named_from(1), c.now());
  bare.mutable_tree()->set_seq(2);
  c.node(0).HandleDatagram(AddressOf(1), twin.Seal(bare, /*set_defaults=*/false), c.now());
  EXPECT_EQ(c.node(0).Counters().rejected_by_reason["unattributed"], 2u);
  EXPECT_EQ(c.node(0).Counters().rejected_by_reason["seal_sender_collision"], 1u);
  EXPECT_EQ(SetBits(c.node(0)), bits_before);
}

}  // namespace
}  // namespace pollen::node::testing
