// Frames from outside: garbage, forgeries, replays and parameter mismatches
// change nothing and are counted by reason.
#include <gtest/gtest.h>

#include <optional>

#include "crdt/generations.h"
#include "node/core/anti_entropy.h"
#include "node/core/catalog.h"
#include "node/core/dissemination.h"
#include "node/core/epochs.h"
#include "node/core/push_delivery.h"
#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

// Everything observable about a node's replicated state.
struct Observed {
  std::vector<std::pair<std::string, std::vector<std::pair<uint64_t, uint64_t>>>> filters;
  friend bool operator==(const Observed&, const Observed&) = default;
};

Observed Observe(Cluster& c, size_t n) {
  Observed o;
  for (const FilterInfo& f : c.node(n).Filters()) {
    std::vector<std::pair<uint64_t, uint64_t>> gens;
    for (const GenerationInfo& g : f.generations) gens.emplace_back(g.epoch, g.digest);
    o.filters.emplace_back(f.config.name, gens);
  }
  return o;
}

class Frames : public ::testing::Test {
 protected:
  Frames() : forger_(TestSecret()) {
    ClusterOptions o;
    o.nodes = 1;
    o.filters = {SharedFilter("crawl")};
    cluster_ = std::make_unique<Cluster>(o);
    cluster_->StartAll();
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(node().Add("crawl", "k" + std::to_string(i)).ok());
    cluster_->RunFor(1s);
    (void)node().TakeEvents();
    cluster_->events(0).clear();
    auto entry = MakeCatalogEntry(SharedFilter("crawl"), TestSecret(), 0, "");
    EXPECT_TRUE(entry.ok());
    params_ = entry->params;
  }
  Node& node() { return cluster_->node(0); }

  // Delivers a frame; expects it refused for `reason` with no state change.
  void ExpectRejected(const std::string& frame, const std::string& reason, bool stream = false) {
    const Observed before = Observe(*cluster_, 0);
    const uint64_t count = Count(reason);
    if (stream) {
      node().HandleStreamFrame("addr-evil", frame, cluster_->now());
    } else {
      node().HandleDatagram("addr-evil", frame, cluster_->now());
    }
    EXPECT_EQ(Count(reason), count + 1) << reason;
    EXPECT_EQ(Observe(*cluster_, 0), before);
    std::vector<Event> events = node().TakeEvents();
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().detail, reason);
    EXPECT_TRUE(node().TakeOutgoing().empty());
  }
  uint64_t Count(const std::string& reason) {
    auto c = node().Counters().rejected_by_reason;
    return c.count(reason) ? c[reason] : 0;
  }
  wire::Envelope DeltaEnvelope(crdt::FilterParams params, uint64_t epoch) {
    wire::Envelope env;
    ToWire(params, env.mutable_delta()->mutable_filter());
    env.mutable_delta()->set_epoch(epoch);
    std::vector<crdt::WordBits> words = {{5, 0xff}, {77, 1}};
    env.mutable_delta()->set_positions(EncodeWords(words, 0, params.shape.bits()));
    return env;
  }

  std::unique_ptr<Cluster> cluster_;
  Forger forger_;
  crdt::FilterParams params_;
};

TEST_F(Frames, GarbageIsRejected) {
  Rng rng(1);
  for (int i = 0; i < 200; ++i) {
    std::string junk(rng.Below(300), '\0');
    for (char& ch : junk) ch = static_cast<char>(rng.Next());
    const Observed before = Observe(*cluster_, 0);
    const NodeCounters c0 = node().Counters();
    node().HandleDatagram("addr-evil", junk, cluster_->now());
    const NodeCounters c1 = node().Counters();
    uint64_t r0 = 0, r1 = 0;
    for (auto& [k, v] : c0.rejected_by_reason) r0 += v;
    for (auto& [k, v] : c1.rejected_by_reason) r1 += v;
    EXPECT_EQ(r1, r0 + 1);
    EXPECT_EQ(Observe(*cluster_, 0), before);
  }
  EXPECT_TRUE(node().TakeOutgoing().empty());
}

TEST_F(Frames, TamperedForgedReplayedAndOversizedFrames) {
  std::string good = forger_.Seal(DeltaEnvelope(params_, 0));
  std::string tampered = good;
  tampered[tampered.size() - 3] ^= 0x40;
  ExpectRejected(tampered, "auth");
  // Sealed under another cluster secret: an unknown key id.
  Forger stranger(TestSecret(999));
  ExpectRejected(stranger.Seal(DeltaEnvelope(params_, 0)), "unknown_key");
  // Genuine, then replayed.
  node().HandleDatagram("addr-x", good, cluster_->now());
  EXPECT_EQ(Count("replay"), 0u);
  ExpectRejected(good, "replay");
  // Too large for a datagram (fine as a stream frame).
  wire::Envelope big = DeltaEnvelope(params_, 0);
  big.set_sender_name(std::string(2000, 'x'));
  ExpectRejected(forger_.Seal(big, false), "oversize");
  ExpectRejected("", "malformed");
  std::string bad_version = forger_.Seal(DeltaEnvelope(params_, 0));
  bad_version[0] = 9;
  ExpectRejected(bad_version, "version");
}

TEST_F(Frames, ValidlySealedButMalformedContent) {
  ExpectRejected(forger_.SealBytes("\xff\xff\xff garbage"), "malformed");
  wire::Envelope v2 = DeltaEnvelope(params_, 0);
  v2.set_version(2);
  ExpectRejected(forger_.Seal(v2), "version");
  ExpectRejected(forger_.Seal(wire::Envelope()), "malformed");  // no body
  // Delta: corrupt positions, bad params, epoch too large.
  wire::Envelope env = DeltaEnvelope(params_, 0);
  env.mutable_delta()->set_positions("\x07\x01\x02");
  ExpectRejected(forger_.Seal(env), "malformed");
  env = DeltaEnvelope(params_, 0);
  env.mutable_delta()->mutable_filter()->set_k(0);
  ExpectRejected(forger_.Seal(env), "malformed");
  env = DeltaEnvelope(params_, 0);
  env.mutable_delta()->mutable_filter()->set_filter_id(crdt::kRoutingKeyId);  // no filter's identity
  ExpectRejected(forger_.Seal(env), "malformed");
  ExpectRejected(forger_.Seal(DeltaEnvelope(params_, ~uint64_t{0})), "malformed");
  // Anti-entropy: wrong summary count, out-of-range wanted range, bad range data.
  wire::Envelope req;
  wire::FilterSummary* fs = req.mutable_sync_request()->add_filters();
  ToWire(params_, fs->mutable_filter());
  wire::GenerationSummary* gs = fs->add_generations();
  gs->set_blocks_per_range(BlocksPerRange(params_.shape.blocks));
  gs->add_summaries(1);
  ExpectRejected(forger_.Seal(req), "malformed", true);
  wire::Envelope ranges;
  ranges.mutable_sync_ranges()->set_reply(true);
  wire::FilterRanges* fr = ranges.mutable_sync_ranges()->add_filters();
  ToWire(params_, fr->mutable_filter());
  wire::GenerationRanges* gr = fr->add_generations();
  gr->set_blocks_per_range(BlocksPerRange(params_.shape.blocks));
  gr->add_wanted(1'000'000);
  ExpectRejected(forger_.Seal(ranges), "malformed", true);
  gr->clear_wanted();
  wire::RangeData* rd = gr->add_data();
  rd->set_range(0);
  rd->set_positions("\x01\x09");
  ExpectRejected(forger_.Seal(ranges), "malformed", true);
  // Catalog: a digest filter without owner.
  wire::Envelope cat;
  auto entry = MakeCatalogEntry(SharedFilter("other"), TestSecret(), 5, "n9");
  ASSERT_TRUE(entry.ok());
  ToWire(*entry, 0, cat.mutable_catalog()->add_entries());
  cat.mutable_catalog()->mutable_entries(0)->set_scope(1);
  ExpectRejected(forger_.Seal(cat), "malformed");
  EXPECT_FALSE(node().Info("other").ok());
}

TEST_F(Frames, ParameterMismatchIsRefused) {
  const Observed before = Observe(*cluster_, 0);
  // Same name, other shape: a legitimate frame whose merge must be refused.
  auto other = crdt::MakeParams("crawl", 50'000, 0.001, 2, TestSecret());
  ASSERT_TRUE(other.ok());
  ASSERT_FALSE(*other == params_);
  node().HandleDatagram("addr-x", forger_.Seal(DeltaEnvelope(*other, 0)), cluster_->now());
  EXPECT_EQ(Count("params"), 1u);
  // Other generation count, other key id.
  crdt::FilterParams g3 = params_;
  g3.generations = 3;
  node().HandleDatagram("addr-x", forger_.Seal(DeltaEnvelope(g3, 0)), cluster_->now());
  crdt::FilterParams key = params_;
  key.key_id ^= 1;
  node().HandleDatagram("addr-x", forger_.Seal(DeltaEnvelope(key, 0)), cluster_->now());
  // Another identity (a filter copied from another under this name).
  crdt::FilterParams identity = params_;
  identity.filter_id ^= 1;
  node().HandleDatagram("addr-x", forger_.Seal(DeltaEnvelope(identity, 0)), cluster_->now());
  EXPECT_EQ(Count("params"), 4u);
  EXPECT_EQ(CountEvents(node().TakeEvents(), Event::Kind::kMergeRefused), 4u);
  EXPECT_EQ(Observe(*cluster_, 0), before);
  // Epoch announcements under other parameters are refused as well.
  wire::Envelope ep;
  wire::FilterEpoch* fe = ep.mutable_epochs()->add_epochs();
  ToWire(*other, fe->mutable_filter());
  fe->set_epoch(5);
  node().HandleDatagram("addr-x", forger_.Seal(ep), cluster_->now());
  EXPECT_EQ(Count("params"), 5u);
  EXPECT_EQ(node().Info("crawl")->epoch, 0u);
  // The matching one is accepted and merges.
  node().HandleDatagram("addr-x", forger_.Seal(DeltaEnvelope(params_, 0)), cluster_->now());
  EXPECT_NE(Observe(*cluster_, 0), before);
}

// A packed Gossip frame is applied whole or not at all.
TEST_F(Frames, GossipFrameIsValidatedWholeBeforeAnyPartApplies) {
  wire::Envelope env;
  wire::Gossip* g = env.mutable_gossip();
  *g->add_deltas() = DeltaEnvelope(params_, 0).delta();
  wire::Delta* bad = g->add_deltas();
  *bad = DeltaEnvelope(params_, 0).delta();
  bad->set_positions("\x07\x01\x02");  // corrupt
  ExpectRejected(forger_.Seal(env), "malformed");
  // A bad epoch announcement or catalog entry spoils the valid delta too.
  env.mutable_gossip()->mutable_deltas()->RemoveLast();
  wire::FilterEpoch* fe = env.mutable_gossip()->add_epochs();
  ToWire(params_, fe->mutable_filter());
  fe->set_epoch(~uint64_t{0});
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_gossip()->clear_epochs();
  auto entry = MakeCatalogEntry(SharedFilter("other"), TestSecret(), 5, "n9");
  ASSERT_TRUE(entry.ok());
  ToWire(*entry, 0, env.mutable_gossip()->add_catalog());
  env.mutable_gossip()->mutable_catalog(0)->set_scope(1);  // digest without owner
  ExpectRejected(forger_.Seal(env), "malformed");
  EXPECT_FALSE(node().Info("other").ok());
}

// Tree frames (tree dissemination): a bad link code, an oversize beacon name
// or a bad part of the pushed data refuses the whole frame; a valid push
// from a sender that is no member still merges (it holds the key).
TEST_F(Frames, TreeFrameIsValidatedWholeBeforeAnyPartApplies) {
  wire::Envelope env;
  *env.mutable_tree()->mutable_data()->add_deltas() = DeltaEnvelope(params_, 0).delta();
  env.mutable_tree()->set_link(4);
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->set_link(1);
  env.mutable_tree()->mutable_beacon()->set_root(std::string(256, 'r'));
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->mutable_beacon()->set_root("r");
  env.mutable_tree()->mutable_beacon()->set_parent(std::string(256, 'p'));
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->clear_beacon();
  env.mutable_tree()->mutable_data()->mutable_deltas(0)->set_positions("\x07\x01\x02");  // corrupt
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->mutable_data()->mutable_deltas(0)->set_positions(DeltaEnvelope(params_, 0).delta().positions());
  env.mutable_tree()->set_seq(4);  // numbered, but on no stream
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->set_stream(9);
  env.mutable_tree()->add_nack(2);  // feedback, but on no stream
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->set_ack_stream(5);
  for (uint64_t seq = 3; seq < 3 + PushDelivery::kMaxNacks; ++seq) env.mutable_tree()->add_nack(seq);  // one too many
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->clear_nack();
  env.mutable_tree()->add_nack(5);
  env.mutable_tree()->add_nack(5);  // not ascending: one push resent twice
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->clear_nack();
  env.mutable_tree()->set_seq(PushDelivery::kMaxSeq);  // would overflow the receive window
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->set_seq(4);
  const Observed before = Observe(*cluster_, 0);
  node().HandleDatagram("addr-evil", forger_.Seal(env), cluster_->now());
  EXPECT_NE(Observe(*cluster_, 0), before);  // merged
}

// A new filter's bits can outrun its catalog entry (another frame, another
// path): they are held, and merged when the filter is installed, from a
// peer's entry or by a local Reserve. Bits under other parameters wait for
// their own entry; bits held longer than an anti-entropy interval, or for a
// name deleted meanwhile, are dropped. Nothing of it is a peer's fault.
class HeldDeltasFrames : public Frames {
 protected:
  std::string CatalogFrame(const CatalogEntry& e) {
    wire::Envelope env;
    ToWire(e, 0, env.mutable_catalog()->add_entries());
    return forger_.Seal(env);
  }
  void Deliver(const std::string& frame) { node().HandleDatagram("addr-x", frame, cluster_->now()); }
  uint64_t SetBits(const std::string& name) { return node().Info(name)->generations.back().set_bits; }
  CatalogEntry Entry(const FilterConfig& f, uint64_t stamp, const std::string& creator) {
    auto e = MakeCatalogEntry(f, TestSecret(), stamp, creator);
    EXPECT_TRUE(e.ok());
    return *e;
  }
};

TEST_F(HeldDeltasFrames, MergedWhenThePeersEntryComes) {
  const CatalogEntry fresh = Entry(SharedFilter("fresh"), 5, "n9");
  Deliver(forger_.Seal(DeltaEnvelope(fresh.params, 0)));
  EXPECT_FALSE(node().Info("fresh").ok());
  EXPECT_EQ(node().Counters().held_deltas, 1u);
  EXPECT_EQ(node().Counters().unknown_filter, 1u);
  Deliver(CatalogFrame(fresh));
  EXPECT_EQ(SetBits("fresh"), 9u);  // 0xff and 1
  EXPECT_EQ(node().Counters().held_deltas_released, 1u);
  EXPECT_TRUE(node().Counters().rejected_by_reason.empty());
}

TEST_F(HeldDeltasFrames, MergedWhenAClientHereCreatesTheSameFilter) {
  const CatalogEntry theirs = Entry(SharedFilter("both"), 5, "n9");
  Deliver(forger_.Seal(DeltaEnvelope(theirs.params, 0)));
  ASSERT_TRUE(node().Reserve(SharedFilter("both"), cluster_->now()).ok());
  EXPECT_EQ(SetBits("both"), 9u);
  EXPECT_EQ(node().Counters().held_deltas_released, 1u);
}

TEST_F(HeldDeltasFrames, BitsUnderOtherParametersWaitForTheirOwnEntry) {
  const CatalogEntry small = Entry(SharedFilter("twice", 50'000), 7, "n8");
  const CatalogEntry large = Entry(SharedFilter("twice"), 6, "n7");  // earlier stamp: wins
  ASSERT_FALSE(small.params == large.params);
  Deliver(forger_.Seal(DeltaEnvelope(large.params, 0)));
  Deliver(CatalogFrame(small));  // the loser first: the winner's bits stay held
  EXPECT_EQ(SetBits("twice"), 0u);
  EXPECT_EQ(node().Counters().held_deltas_released, 0u);
  EXPECT_EQ(node().Counters().held_deltas_dropped, 0u);
  Deliver(CatalogFrame(large));  // replaces the loser, then takes its bits
  EXPECT_EQ(node().Info("twice")->config.capacity, 10'000u);
  EXPECT_EQ(SetBits("twice"), 9u);
  EXPECT_EQ(node().Counters().held_deltas_released, 1u);
  EXPECT_EQ(Count("params"), 0u);
}

TEST_F(HeldDeltasFrames, DroppedAfterAnAntiEntropyInterval) {
  const CatalogEntry late = Entry(SharedFilter("late"), 8, "n9");
  Deliver(forger_.Seal(DeltaEnvelope(late.params, 0)));
  cluster_->RunFor(3s);  // the test cluster's anti-entropy interval is 2 s
  EXPECT_EQ(node().Counters().held_deltas_dropped, 1u);
  Deliver(CatalogFrame(late));
  EXPECT_EQ(SetBits("late"), 0u);
  EXPECT_EQ(node().Counters().held_deltas_released, 0u);
}

// Bits of a deleted filter still on their way must not come back in a
// re-created one with the same parameters: a deletion drops what was held
// for the name, and nothing is held for a deleted name.
TEST_F(HeldDeltasFrames, NeverHeldForADeletedNameAndDroppedByADeletion) {
  const CatalogEntry old_entry = Entry(SharedFilter("gone"), 5, "n9");
  Deliver(forger_.Seal(DeltaEnvelope(old_entry.params, 0)));
  ASSERT_EQ(node().Counters().held_deltas, 1u);
  wire::Envelope del;
  ToWire(Tombstone{"gone", 5}, del.mutable_catalog()->add_tombstones());
  Deliver(forger_.Seal(del));
  EXPECT_EQ(node().Counters().held_deltas_dropped, 1u);
  Deliver(forger_.Seal(DeltaEnvelope(old_entry.params, 0)));  // more of the deleted filter's bits
  EXPECT_EQ(node().Counters().held_deltas, 1u);
  const CatalogEntry again = Entry(SharedFilter("gone"), 6, "n9");  // re-created: same parameters
  ASSERT_TRUE(again.params == old_entry.params);
  Deliver(CatalogFrame(again));
  EXPECT_EQ(SetBits("gone"), 0u);
  EXPECT_EQ(node().Counters().held_deltas_released, 0u);
}

// Compact filter references (catalog.h: CompactRef) resolve only against a
// filter held here with the same name and digest. In a tree push one that
// does not resolve is counted as unresolved_ref and changes nothing (a
// neighbour would NACK it: tree_dissemination_test); anywhere else, and in a
// form that mixes the two, it is malformed.
TEST_F(Frames, CompactFilterReferences) {
  wire::Envelope env;
  *env.mutable_tree()->mutable_data()->add_deltas() = DeltaEnvelope(params_, 0).delta();
  env.mutable_tree()->set_stream(9);
  env.mutable_tree()->set_seq(1);
  wire::FilterRef* ref = env.mutable_tree()->mutable_data()->mutable_deltas(0)->mutable_filter();
  CompactRef(ref);
  // Counted, not logged as a rejected frame: a neighbour resends it in full.
  const auto expect_unresolved = [&](const std::string& frame) {
    const Observed before = Observe(*cluster_, 0);
    const uint64_t count = Count("unresolved_ref");
    node().HandleDatagram("addr-evil", frame, cluster_->now());
    EXPECT_EQ(Count("unresolved_ref"), count + 1);
    EXPECT_EQ(Observe(*cluster_, 0), before);
    EXPECT_TRUE(node().TakeEvents().empty());
    EXPECT_TRUE(node().TakeOutgoing().empty());
  };
  ref->set_digest(ParamsDigest(params_) ^ 1);  // other parameters
  expect_unresolved(forger_.Seal(env));
  ref->set_name("nosuch");
  ref->set_digest(ParamsDigest(params_));
  expect_unresolved(forger_.Seal(env));
  env.mutable_tree()->clear_seq();  // not a numbered push: nothing to NACK
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->set_seq(1);
  ref->set_name("crawl");
  wire::FilterRef mixed;  // every full field, matching this node's filter, and a digest: neither form
  ToWire(params_, &mixed);
  mixed.set_digest(ParamsDigest(params_));
  *ref = mixed;
  ExpectRejected(forger_.Seal(env), "malformed");
  ref->Clear();
  ref->set_name("crawl");
  ref->set_digest(ParamsDigest(params_));
  env.mutable_tree()->clear_seq();
  env.mutable_tree()->mutable_data()->mutable_deltas(0)->set_epoch(kMaxEpoch + 1);  // resolves, bad epoch
  ExpectRejected(forger_.Seal(env), "malformed");
  env.mutable_tree()->mutable_data()->mutable_deltas(0)->set_epoch(0);

  wire::Envelope delta = DeltaEnvelope(params_, 0);  // a plain delta frame takes it only if it resolves
  CompactRef(delta.mutable_delta()->mutable_filter());
  delta.mutable_delta()->mutable_filter()->set_digest(ParamsDigest(params_) ^ 1);
  ExpectRejected(forger_.Seal(delta), "malformed");

  // Resolved: merged like a full reference.
  const Observed before = Observe(*cluster_, 0);
  node().HandleDatagram("addr-evil", forger_.Seal(env), cluster_->now());
  delta.mutable_delta()->mutable_filter()->set_digest(ParamsDigest(params_));
  node().HandleDatagram("addr-evil", forger_.Seal(delta), cluster_->now());
  EXPECT_NE(Observe(*cluster_, 0), before);
  EXPECT_EQ(Count("malformed"), 4u);
  EXPECT_EQ(Count("unresolved_ref"), 2u);
}

TEST_F(Frames, GossipFrameAppliesCatalogThenEpochsThenDeltas) {
  const Observed before = Observe(*cluster_, 0);
  wire::Envelope env;
  wire::Gossip* g = env.mutable_gossip();
  // A delta for epoch 0 of a filter announced in the same frame, plus an
  // epoch announcement for crawl and a delta for crawl's new epoch.
  auto entry = MakeCatalogEntry(SharedFilter("fresh"), TestSecret(), 5, "n9");
  ASSERT_TRUE(entry.ok());
  *g->add_deltas() = DeltaEnvelope(entry->params, 0).delta();
  ToWire(*entry, 0, g->add_catalog());
  wire::FilterEpoch* fe = g->add_epochs();
  ToWire(params_, fe->mutable_filter());
  fe->set_epoch(2);
  *g->add_deltas() = DeltaEnvelope(params_, 2).delta();
  node().HandleDatagram("addr-x", forger_.Seal(env), cluster_->now());
  EXPECT_TRUE(node().Counters().rejected_by_reason.empty());
  auto fresh = node().Info("fresh");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->generations.back().set_bits, 9u);  // 0xff and 1: merged, not unknown
  EXPECT_EQ(node().Counters().unknown_filter, 0u);
  auto crawl = node().Info("crawl");
  ASSERT_TRUE(crawl.ok());
  EXPECT_EQ(crawl->epoch, 2u);
  EXPECT_EQ(crawl->generations.back().set_bits, 9u);
  EXPECT_NE(Observe(*cluster_, 0), before);
}

// Issue 15: the node-frames fuzzer saw a filter's epoch go down. The sequence:
// an authenticated peer announces epoch 3, then a catalog entry for the same
// name with other parameters that wins under the catalog rule, at epoch 2. The
// node discards the loser and starts the winner at the winner's epoch: a new
// incarnation, reported and counted. Within an incarnation the epoch is a
// max-register, and a losing or same-parameter entry never lowers it.
TEST_F(Frames, EpochGoesDownOnlyWithANewIncarnation) {
  auto Send = [&](wire::Envelope env) { node().HandleDatagram("addr-x", forger_.Seal(std::move(env)), cluster_->now()); };
  auto Epochs = [&](const crdt::FilterParams& p, uint64_t epoch) {
    wire::Envelope env;
    wire::FilterEpoch* fe = env.mutable_epochs()->add_epochs();
    ToWire(p, fe->mutable_filter());
    fe->set_epoch(epoch);
    return env;
  };
  auto Catalog = [&](const CatalogEntry& e, uint64_t epoch) {
    wire::Envelope env;
    ToWire(e, epoch, env.mutable_catalog()->add_entries());
    return env;
  };
  auto local = MakeCatalogEntry(SharedFilter("crawl"), TestSecret(), 0, "");
  ASSERT_TRUE(local.ok());
  // A declaration with other parameters that beats the config entry (same
  // stamp 0; the descriptor decides).
  std::optional<CatalogEntry> winner;
  for (uint64_t capacity = 100; capacity < 100'000 && !winner; capacity += 100) {
    FilterConfig config = SharedFilter("crawl", capacity);
    config.rotate_interval = std::chrono::hours(1);
    auto e = MakeCatalogEntry(config, TestSecret(), 0, "");
    ASSERT_TRUE(e.ok());
    if (!(e->params == params_) && Precedes(*e, *local)) winner = *e;
  }
  ASSERT_TRUE(winner.has_value());

  const uint64_t first = node().Info("crawl")->incarnation;
  Send(Epochs(params_, 3));
  ASSERT_EQ(node().Info("crawl")->epoch, 3u);
  (void)node().TakeEvents();

  Send(Catalog(*winner, 2));
  auto info = node().Info("crawl");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->epoch, 2u);  // the winner's own epoch: lower, but another filter
  EXPECT_NE(info->incarnation, first);
  EXPECT_EQ(info->config.capacity, winner->config.capacity);
  EXPECT_EQ(info->blocks, winner->params.shape.blocks);
  EXPECT_EQ(node().Counters().filters_replaced, 1u);
  EXPECT_EQ(CountEvents(node().TakeEvents(), Event::Kind::kFilterDiscarded), 1u);
  const uint64_t second = info->incarnation;

  // Within the new incarnation nothing lowers the epoch again: an older epoch,
  // the loser's entry (it loses now, whatever its epoch), the loser's epochs.
  Send(Epochs(winner->params, 1));
  Send(Catalog(*local, 7));
  Send(Epochs(params_, 9));
  info = node().Info("crawl");
  EXPECT_EQ(info->epoch, 2u);
  EXPECT_EQ(info->incarnation, second);
  EXPECT_EQ(node().Counters().filters_replaced, 1u);

  // Entries with the same parameters (another rotation policy) are the same
  // filter: winning or losing, they keep the bits and the incarnation, and
  // their epoch only raises the register.
  ASSERT_TRUE(node().Add("crawl", "kept").ok());
  CatalogEntry same = *winner;
  same.config.rotate_interval = Duration(0);
  ASSERT_TRUE(Precedes(same, *winner));
  Send(Catalog(same, 0));
  EXPECT_TRUE(*node().Exists("crawl", "kept"));
  EXPECT_EQ(node().Info("crawl")->epoch, 2u);
  CatalogEntry later = *winner;
  later.stamp = 5;
  later.creator = "n9";
  Send(Catalog(later, 6));
  info = node().Info("crawl");
  EXPECT_EQ(info->epoch, 6u);
  EXPECT_EQ(info->incarnation, second);
  EXPECT_EQ(info->config.rotate_interval, Duration(0));  // the winning policy
  EXPECT_EQ(node().Counters().filters_replaced, 1u);
  // Only the loser's epoch announcement was refused (parameter mismatch).
  EXPECT_EQ(node().Counters().rejected_by_reason, (std::map<std::string, uint64_t>{{"params", 1}}));
}

}  // namespace
}  // namespace pollen::node::testing
