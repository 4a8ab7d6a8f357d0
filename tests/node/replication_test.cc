// Replication: dissemination, anti-entropy, idempotent merges, epochs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "crdt/generations.h"
#include "node/core/anti_entropy.h"
#include "node/core/catalog.h"
#include "node/core/dissemination.h"
#include "node/core/node_impl.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {


ClusterOptions Options(size_t nodes, uint64_t seed = 1) {
  ClusterOptions o;
  o.nodes = nodes;
  o.seed = seed;
  o.filters = {SharedFilter("crawl")};
  return o;
}


uint64_t EpochOf(Node& node, const std::string& filter) {
  auto info = node.Info(filter);
  return info.ok() ? info->epoch : 0;
}

// Fails the test if any node's epoch of `filter` ever goes back.
void WatchEpochs(Cluster& c, const std::string& filter, std::vector<uint64_t>& seen) {
  seen.assign(c.size(), 0);
  c.on_step = [&c, &seen, filter] {
    for (size_t n = 0; n < c.size(); ++n) {
      const uint64_t e = EpochOf(c.node(n), filter);
      EXPECT_GE(e, seen[n]) << "epoch went back at node " << n;
      seen[n] = std::max(seen[n], e);
    }
  };
}

TEST(Replication, AddAtOneNodeBecomesPresentEverywhere) {
  ClusterOptions o = Options(6);
  o.anti_entropy_interval = 1000s;  // dissemination alone (after the join syncs)
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  for (int i = 0; i < 60; ++i) {
    auto added = c.node(static_cast<size_t>(i) % c.size()).Add("crawl", Key(i));
    ASSERT_TRUE(added.ok());
    EXPECT_TRUE(*added);
  }
  EXPECT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 60); }, 3s));
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 3s));
  uint64_t received = 0;
  for (size_t n = 0; n < c.size(); ++n) received += c.node(n).Counters().delta_bits_received;
  EXPECT_GT(received, 0u);
  // Already present after propagation: "not new" at another node.
  auto again = c.node(3).Add("crawl", Key(0));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(c.node(2).Exists("unknown", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c.node(2).Add("unknown", "x").status().code(), absl::StatusCode::kNotFound);
}

// A gossip round's frame is sealed once and the same bytes go to each of the
// round's peers: every receiver opens it (one counter, seen once per
// receiver), no frame reaches a peer twice, and the keys arrive everywhere.
TEST(Replication, GossipFrameIsSealedOnceForAllItsPeers) {
  ClusterOptions o = Options(6);
  o.dissemination = NodeConfig::Dissemination::kFlood;  // flood's frames to `fanout` peers
  o.anti_entropy_interval = 1000s;  // dissemination alone (after the join syncs)
  std::map<std::string, std::vector<std::string>> gossip_to;  // frame bytes -> receivers
  bool watching = false;
  o.drop = [&](size_t, const Outgoing& out, const wire::Envelope& env) {
    if (watching && env.has_gossip() && env.gossip().deltas_size() > 0) gossip_to[out.bytes].push_back(out.to);
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  watching = true;
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i) % c.size()).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 30); }, 3s));
  ASSERT_FALSE(gossip_to.empty());
  size_t shared = 0;
  for (auto& [bytes, receivers] : gossip_to) {
    std::sort(receivers.begin(), receivers.end());
    EXPECT_EQ(std::adjacent_find(receivers.begin(), receivers.end()), receivers.end())
        << "a frame reached a peer twice";
    EXPECT_LE(receivers.size(), size_t{3});  // the fanout
    shared += receivers.size() > 1 ? 1 : 0;
  }
  EXPECT_GT(shared, 0u) << "each frame went to one peer: sealed per peer";
  for (size_t n = 0; n < c.size(); ++n) {
    const NodeCounters counters = c.node(n).Counters();
    EXPECT_EQ(counters.rejected_by_reason.count("replay"), 0u) << "node " << n;
    EXPECT_GT(counters.delta_bits_received, 0u) << "node " << n;
  }
}

TEST(Replication, AntiEntropyAloneConvergesWhenDisseminationIsLost) {
  ClusterOptions o = Options(8, 3);
  o.anti_entropy_interval = 1s;
  // Every dissemination message is lost, on both channels; membership and
  // anti-entropy get through.
  o.drop = [](size_t, const Outgoing&, const wire::Envelope& env) {
    return env.has_gossip() || env.has_tree() || env.has_delta() || env.has_epochs() || env.has_catalog();
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  Rng rng(5);
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(c.node(rng.Below(c.size())).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 60s));
  EXPECT_TRUE(AllPresent(c, "crawl", 0, 400));
  uint64_t received = 0, repaired = 0;
  for (size_t n = 0; n < c.size(); ++n) {
    received += c.node(n).Counters().delta_bits_received;
    repaired += c.node(n).Counters().ranges_repaired;
  }
  EXPECT_EQ(received, 0u);  // nothing came by dissemination
  EXPECT_GT(repaired, 0u);
  EXPECT_GT(c.dropped(), 0u);
}

// Anti-entropy between equal replicas: one datagram from the initiator (its
// catalog and a digest per generation) and no answer at all. The flat
// protocol sent every range summary (8 KiB per generation of 1024 ranges) by
// stream, and the whole catalog back.
TEST(Replication, AntiEntropyBetweenEqualReplicasIsOneDatagram) {
  ClusterOptions o = Options(3, 7);
  o.filters = {SharedFilter("crawl", 200'000)};  // 1024 ranges
  o.anti_entropy_interval = 1s;
  size_t first_legs = 0, first_legs_by_stream = 0, descents = 0, ranges = 0, largest = 0;
  bool watching = false;
  o.drop = [&](size_t, const Outgoing& out, const wire::Envelope& env) {
    if (!watching) return false;
    if (env.has_sync_request() && env.sync_request().partial()) ++descents;
    if (env.has_sync_request() && !env.sync_request().partial()) {
      ++first_legs;
      if (out.channel == Channel::kStream) ++first_legs_by_stream;
      largest = std::max(largest, out.bytes.size());
    }
    if (env.has_sync_ranges()) ++ranges;
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i) % c.size()).Add("crawl", Key(i)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 100); }, 10s));
  c.RunFor(2s);  // nothing in flight
  watching = true;
  c.RunFor(10s);
  EXPECT_GE(first_legs, 20u);  // three nodes, a run a second each
  EXPECT_EQ(first_legs_by_stream, 0u);
  EXPECT_LE(largest, 1200u);  // the default max_datagram_bytes
  EXPECT_EQ(descents, 0u);
  EXPECT_EQ(ranges, 0u);
}

// With tree dissemination and nothing going wrong, the wait between
// anti-entropy runs doubles up to anti_entropy_max_interval (the runs go on:
// the safety net stays); a member event (here a restart) brings it back to
// anti_entropy_interval within a gossip round, on every node that sees it
// (here: a node cut off until the others suspect it).
TEST(Replication, AntiEntropyBacksOffWhileHealthyAndReturnsOnTrouble) {
  ClusterOptions o = Options(4, 11);
  o.anti_entropy_interval = 1s;
  o.anti_entropy_max_interval = 16s;
  bool isolated = false;
  o.drop = [&](size_t from, const Outgoing& out, const wire::Envelope&) {
    return isolated && (from == 3 || out.to == AddressOf(3));
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  const auto runs = [&] {
    std::vector<uint64_t> r;
    for (size_t n = 0; n < c.size(); ++n) r.push_back(c.node(n).Counters().anti_entropy_runs);
    return r;
  };
  c.RunFor(60s);  // 1 + 2 + 4 + 8 + 16 s: at the cap by now
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i) % c.size()).Add("crawl", Key(i)).ok());
  const std::vector<uint64_t> before = runs();
  c.RunFor(160s);
  const std::vector<uint64_t> healthy = runs();
  EXPECT_TRUE(AllPresent(c, "crawl", 0, 50));
  for (size_t n = 0; n < c.size(); ++n) {
    const uint64_t ran = healthy[n] - before[n];
    EXPECT_GE(ran, 160u / 16 - 1) << "node " << n << ": the safety net stopped";
    EXPECT_LE(ran, 160u / 16 + 1) << "node " << n << ": no back-off (a fixed 1 s interval runs 160)";
  }
  // Once a node suspects the isolated one it waits 1 s, then 2 s, 4 s...:
  // at least two runs in the 8 s after its first suspicion, where a node
  // still backed off to 16 s makes at most one.
  isolated = true;
  std::vector<bool> suspected(3, false);
  std::vector<uint64_t> at_suspicion(3, 0);
  ASSERT_TRUE(c.RunUntil(
      [&] {
        for (size_t n = 0; n < 3; ++n) {
          if (suspected[n]) continue;
          for (const MemberInfo& m : c.node(n).Members()) {
            if (m.name == NameOf(3) && m.state != MemberState::kAlive) {
              suspected[n] = true;
              at_suspicion[n] = c.node(n).Counters().anti_entropy_runs;
            }
          }
        }
        return std::count(suspected.begin(), suspected.end(), true) == 3;
      },
      60s));
  c.RunFor(8s);
  for (size_t n = 0; n < 3; ++n) {
    EXPECT_GE(c.node(n).Counters().anti_entropy_runs - at_suspicion[n], 2u)
        << "node " << n << ": still backed off after a member event";
  }
}

// Replicas that differ in one key (dissemination is lost): the exchange
// descends digest -> groups -> ranges and repairs it with a few hundred bytes
// of summaries, where the flat protocol sent all 1024 range summaries.
TEST(Replication, AntiEntropyDescendsOnlyIntoWhatDiffers) {
  ClusterOptions o = Options(2, 8);
  o.filters = {SharedFilter("crawl", 200'000)};  // 1024 ranges
  o.anti_entropy_interval = 2s;
  size_t request_bytes = 0, descents = 0;
  bool watching = false;
  o.drop = [&](size_t, const Outgoing& out, const wire::Envelope& env) {
    if (!watching) return false;
    if (env.has_tree() || env.has_gossip()) return true;  // only anti-entropy repairs
    if (env.has_sync_request()) {
      request_bytes += out.bytes.size();
      if (env.sync_request().partial()) ++descents;
    }
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(5s);
  watching = true;
  ASSERT_TRUE(c.node(0).Add("crawl", "lonely").ok());
  ASSERT_TRUE(c.RunUntil([&] { return *c.node(1).Exists("crawl", "lonely"); }, 10s));
  EXPECT_GE(descents, 2u);  // groups, then ranges
  EXPECT_GT(c.dropped(), 0u);
  EXPECT_LT(request_bytes, 3000u) << "one flat summary alone is 8 KiB";
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 10s));
}

// Two replicas share 20,000 keys, then (from `watching` on, which the
// cluster's drop hook uses to drop dissemination) take 300 more each: bits
// "in flight" that only anti-entropy repairs. Sets `k` once they converge.
void ShareThenDiffer(Cluster& c, bool& watching, uint64_t* k) {
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  for (int i = 0; i < 20'000; ++i) ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 20'000); }, 20s));
  c.RunFor(3s);  // nothing in flight
  watching = true;
  for (int i = 20'000; i < 20'300; ++i) ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
  for (int i = 20'300; i < 20'600; ++i) ASSERT_TRUE(c.node(1).Add("crawl", Key(i)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 20s));
  EXPECT_TRUE(AllPresent(c, "crawl", 0, 20'600));
  EXPECT_GT(c.dropped(), 0u);
  *k = c.node(0).Info("crawl")->k;
}

// Adds the bits of a SyncRanges frame's ranges to `contents_bits` (a first
// content leg, reply=true) or `answer_bits`; counts, in `whole_ranges`, the
// contents sent for a whole range rather than some of its blocks.
void CountRangeBits(const wire::SyncRanges& msg, uint64_t& contents_bits, uint64_t& answer_bits,
                    uint64_t* whole_ranges = nullptr) {
  for (const wire::FilterRanges& fr : msg.filters()) {
    absl::StatusOr<crdt::FilterParams> params = FromWire(fr.filter());
    ASSERT_TRUE(params.ok());
    for (const wire::GenerationRanges& g : fr.generations()) {
      absl::StatusOr<crdt::FilterShape> shape = crdt::LayerShape(*params, g.layer());
      ASSERT_TRUE(shape.ok());
      for (const wire::RangeData& data : g.data()) {
        absl::StatusOr<std::vector<crdt::WordBits>> words = DecodeRange(data, *shape);
        ASSERT_TRUE(words.ok()) << words.status();
        if (whole_ranges != nullptr && msg.reply() && data.blocks().empty()) ++*whole_ranges;
        (msg.reply() ? contents_bits : answer_bits) += crdt::CountBits(*words);
      }
    }
  }
}

// The answering leg of an exchange carries only what the requester lacks:
// replicas that share 20,000 keys and differ by 300 on each side (bits "in
// flight") send back at most those bits, not the whole differing ranges.
TEST(Replication, AntiEntropyAnswersOnlyWhatTheRequesterLacks) {
  ClusterOptions o = Options(2, 9);
  o.filters = {SharedFilter("crawl", 200'000)};  // 1024 ranges
  o.anti_entropy_interval = 2s;
  uint64_t contents_bits = 0, answer_bits = 0;  // reply=true legs, reply=false legs
  bool watching = false;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    if (!watching) return false;
    if (env.has_tree() || env.has_gossip()) return true;  // only anti-entropy repairs
    if (env.has_sync_ranges()) CountRangeBits(env.sync_ranges(), contents_bits, answer_bits);
    return false;
  };
  Cluster c(o);
  uint64_t k = 0;
  ShareThenDiffer(c, watching, &k);
  ASSERT_GT(k, 0u);
  // One exchange gives the requester the other's 300 keys: at most 300·k bits.
  // (A second run that overlapped the first could send them twice.)
  EXPECT_GT(answer_bits, 0u);
  EXPECT_LE(answer_bits, 2 * 300 * k);
  // The requester's leg is its whole contents of every differing range: the
  // 20,000 shared keys' bits in them, far more.
  EXPECT_GT(contents_bits, 10 * answer_bits);
}

// With ranges of many blocks (here 19), the exchange descends one level
// more, to a hash per block of each differing range, and the first content
// leg carries only the blocks that differ: replicas sharing 20,000 keys and
// differing by 300 on each side (the bits in flight under load) exchange
// about those keys' blocks, where whole ranges carried ~10 times more.
TEST(Replication, AntiEntropyContentsAreOnlyTheDifferingBlocks) {
  ClusterOptions o = Options(2, 12);
  o.filters = {SharedFilter("crawl", 1'000'000)};  // ~18,700 blocks: 1024 ranges of 19
  o.anti_entropy_interval = 2s;
  uint64_t contents_bits = 0, answer_bits = 0, whole_ranges = 0, hashed_ranges = 0;
  bool watching = false;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    if (!watching) return false;
    if (env.has_tree() || env.has_gossip()) return true;  // only anti-entropy repairs
    if (env.has_sync_request()) {
      for (const wire::FilterSummary& fs : env.sync_request().filters()) {
        for (const wire::GenerationSummary& g : fs.generations()) {
          if (g.blocks()) hashed_ranges += static_cast<uint64_t>(g.items_size());
        }
      }
    }
    if (env.has_sync_ranges()) CountRangeBits(env.sync_ranges(), contents_bits, answer_bits, &whole_ranges);
    return false;
  };
  Cluster c(o);
  uint64_t k = 0;
  ShareThenDiffer(c, watching, &k);
  ASSERT_GT(k, 0u);
  // The 600 keys touch ~450 of the 1024 ranges: those were hashed, block by
  // block, and no range went whole.
  EXPECT_GT(hashed_ranges, 300u);
  EXPECT_EQ(whole_ranges, 0u);
  // Each side's contents of the ~600 differing blocks: their new bits and
  // the ~7 shared bits a block holds. Whole ranges: ~450 x 19 blocks x 7.
  EXPECT_GT(contents_bits, 0u);
  EXPECT_LE(contents_bits, 2 * 600 * 2 * k) << "(a second run that overlapped the first could send them twice)";
  EXPECT_GT(answer_bits, 0u);
  EXPECT_LE(answer_bits, 2 * 300 * k);
}

// A repair bigger than one exchange's budget goes on at once, exchange after
// exchange, rather than one exchange per anti-entropy interval: 20,000 keys
// only node 0 has, ~10 budgets' worth, reach node 1 within one interval.
// `capacity` 200,000: 1024 ranges of 4 blocks; 1,000,000: of 19 blocks,
// where block-hash legs are cut by the budget too.
void ContinuesWhileTheBudgetRunsOut(uint64_t capacity, uint64_t seed) {
  ClusterOptions o = Options(2, seed);
  o.filters = {SharedFilter("crawl", capacity)};
  o.anti_entropy_interval = 20s;
  o.anti_entropy_max_interval = 20s;
  o.configure = [](size_t, NodeConfig& c) { c.anti_entropy_round_bytes = 16 << 10; };
  bool dissemination = true;
  uint64_t cut_frames = 0, cut_block_legs = 0;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    if (env.has_sync_ranges() && env.sync_ranges().more()) ++cut_frames;
    if (env.has_sync_request() && env.sync_request().more()) ++cut_block_legs;
    return !dissemination && (env.has_tree() || env.has_gossip());
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  // Keys both nodes hold, in every range: a range empty on one side goes
  // whole, without block hashes (the next test), and this one is about
  // hashes cut by the budget.
  for (int i = 0; i < 10'000; ++i) ASSERT_TRUE(c.node(0).Add("crawl", "shared" + std::to_string(i)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 20s));
  c.RunFor(5s);
  dissemination = false;
  for (int i = 0; i < 20'000; ++i) ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
  const uint64_t continued_before = c.node(0).Counters().anti_entropy_continued + c.node(1).Counters().anti_entropy_continued;
  // The next run comes within one interval; without continuing, the repair
  // would take one run per budget.
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 21s));
  EXPECT_TRUE(AllPresent(c, "crawl", 0, 20'000));
  EXPECT_GE(cut_frames, 5u);
  EXPECT_GE(c.node(0).Counters().anti_entropy_continued + c.node(1).Counters().anti_entropy_continued - continued_before, 5u);
  if (capacity >= 1'000'000) {
    EXPECT_GE(cut_block_legs, 1u);  // 78 KB of block hashes, 16 KiB a leg
  }
}

TEST(Replication, AntiEntropyContinuesWhileTheBudgetRunsOut) { ContinuesWhileTheBudgetRunsOut(200'000, 10); }

TEST(Replication, AntiEntropyContinuesWhileTheBudgetRunsOutBlockByBlock) { ContinuesWhileTheBudgetRunsOut(1'000'000, 10); }

// A replica whose ranges are empty (a new or wiped node) takes them whole:
// no block hashes either way, whose 4 bytes a block cost more than the bits
// of a sparse filter (docs/web-scale.md).
TEST(Replication, AnEmptyReplicaTakesWholeRangesWithoutBlockHashes) {
  ClusterOptions o = Options(2, 11);
  o.filters = {SharedFilter("crawl", 1'000'000)};  // 1024 ranges of 19 blocks: hashed when both sides have bits
  bool dissemination = true;
  uint64_t hash_legs = 0;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    if (env.has_sync_request()) {
      for (const auto& f : env.sync_request().filters()) {
        for (const auto& g : f.generations()) hash_legs += g.blocks() ? 1 : 0;
      }
    }
    return !dissemination && (env.has_tree() || env.has_gossip());
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  dissemination = false;
  for (int i = 0; i < 5'000; ++i) ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 60s));
  EXPECT_TRUE(AllPresent(c, "crawl", 0, 5'000));
  EXPECT_EQ(hash_legs, 0u);
}

// A content leg cut by the budget goes on where it stopped, from the block
// hashes its sender kept, at the receiver's request (SyncRequest.resume):
// one leg per budget instead of a new descent (three legs) that would
// start again from the first differing range.
// The resumes and the descents (a new exchange's first request) in `env`.
void CountExchangeStarts(const wire::Envelope& env, uint64_t& resumes, uint64_t& descents) {
  if (!env.has_sync_request()) return;
  if (env.sync_request().resume()) {
    ++resumes;
  } else if (!env.sync_request().partial()) {
    ++descents;
  }
}

TEST(Replication, ACutContentLegGoesOnWhereItStopped) {
  ClusterOptions o = Options(2, 26);
  o.filters = {SharedFilter("crawl", 1'000'000)};  // 1024 ranges of 19 blocks: 80 KB of block hashes
  o.anti_entropy_interval = 20s;
  o.anti_entropy_max_interval = 20s;
  // Two block-hash legs; each one's contents, ~7% full, many budgets more.
  o.configure = [](size_t, NodeConfig& c) { c.anti_entropy_round_bytes = 64 << 10; };
  bool dissemination = true;
  uint64_t resumable = 0, resumes = 0, descents = 0;
  std::map<std::pair<size_t, uint64_t>, uint64_t> sent;  // (node, range): times its contents of the range went
  o.drop = [&](size_t from, const Outgoing&, const wire::Envelope& env) {
    if (dissemination) return false;
    if (env.has_tree() || env.has_gossip()) return true;
    CountExchangeStarts(env, resumes, descents);
    if (env.has_sync_ranges() && env.sync_ranges().reply()) {
      if (env.sync_ranges().resumable()) ++resumable;
      for (const wire::FilterRanges& fr : env.sync_ranges().filters()) {
        for (const wire::GenerationRanges& g : fr.generations()) {
          for (const wire::RangeData& d : g.data()) ++sent[{from, d.range()}];
        }
      }
    }
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(5s);
  dissemination = false;
  for (int i = 0; i < 200'000; ++i) ASSERT_TRUE(c.node(i % 2).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 21s));
  EXPECT_TRUE(AllPresent(c, "crawl", 0, 200'000));
  const uint64_t resumed = c.node(0).Counters().anti_entropy_resumed + c.node(1).Counters().anti_entropy_resumed;
  uint64_t repeated = 0;
  for (const auto& [where, times] : sent) repeated += times - 1;
  // ~12 budgets of contents each way, under two block-hash legs: each cut
  // leg went on from its kept hashes, and every range's contents went once.
  // (Without resumes: 0 resumes and 11 descents, one per budget; with them,
  // 9 resumes and 2 descents.)
  EXPECT_GE(resumable, 5u);
  EXPECT_EQ(resumes, resumable);
  EXPECT_EQ(resumed, resumes) << "every resume found its leg kept";
  EXPECT_LE(descents, 3u) << "the first exchange, and one per cut block-hash leg";
  EXPECT_EQ(repeated, 0u);
}

// The answer to a content leg (the bits its sender lacks in the ranges it
// sent) is cut by the budget too when one side holds many more keys, as after
// a partition whose sides wrote unevenly: its rest is kept, as their block
// hashes, and the receiver's resume brings it in one leg instead of a new
// descent.
TEST(Replication, ACutAnswerGoesOnWhereItStopped) {
  ClusterOptions o = Options(2, 27);
  o.filters = {SharedFilter("crawl", 1'000'000)};  // 1024 ranges of 19 blocks
  o.anti_entropy_interval = 20s;
  o.anti_entropy_max_interval = 20s;
  o.configure = [](size_t i, NodeConfig& c) {
    c.anti_entropy_round_bytes = 64 << 10;
    if (i == 0) {  // node 1, the smaller side, starts the exchanges: node 0 answers
      c.anti_entropy_interval = 1000s;
      c.anti_entropy_max_interval = 1000s;
    }
  };
  bool dissemination = true;
  uint64_t resumable_answers = 0, resumes = 0, descents = 0;
  o.drop = [&](size_t, const Outgoing&, const wire::Envelope& env) {
    if (dissemination) return false;
    if (env.has_tree() || env.has_gossip()) return true;
    CountExchangeStarts(env, resumes, descents);
    if (env.has_sync_ranges() && !env.sync_ranges().reply() && env.sync_ranges().resumable()) ++resumable_answers;
    return false;
  };
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(5s);
  dissemination = false;
  // Node 0 holds 9 keys in 10: its answers to node 1's contents are ~9x
  // their size.
  for (int i = 0; i < 200'000; ++i) ASSERT_TRUE(c.node(i % 10 == 0 ? 1 : 0).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 21s));
  EXPECT_TRUE(AllPresent(c, "crawl", 0, 200'000));
  const uint64_t resumed = c.node(0).Counters().anti_entropy_resumed + c.node(1).Counters().anti_entropy_resumed;
  // With kept answers: 4 resumable answers, 19 resumes (17 found a rest to
  // serve; 2 came after a newer resume had served it), 2 descents. Without
  // them: 0 resumable answers, 10 resumes, 21 descents (one per cut answer).
  // Kept without dropping the ranges a newer leg kept again, the resumes
  // stopped on a leg of stale blocks (too few new bits, kContinueYield) and
  // 42,000 keys were still missing here.
  EXPECT_GE(resumable_answers, 3u);
  EXPECT_GE(resumed, 10u);
  EXPECT_LE(resumed, resumes);
  EXPECT_LE(descents, 3u) << "the first exchange, and one per cut block-hash leg";
}

// A resume for a leg this node no longer keeps (evicted, expired, or it
// restarted) starts a new exchange instead; one that carries anything else
// is malformed, and changes nothing.
TEST(Replication, AResumeForNoKeptLegStartsAnExchangeAndAMalformedOneIsRejected) {
  ClusterOptions o = Options(2, 22);
  o.anti_entropy_interval = 1000s;
  o.anti_entropy_max_interval = 1000s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 60s));
  Forger forger(TestSecret());
  auto send_resume = [&](bool malformed) {
    wire::Envelope env;
    env.set_version(kWireVersion);
    env.set_sender_name(NameOf(1));
    env.set_sender_address(AddressOf(1));
    env.mutable_sync_request()->set_resume(true);
    if (malformed) env.mutable_sync_request()->set_partial(true);
    (void)c.node(0).TakeOutgoing();
    c.node(0).HandleStreamFrame(AddressOf(1), forger.Seal(env, /*set_defaults=*/false), c.now());
    uint64_t exchanges = 0;
    for (const Outgoing& out : c.node(0).TakeOutgoing()) {
      std::optional<wire::Envelope> sent = Peek(TestSecret(), out.bytes);
      ASSERT_TRUE(sent.has_value());
      if (sent->has_sync_request() && !sent->sync_request().partial() && !sent->sync_request().resume()) {
        EXPECT_EQ(out.to, AddressOf(1));
        EXPECT_EQ(out.channel, Channel::kStream);
        EXPECT_GT(sent->sync_request().filters_size(), 0);
        ++exchanges;
      }
    }
    EXPECT_EQ(exchanges, malformed ? 0u : 1u) << "malformed " << malformed;
  };
  const uint64_t rejected = c.node(0).Counters().rejected_by_reason["malformed"];
  send_resume(/*malformed=*/true);
  EXPECT_EQ(c.node(0).Counters().rejected_by_reason["malformed"], rejected + 1);
  send_resume(/*malformed=*/false);
  EXPECT_EQ(c.node(0).Counters().rejected_by_reason["malformed"], rejected + 1);
  EXPECT_EQ(c.node(0).Counters().anti_entropy_resumed, 0u);
}

// After a heal, every member of the other side may send its contents to the
// same node at once, each carrying the same bits. A node continues one bulk
// repair at a time (the one it clocks): another's continuation waits until
// that one has gone quiet, then goes on as a new descent from this side.
TEST(Replication, ANodeContinuesOneBulkRepairAtATime) {
  ClusterOptions o = Options(3, 29);
  o.filters = {SharedFilter("crawl", 1'000'000)};  // 1024 ranges of ~9,400 bits
  o.anti_entropy_interval = 1000s;
  o.anti_entropy_max_interval = 1000s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(5s);
  auto entry = MakeCatalogEntry(SharedFilter("crawl", 1'000'000), TestSecret(), 0, "");
  ASSERT_TRUE(entry.ok());
  auto info = c.node(0).Info("crawl");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->generations.size(), 1u);
  // The other side's contents: ~7% of the bits, which node 0 lacks.
  auto theirs = crdt::BlockedFilter::Create(entry->params.shape);
  ASSERT_TRUE(theirs.ok());
  Rng rng(30);
  for (int i = 0; i < 100'000; ++i) (*theirs)->Add(rng.Next());
  Forger forger(TestSecret());
  // A first content leg from node `from` of ranges [first, first + 100),
  // cut by the budget (`more`): ~47,000 bits, a bulk repair.
  auto content_leg = [&](size_t from, uint64_t first) {
    wire::Envelope env;
    env.set_version(kWireVersion);
    env.set_sender_name(NameOf(from));
    env.set_sender_address(AddressOf(from));
    wire::SyncRanges* sr = env.mutable_sync_ranges();
    sr->set_reply(true);
    sr->set_more(true);
    wire::FilterRanges* fr = sr->add_filters();
    ToWire(entry->params, fr->mutable_filter());
    fr->set_epoch(info->epoch);
    wire::GenerationRanges* g = fr->add_generations();
    g->set_epoch(info->generations[0].epoch);
    g->set_blocks_per_range(BlocksPerRange(entry->params.shape.blocks));
    uint64_t bits = 0;
    for (uint64_t r = first; r < first + 100; ++r) bits += EncodeRange(**theirs, r, g->add_data());
    EXPECT_GE(bits, kBulkRepairBits);
    return forger.Seal(env, /*set_defaults=*/false);
  };
  // Exchanges node 0 starts (or resumes) with node `to` among what it sent.
  auto continuations_to = [&](size_t to) {
    uint64_t n = 0;
    for (const Outgoing& out : c.node(0).TakeOutgoing()) {
      std::optional<wire::Envelope> sent = Peek(TestSecret(), out.bytes);
      EXPECT_TRUE(sent.has_value());
      if (out.to == AddressOf(to) && sent->has_sync_request() && !sent->sync_request().partial()) ++n;
    }
    return n;
  };
  (void)c.node(0).TakeOutgoing();
  const Time t = c.now();
  c.node(0).HandleStreamFrame(AddressOf(1), content_leg(1, 0), t);
  EXPECT_EQ(continuations_to(1), 1u) << "node 0 clocks node 1's repair";
  c.node(0).HandleStreamFrame(AddressOf(2), content_leg(2, 100), t + 10ms);
  EXPECT_EQ(continuations_to(2), 0u) << "node 2's waits while node 1's goes on";
  c.node(0).HandleStreamFrame(AddressOf(1), content_leg(1, 200), t + 100ms);
  EXPECT_EQ(continuations_to(1), 1u) << "the clocked repair goes on";
  EXPECT_EQ(continuations_to(2), 0u);
  // The bits of all three legs came in, the waiting repair's too: 300 of
  // the 1024 ranges.
  EXPECT_GT(c.node(0).Info("crawl")->generations[0].set_bits, (*theirs)->CountSetBits() / 4);
  // Node 1's repair goes quiet; node 2's goes on, as a new descent.
  c.node(0).Tick(t + 100ms + kBulkQuiet / 2);
  EXPECT_EQ(continuations_to(2), 0u) << "not quiet yet";
  const Time quiet = c.node(0).NextWakeup();
  EXPECT_LE(quiet, t + 100ms + kBulkQuiet + 1ms);
  c.node(0).Tick(t + 100ms + kBulkQuiet + 1ms);
  EXPECT_EQ(continuations_to(2), 1u);
  // Without a repair under way, a bulk leg is continued at once.
  c.node(0).HandleStreamFrame(AddressOf(2), content_leg(2, 300), t + 200ms + kBulkQuiet);
  EXPECT_EQ(continuations_to(2), 1u) << "node 2's is the clocked one now";
}

TEST(Replication, ConvergesUnderHeavyDatagramLoss) {
  ClusterOptions o = Options(10, 4);
  o.datagram_loss = 0.3;
  o.anti_entropy_interval = 2s;
  Cluster c(o);
  c.StartAll();
  c.RunFor(10s);
  Rng rng(6);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(c.node(rng.Below(c.size())).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 300); }, 120s));
}

// Deltas for "crawl" forged as a fake member would send them.
class ForgedDeltas : public ::testing::Test {
 protected:
  ForgedDeltas() : forger_(TestSecret()) {
    auto entry = MakeCatalogEntry(SharedFilter("crawl"), TestSecret(), 0, "");
    EXPECT_TRUE(entry.ok());
    params_ = entry->params;
  }
  std::string Delta(uint64_t epoch, std::vector<crdt::WordBits> words) {
    crdt::Canonicalize(words);
    wire::Envelope env;
    ToWire(params_, env.mutable_delta()->mutable_filter());
    env.mutable_delta()->set_epoch(epoch);
    env.mutable_delta()->set_positions(EncodeWords(words, 0, params_.shape.bits()));
    return forger_.Seal(env);
  }
  std::vector<crdt::WordBits> RandomWords(Rng& rng, size_t n) {
    std::vector<crdt::WordBits> words;
    for (size_t i = 0; i < n; ++i) words.push_back({rng.Below(params_.shape.blocks * 8), rng.Next() | 1});
    return words;
  }
  Forger forger_;
  crdt::FilterParams params_;
};

TEST_F(ForgedDeltas, MergesAreIdempotentAndOrderFree) {
  ClusterOptions o = Options(3);
  Cluster c(o);  // not started: no gossip, we deliver by hand
  Rng rng(9);
  std::vector<std::vector<crdt::WordBits>> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(RandomWords(rng, 30));
  std::vector<crdt::WordBits> all;
  for (auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  // Node 0: in order. Node 1: reversed, each twice. Node 2: the union at once.
  for (auto& b : batches) c.node(0).HandleDatagram("addr-x", Delta(0, b), c.now());
  for (int rep = 0; rep < 2; ++rep) {
    for (auto it = batches.rbegin(); it != batches.rend(); ++it) c.node(1).HandleStreamFrame("addr-x", Delta(0, *it), c.now());
  }
  c.node(2).HandleStreamFrame("addr-x", Delta(0, all), c.now());
  EXPECT_TRUE(c.Converged("crawl"));
  const auto before = c.Digests(0, "crawl");
  const uint64_t bits_before = c.node(0).Info("crawl")->generations.back().set_bits;
  EXPECT_GT(bits_before, 0u);
  // Re-applying anything already merged changes nothing.
  c.node(0).HandleDatagram("addr-x", Delta(0, batches[2]), c.now());
  c.node(0).HandleStreamFrame("addr-x", Delta(0, all), c.now());
  EXPECT_EQ(c.Digests(0, "crawl"), before);
  EXPECT_EQ(c.node(0).Info("crawl")->generations.back().set_bits, bits_before);
  EXPECT_TRUE(c.node(0).Counters().rejected_by_reason.empty());
}

TEST_F(ForgedDeltas, NewerEpochAdvancesAndStaleEpochIsDropped) {
  Cluster c(Options(1));
  Rng rng(10);
  c.node(0).HandleDatagram("addr-x", Delta(3, RandomWords(rng, 5)), c.now());
  auto info = c.node(0).Info("crawl");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->epoch, 3u);  // the delta implied epoch 3
  ASSERT_EQ(info->generations.size(), 2u);
  EXPECT_EQ(info->generations[0].epoch, 2u);
  EXPECT_GT(info->generations[1].set_bits, 0u);
  const auto before = c.Digests(0, "crawl");
  c.node(0).HandleDatagram("addr-x", Delta(1, RandomWords(rng, 5)), c.now());  // left the window
  EXPECT_EQ(c.Digests(0, "crawl"), before);
  EXPECT_EQ(c.node(0).Counters().stale_deltas, 1u);
  EXPECT_EQ(c.node(0).Info("crawl")->epoch, 3u);
}

TEST(Replication, TcpOnlyClusterSendsOnlyStreamFrames) {
  ClusterOptions o = Options(4, 15);
  o.tcp_only = true;  // the pump fails the test on any datagram
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i) % 4).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 50); }, 10s));
}

TEST(Replication, LargeBatchesGoAsStreamFramesAndStillArrive) {
  ClusterOptions o = Options(3, 16);
  o.dissemination = NodeConfig::Dissemination::kFlood;  // tree pushes are packed into datagrams instead
  o.filters = {SharedFilter("crawl", 200'000)};
  o.anti_entropy_interval = 1000s;
  o.inspect = true;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  c.RunFor(2s);
  // Dissemination rounds travel as packed Gossip bodies.
  const std::string small = "datagram/" + std::to_string(wire::Envelope::kGossip);
  const std::string large = "stream/" + std::to_string(wire::Envelope::kGossip);
  EXPECT_EQ(c.delivered().count(large), 0u);
  ASSERT_TRUE(c.node(1).Add("crawl", "one").ok());  // a small batch: a datagram
  EXPECT_TRUE(c.RunUntil([&] { return *c.node(2).Exists("crawl", "one"); }, 2s));
  EXPECT_GT(c.delivered().count(small), 0u);
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(c.node(0).Add("crawl", Key(i)).ok());  // ~35k bits in one round
  EXPECT_TRUE(c.RunUntil([&] { return AllPresent(c, "crawl", 0, 5000); }, 5s));
  EXPECT_GT(c.delivered().count(large), 0u);
  EXPECT_GT(c.node(1).Counters().delta_bits_received, 0u);
}

TEST(Replication, TwentyNodesConverge) {
  ClusterOptions o = Options(20, 12);
  o.datagram_loss = 0.1;
  o.anti_entropy_interval = 5s;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  Rng rng(13);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(c.node(rng.Below(c.size())).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 500); }, 60s));
}

TEST(Replication, RestartedNodeCatchesUpByAntiEntropy) {
  ClusterOptions o = Options(5, 14);
  o.anti_entropy_interval = 1000s;  // only the join-triggered syncs
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i) % 5).Add("crawl", Key(i)).ok());
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 10s));
  c.RunFor(2s);  // let the dissemination rounds finish
  // Crash node 3 and bring it back empty: it rejoins and pulls everything.
  c.Restart(3);
  EXPECT_FALSE(*c.node(3).Exists("crawl", Key(0)) && *c.node(3).Exists("crawl", Key(1)) && *c.node(3).Exists("crawl", Key(2)));
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 200); }, 30s));
  EXPECT_GT(c.node(3).Counters().ranges_repaired, 0u);
  // Crash node 1 with its snapshot: it comes back with everything at once.
  std::map<std::string, std::string> snaps = c.node(1).ExportSnapshots();
  c.Restart(1, snaps);
  EXPECT_TRUE(c.Converged("crawl"));
}

TEST(Epochs, OperatorRotationPropagatesAndNeverGoesBack) {
  ClusterOptions o = Options(6, 7);
  o.anti_entropy_interval = 5s;
  Cluster c(o);
  std::vector<uint64_t> seen;
  WatchEpochs(c, "crawl", seen);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  ASSERT_TRUE(c.node(2).Rotate("crawl", c.now()).ok());
  EXPECT_EQ(EpochOf(c.node(2), "crawl"), 1u);
  auto all_at = [&](uint64_t e) {
    for (size_t n = 0; n < c.size(); ++n) {
      if (EpochOf(c.node(n), "crawl") != e) return false;
    }
    return true;
  };
  EXPECT_TRUE(c.RunUntil([&] { return all_at(1); }, 5s));
  // Concurrent proposals of epoch 2 at two nodes are one proposal.
  ASSERT_TRUE(c.node(0).Rotate("crawl", c.now()).ok());
  ASSERT_TRUE(c.node(4).Rotate("crawl", c.now()).ok());
  EXPECT_TRUE(c.RunUntil([&] { return all_at(2); }, 5s));
  c.RunFor(3s);
  EXPECT_TRUE(all_at(2));
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 20s));
  EXPECT_EQ(c.node(1).Rotate("nope", c.now()).code(), absl::StatusCode::kNotFound);
}

TEST(Epochs, FillThresholdRotatesEverywhere) {
  ClusterOptions o = Options(4, 8);
  FilterConfig f = SharedFilter("fill", 2000, 0.01);
  f.rotate_fill = 0.25;
  o.filters = {f};
  Cluster c(o);
  std::vector<uint64_t> seen;
  WatchEpochs(c, "fill", seen);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  int added = 0;
  while (EpochOf(c.node(0), "fill") == 0 && added < 20000) {
    for (int i = 0; i < 100; ++i, ++added) ASSERT_TRUE(c.node(1).Add("fill", Key(added)).ok());
    c.Step();
  }
  ASSERT_GE(EpochOf(c.node(0), "fill"), 1u);
  auto same = [&] {
    const uint64_t e = EpochOf(c.node(0), "fill");
    for (size_t n = 1; n < c.size(); ++n) {
      if (EpochOf(c.node(n), "fill") != e) return false;
    }
    return c.Converged("fill");
  };
  EXPECT_TRUE(c.RunUntil(same, 30s));
  auto info = c.node(3).Info("fill");
  ASSERT_TRUE(info.ok());
  EXPECT_LT(info->generations.back().fill_ratio, 0.25);
}

TEST(Epochs, IntervalRotationAdvancesAllNodesTogether) {
  ClusterOptions o = Options(4, 9);
  FilterConfig f = SharedFilter("timed");
  f.rotate_interval = 5s;
  o.filters = {f};
  Cluster c(o);
  std::vector<uint64_t> seen;
  WatchEpochs(c, "timed", seen);
  c.StartAll();
  c.RunFor(12s);
  const uint64_t e = EpochOf(c.node(0), "timed");
  EXPECT_GE(e, 2u);
  EXPECT_LE(e, 3u);
  c.RunFor(500ms);
  const uint64_t now_e = EpochOf(c.node(0), "timed");
  for (size_t n = 1; n < c.size(); ++n) EXPECT_LE(std::max(now_e, EpochOf(c.node(n), "timed")) - std::min(now_e, EpochOf(c.node(n), "timed")), 1u);
}

TEST(Epochs, NoFalseNegativesInsideTheWindowAcrossRotation) {
  ClusterOptions o = Options(5, 11);
  o.filters[0].generations = 2;
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i) % 5).Add("crawl", Key(i)).ok());
  // Rotate while adds are still in flight.
  ASSERT_TRUE(c.node(1).Rotate("crawl", c.now()).ok());
  for (int i = 100; i < 200; ++i) ASSERT_TRUE(c.node(static_cast<size_t>(i) % 5).Add("crawl", Key(i)).ok());
  EXPECT_TRUE(c.RunUntil([&] { return c.Converged("crawl") && AllPresent(c, "crawl", 0, 200); }, 30s));
  for (size_t n = 0; n < c.size(); ++n) EXPECT_EQ(EpochOf(c.node(n), "crawl"), 1u);
}

}  // namespace
}  // namespace pollen::node::testing
