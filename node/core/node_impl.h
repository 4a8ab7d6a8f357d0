// Node::Impl, private to node/core: the state every node_*.cc shares and the
// declarations of its handlers. See node.cc for the concurrency rules and
// node.h for the contract. Only node/core sources include this file.
#pragma once

#include "node/core/node.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <tuple>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "crdt/grace_period.h"
#include "crdt/mix64.h"
#include "crdt/popcount.h"
#include "crdt/sizing.h"
#include "crdt/snapshot.h"
#include "node/core/anti_entropy.h"
#include "node/core/broadcast_tree.h"
#include "node/core/catalog.h"
#include "node/core/dissemination.h"
#include "node/core/epochs.h"
#include "node/core/filter_aliases.h"
#include "node/core/frames.h"
#include "node/core/gossip_packer.h"
#include "node/core/held_deltas.h"
#include "node/core/membership.h"
#include "node/core/push_delivery.h"
#include "node/core/push_pacing.h"
#include "node/core/recycle_buffer.h"
#include "node/core/routing.h"
#include "node/core/rng.h"
#include "node/core/summary_cache.h"

namespace pollen::node {
namespace node_internal {

constexpr size_t kMaxPendingWords = size_t{1} << 20;   // client adds not yet drained
constexpr size_t kMaxBufferedWords = size_t{1} << 20;  // bits waiting for the next gossip round
constexpr size_t kMaxInFlightWords = size_t{4} << 20;  // all batches being repeated
constexpr size_t kMaxHeldCost = size_t{1} << 18;       // HeldDeltas, in words (4 MiB): deltas for names not yet in the catalog
constexpr size_t kMaxDeltaWords = size_t{1} << 15;     // per Delta message
constexpr size_t kMaxFramePositions = size_t{1} << 23; // decoded bit positions per frame
constexpr size_t kMaxGossipDeltas = kMaxFilters * crdt::kMaxGenerations;  // Delta parts per Gossip frame
constexpr size_t kSendChunkPositions = size_t{1} << 22;
constexpr size_t kSyncChunkBytes = size_t{1} << 20;    // per anti-entropy frame
constexpr size_t kMinRoundBytes = size_t{16} << 10;    // NodeConfig::anti_entropy_round_bytes
// A SyncRanges frame that brings at least this many new bits, and at least
// 1/kContinueYield of the bits it carries, is a bulk repair, not pushed on
// down the tree (HandleSyncRanges). A cut-off subtree catching up brings a
// few seconds' bits among ranges mostly shared (a low yield), or a short
// answer; a healed partition's frames bring 150,000-350,000 new bits each
// (29 ranges of an 18 MB filter), at yields of 50-100%.
constexpr uint64_t kBulkRepairBits = uint64_t{1} << 15;
// An exchange whose budget (NodeConfig::anti_entropy_round_bytes) ran out is
// continued at once only if at least 1/kContinueYield of the bits it carried
// were new on one side or the other. Replicas under steady load differ in
// every range by bits in flight (~3% of the ranges' bits at 15,000 adds/s):
// those exchanges wait for the next run; a healed partition's yield ~90%.
constexpr uint64_t kContinueYield = 8;
// A clocked bulk repair (Impl::bulk_clocked) is over once no bulk frame of
// it has come for this long. Its legs follow each other a round trip apart
// (~0.1 s under jepsen heal-under-load's overload).
constexpr Duration kBulkQuiet = std::chrono::milliseconds(300);
// Cut content legs kept for a resume (Impl::cut_legs): peers, and block
// hashes per peer (4 MiB: one default budget's block-hash leg).
constexpr size_t kMaxCutLegs = 4;
constexpr size_t kMaxCutLegHashes = size_t{1} << 20;
// ... and for how long. A resume comes once the peer has merged the leg:
// ~2 s for a 4 MiB leg under jepsen heal-under-load (where a lifetime of
// one anti_entropy_interval, 1 s there, expired every kept leg). Stale
// hashes cost bytes, never bits: a block equal to the peer's older copy is
// a subset of its current one.
constexpr Duration kCutLegLifetime = std::chrono::seconds(30);
constexpr double kJoinSyncs = 3;      // expected syncs per member (re)appearance
constexpr size_t kMaxQueuedSyncs = 16;
constexpr size_t kMinDatagramBytes = 256;
constexpr Duration kMembersRefresh = std::chrono::milliseconds(100);  // Members() snapshot period when read
constexpr Duration kMembersIdleRefresh = std::chrono::seconds(1);    // ... when nobody reads it
constexpr size_t kMaxDatagramBytes = 65507;
constexpr char kSnapshotMagic[] = "PLNNODE1";  // 8 bytes
// A Tree frame's tags and lengths around its Gossip body, and its delivery
// fields (stream, seq, probe, ack_stream, ack; NACKs never ride on a push).
constexpr size_t kTreeWrapperBytes = 64;
constexpr uint32_t kBeaconRepeats = 3;  // rounds a changed tree beacon is sent in (loss: 0.1^3)
// A node whose beacon has not changed sends its periodic beacon less and less
// often: every tree_beacon_interval for kSteadyBeacons beacons after a
// change, then at double the last wait, up to kMaxBeaconBackoff times the
// interval. The periodic beacon only covers a changed beacon lost
// kBeaconRepeats times in a row; in a steady cluster it was a quarter of all
// frames (pollen-sim, N=1000, 0.5 adds/s: 1.3 of ~5.7 frames per node per
// second). Backing off from the first periodic beacon on failed
// TreeDissemination.ALostBeaconDoesNotCutASubtreeOff (30% of beacons lost,
// anti-entropy off) for one of its 4 seeds; as it is, 40 seeds of 40 pass,
// as they do with no backoff.
constexpr uint32_t kSteadyBeacons = 3;
constexpr uint32_t kMaxBeaconBackoff = 8;

// Per-filter tallies on this node. Relaxed atomics: counters and a flag read
// by metrics, not synchronization. The three counters share one cache line,
// so a single-key read bounces at most this line and the node-wide one.
struct alignas(64) FilterTallies {
  std::atomic<uint64_t> queries{0};           // keys tested
  std::atomic<uint64_t> answered_present{0};  // ... answered "may be present"
  std::atomic<uint64_t> false_positives{0};   // reported by clients (POLLEN.FALSEPOSITIVE)
  std::atomic<bool> saturated{false};         // set and cleared by CheckSaturation (driver)
};

struct FilterState {
  uint64_t uid = 0;  // changes when the state is replaced by a conflict winner
  CatalogEntry entry;
  std::shared_ptr<crdt::GenerationSet> set;
  // Bumped (release) after every add or merge that set a bit in `set`, so
  // Info() can reuse its bit counts and digests while nothing changed.
  // Shared by copies of this state (they share `set`).
  std::shared_ptr<std::atomic<uint64_t>> changes = std::make_shared<std::atomic<uint64_t>>(0);
  // Query outcomes and the saturation flag; shared by copies like `changes`.
  std::shared_ptr<FilterTallies> tallies = std::make_shared<FilterTallies>();
};

// A batch of new bits being repeated for a few gossip rounds.
struct InFlight {
  uint64_t filter_uid = 0;
  std::vector<crdt::WordBits> words;  // canonical
  uint32_t remaining = 0;
};

// Tree dissemination: bits set here by one received push (or by this node's
// own adds), waiting for the next push to the tree links.
struct TreeEntry {
  std::string from;  // the member it came from; empty: originated here
  std::map<DeltaBuffer::Key, DeltaBuffer::Bits> bits;  // canonical words
  size_t words = 0;
};

// Driver-only bookkeeping per filter name.
struct FilterClock {
  std::optional<Time> epoch_began;
  std::map<uint64_t, uint64_t> set_bits;  // per live sub-filter slot, from observed new bits
  // CheckGrowth's memory: the newest slot's set bits at its last estimate,
  // and the layer count last announced for the newest generation.
  uint64_t estimated_slot = ~uint64_t{0}, estimated_bits = 0;
  uint32_t announced_layers = 1;
  // The newest slot's item count at the last CheckGrowth (its growth rate).
  uint64_t rate_slot = ~uint64_t{0}, rate_items = 0;
};

// How many gossip rounds of a layer's current growth CheckGrowth looks
// ahead: about the rounds the news of a new layer takes to reach a cluster of
// tens of nodes (fanout 3: log3(20) + 1).
constexpr uint64_t kGrowthLookaheadRounds = 4;

// Saturation warnings: a fixed filter that refuses new keys when full warns
// from 90% of its capacity; any filter warns once its newest sub-filter's fill
// passes 0.6 (a Bloom filter at its design load with the best k is half full:
// above 0.6 its rate is several times the design rate).
constexpr double kSaturatedItemsRatio = 0.9;
constexpr double kSaturatedFill = 0.6;

// Per-type traffic counters are kept in arrays indexed by BodyIndex (a map
// lookup by name per frame showed up in profiles) and become maps in Counters().
constexpr size_t kBodyKinds = 13;
constexpr const char* kBodyNames[kBodyKinds] = {"membership", "catalog",   "delta",       "epochs",
                                                "sync_request", "sync_ranges", "gossip", "tree",
                                                "route_add",  "route_reply", "key_check", "key_check_reply",
                                                "unknown"};
inline size_t BodyIndex(wire::Envelope::BodyCase body) {
  switch (body) {
    case wire::Envelope::kMembership: return 0;
    case wire::Envelope::kCatalog: return 1;
    case wire::Envelope::kDelta: return 2;
    case wire::Envelope::kEpochs: return 3;
    case wire::Envelope::kSyncRequest: return 4;
    case wire::Envelope::kSyncRanges: return 5;
    case wire::Envelope::kGossip: return 6;
    case wire::Envelope::kTree: return 7;
    case wire::Envelope::kRouteAdd: return 8;
    case wire::Envelope::kRouteReply: return 9;
    case wire::Envelope::kKeyCheck: return 10;
    case wire::Envelope::kKeyCheckReply: return 11;
    default: return 12;
  }
}
inline size_t BodyIndex(const wire::Envelope& env) { return BodyIndex(env.body_case()); }
using TypeCounts = std::array<uint64_t, kBodyKinds>;
inline void AddTypeCounts(const TypeCounts& counts, std::map<std::string, uint64_t>* out) {
  for (size_t i = 0; i < kBodyKinds; ++i) {
    if (counts[i] != 0) (*out)[kBodyNames[i]] += counts[i];
  }
}

// The keys of a RouteAdd or a KeyCheck (the same limits, peer_checks.h):
// 1 to kMaxRouteKeys of them, none over kMaxRouteKeyBytes, kMaxRouteBytes in all.
template <typename Keys>
bool KeysWithinLimits(const Keys& keys) {
  if (keys.empty() || static_cast<size_t>(keys.size()) > kMaxRouteKeys) return false;
  size_t bytes = 0;
  for (const std::string& key : keys) {
    if (key.size() > kMaxRouteKeyBytes) return false;
    bytes += key.size();
  }
  return bytes <= kMaxRouteBytes;
}

inline absl::Status ValidateNodeConfig(const NodeConfig& c) {
  if (c.name.empty() || c.name.size() > Membership::kMaxNameBytes) return absl::InvalidArgumentError("node name must be 1 to 255 bytes");
  if (c.advertise.empty() || c.advertise.size() > Membership::kMaxAddressBytes) {
    return absl::InvalidArgumentError("advertise address must be 1 to 255 bytes");
  }
  if (c.cluster_label.size() > protocol::kMaxLabelBytes) return absl::InvalidArgumentError("cluster label too long");
  auto positive = [](Duration d) { return d.count() > 0; };
  if (!positive(c.gossip_interval) || !positive(c.probe_interval) || !positive(c.probe_timeout) ||
      !positive(c.anti_entropy_interval) || !positive(c.anti_entropy_max_interval) ||
      !positive(c.dead_reconnect_interval)) {
    return absl::InvalidArgumentError("intervals must be positive");
  }
  if (c.probe_timeout >= c.probe_interval) return absl::InvalidArgumentError("probe_timeout must be below probe_interval");
  // (An exchange carries at least one range whatever its budget.)
  if (c.anti_entropy_round_bytes < kMinRoundBytes) {
    return absl::InvalidArgumentError(absl::StrCat("anti_entropy_round_bytes must be at least ", kMinRoundBytes));
  }
  if (c.fanout < 1 || c.fanout > 64) return absl::InvalidArgumentError("fanout must be 1 to 64");
  if (c.indirect_probes > 64) return absl::InvalidArgumentError("indirect_probes must be at most 64");
  if (!(c.suspicion_multiplier > 0 && c.suspicion_multiplier < 1000)) {
    return absl::InvalidArgumentError("suspicion_multiplier out of range");
  }
  if (c.max_datagram_bytes < kMinDatagramBytes || c.max_datagram_bytes > kMaxDatagramBytes) {
    return absl::InvalidArgumentError(absl::StrCat("max_datagram_bytes must be ", kMinDatagramBytes, " to ", kMaxDatagramBytes));
  }
  // A random 1-out overlay is usually disconnected; 2 or more keeps it whole.
  if (c.tree_degree < 2 || c.tree_degree > 32) return absl::InvalidArgumentError("tree_degree must be 2 to 32");
  if (!positive(c.tree_beacon_interval)) return absl::InvalidArgumentError("intervals must be positive");
  if (!positive(c.route_timeout)) return absl::InvalidArgumentError("route_timeout must be positive");
  if (c.tree_push_delay.count() < 0) return absl::InvalidArgumentError("tree_push_delay must not be negative");
  if (c.tree_push_gap.count() < 0 || c.tree_push_gap > std::chrono::seconds(60)) {
    return absl::InvalidArgumentError("tree_push_gap must be 0 to 60 s");
  }
  if (c.filters.size() > kMaxFilters) return absl::InvalidArgumentError("too many filters");
  std::set<std::string> names;
  for (const FilterConfig& f : c.filters) {
    if (!names.insert(f.name).second) return absl::InvalidArgumentError(absl::StrCat("duplicate filter '", f.name, "'"));
  }
  return absl::OkStatus();
}

// Blocks of the layer in `slot` (0 if the layer cannot exist for `params`).
inline uint64_t LayerBlocks(const crdt::FilterParams& params, uint64_t slot) {
  absl::StatusOr<crdt::FilterShape> shape = crdt::LayerShape(params, crdt::LayerOfSlot(slot));
  return shape.ok() ? shape->blocks : 0;
}

inline uint64_t GenerationDigest(const crdt::BlockedFilter& filter) {
  return filter.RangeSummary(0, filter.shape().blocks);
}

}  // namespace node_internal
using namespace node_internal;  // private header: node/core sources only

struct Node::Impl {
  static constexpr uint64_t kSummarySaltTag = 0x73756d6d61727973ULL;  // "summarys"
  explicit Impl(NodeConfig c)
      : config(std::move(c)), rng(config.rng_seed), codec(config.secret, config.cluster_label, rng),
        pending(kMaxPendingWords), deltas(kMaxBufferedWords), held(kMaxHeldCost),
        summary_cache(crdt::Mix64(config.rng_seed ^ kSummarySaltTag)) {}  // not rng's next value: the simulator's draws stay as they were
  ~Impl() { delete published.load(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // ---- state ----
  NodeConfig config;
  Rng rng;
  FrameCodec codec;
  std::unique_ptr<Membership> membership;
  uint64_t key_id = 0;

  // std::less<>: lookups by string_view without building a std::string.
  using FilterMap = std::map<std::string, std::shared_ptr<const FilterState>, std::less<>>;
  FilterMap filters;  // driver only
  // An immutable copy of `filters` for client threads, replaced by Publish:
  // they read it inside a published_grace section, so lookups take no lock.
  std::atomic<const FilterMap*> published{new FilterMap()};  // owned
  mutable crdt::GracePeriod published_grace;
  std::map<std::string, FilterClock> clocks;                           // driver only
  uint64_t next_uid = 1;
  uint64_t filters_version = 0;  // driver only: bumped by every change of `filters`

  PendingAdds pending;
  // DrainPending's working buffers, kept from round to round (RecycleBuffer).
  std::vector<PendingAdds::Entry> drained_adds;
  std::vector<crdt::WordBits> drained_words;
  DeltaBuffer deltas;
  std::set<std::string> announce_catalog, announce_epochs;  // driver only: new since the last round
  std::map<std::string, uint32_t> catalog_rounds, epoch_rounds;  // announcements still to repeat
  // Deleted names -> deleted_through (catalog.h), at most kMaxTombstones.
  // Driver only, like their announcements.
  std::map<std::string, uint64_t, std::less<>> tombstones;
  std::set<std::string> announce_tombstones;
  std::map<std::string, uint32_t> tombstone_rounds;
  std::deque<std::pair<DeltaBuffer::Key, InFlight>> inflight;    // batches still to repeat
  size_t inflight_words = 0;
  std::deque<std::string> ae_queue;  // names of members that (re)appeared, to sync with
  HeldDeltas held;  // driver only: deltas that arrived before their filter's catalog entry

  // Tree dissemination (config.dissemination == kTree), driver only.
  std::unique_ptr<BroadcastTree> tree;  // null in flood mode
  std::unique_ptr<PushDelivery> delivery;  // with `tree`: numbered pushes, NACKs, probes
  std::unique_ptr<PushPacing> pacing;      // with `tree`: when the next push may go
  std::vector<TreeEntry> tree_pending;  // at most kMaxBufferedWords words
  std::vector<crdt::WordBits> union_scratch;  // PushEntries' working space (recycled each GossipRound)
  size_t tree_pending_words = 0;
  Time next_push = Time::max();         // set while pending entries wait (own adds join them at the gossip round)
  bool root_link_refused = false;       // the last link to the smallest live member was refused
  Time next_beacon = Time::min();       // the next unconditional beacon
  uint32_t beacon_backoff = 1;          // next_beacon's multiple of tree_beacon_interval (1..kMaxBeaconBackoff)
  uint32_t steady_beacons = 0;          // periodic beacons since the beacon last changed
  Time next_root_check = Time::min();   // the next LinkTowardsTheRoot
  bool beacon_changed = false;          // send beacons at the next round
  uint32_t beacon_repeats = 0;          // rounds in which the current beacon still goes out
  // Membership::view_version and BroadcastTree::version when the overlay was
  // last checked, the delivery links last trimmed and the tree last
  // recomputed: while the inputs are unchanged, none of these is repeated.
  uint64_t overlay_seen_view = ~uint64_t{0};
  uint64_t retained_shape = ~uint64_t{0};
  uint64_t tree_seen_view = ~uint64_t{0};
  uint64_t tree_seen_shape = ~uint64_t{0};
  // Tree neighbours whose last beacon advertised kTreeFeatureCompactRefs
  // (a subset of tree->Neighbours(), pruned with the delivery links).
  std::set<std::string> compact_ref_links;
  // Likewise for kTreeFeatureImplicitSender and kTreeFeatureFilterAliases.
  std::set<std::string> implicit_sender_links;
  std::set<std::string> alias_links;
  // Tree neighbours whose beacon advertises kTreeFeatureBarePushes (and
  // kTreeFeatureImplicitSender): pushes to them may go bare (PushHeader).
  std::set<std::string> bare_links;
  std::set<std::string> compact_seal_links;  // ... kTreeFeatureCompactSeal: tree frames to them sealed compact
  // Receiving side of bare pushes: the seal sender ids (FrameCodec, one per
  // channel and boot) of tree neighbours, learned from their tree frames that
  // carry a name; pruned with the delivery links. At most two per neighbour
  // and channel (the newest: a restart's new id and a late frame of the boot
  // before), and kMaxSealSenders in all.
  struct SealSender {
    std::string name;
    Channel channel = Channel::kDatagram;
    uint64_t learned = 0;  // seal_senders_learned when it was learned
    bool collided = false;  // claimed by two names: attributes nobody, kept (not pruned)
  };
  std::map<uint64_t, SealSender> seal_senders;
  uint64_t seal_senders_learned = 0;
  // Sending side: per bare link, pushes stay named until the link has
  // acknowledged a push past `named_until` (raised when the link says it
  // cannot attribute us, Tree.link = 3), and one in kNamedPushEvery is named
  // whatever happens (should that answer never arrive).
  struct BareLink {
    uint32_t stream = 0;  // our delivery stream on the link these refer to
    uint64_t named_until = 0;
    Time last_named{};
  };
  std::map<std::string, BareLink> bare_state;
  // Receiving side: when each source was last asked to name itself; at most
  // one ask per source and kNameAskEvery, for at most kMaxNameAsks sources.
  std::map<Address, Time> name_asks;
  static constexpr Duration kNameAskEvery = std::chrono::seconds(1);
  static constexpr size_t kMaxNameAsks = 64;
  static constexpr Duration kNamedPushEvery = std::chrono::seconds(5);
  // At most 64 neighbours (max_degree = 2 * tree_degree <= 64), two
  // channels and two boots each, and as many again for neighbours dropped
  // since the last prune.
  static constexpr size_t kMaxSealSenders = 512;
  FilterAliases aliases;  // with `tree`: both directions of every tree link
  DeltaBuffer* capture = nullptr;  // set by HandleTree: where MergeWords buffers new bits

  std::vector<Outgoing> out;
  std::vector<Event> events;

  mutable std::mutex stats_mu;
  NodeCounters stats;  // guarded by stats_mu, except the three atomics below
  TypeCounts bytes_out_type{}, frames_out_type{}, bytes_in_type{};  // guarded by stats_mu
  std::atomic<uint64_t> adds{0}, queries{0}, hits{0};

  mutable std::mutex members_mu;
  std::vector<MemberInfo> members_cache;  // guarded by members_mu
  uint64_t cached_incarnation = ~uint64_t{0};
  size_t cached_live = ~size_t{0};
  bool members_dirty = true;                // driver only
  mutable std::atomic<bool> members_requested{false};  // set by Members()
  mutable std::atomic<bool> members_ever_read{false};  // likewise, never cleared
  Time members_refreshed = Time::min();     // driver only
  bool members_refreshed_once = false;       // driver only: the snapshot at Create was taken
  uint64_t membership_rejected = 0;
  uint32_t membership_health = 0;  // last copied into stats
  uint64_t membership_stalls = 0;  // likewise

  SummaryCache summary_cache;  // driver only

  // Owner routing (node_routing.cc), driver only.
  Rendezvous rendezvous{config.secret};
  uint64_t rendezvous_view = ~uint64_t{0};
  bool rendezvous_left = false;
  std::map<uint64_t, RouteRequest> route_requests;      // by request id, at most kMaxRoutedInFlight
  std::deque<std::pair<Time, uint64_t>> route_deadlines; // (deadline, request id), in sending order
  std::map<uint64_t, RouteTicket> route_tickets;        // by ticket
  std::vector<RoutedAddResult> routed_done;
  std::vector<PeerAdds> peer_adds;  // only with config.report_peer_adds
  AnswerMemory route_answers;
  StandIns stand_ins;
  uint64_t next_route_id = 0;  // drawn from rng at the first request (runs without routing draw nothing)
  uint64_t next_ticket = 1;

  // WAIT and quorum EXISTS (node_peer_checks.cc), driver only.
  std::map<uint64_t, CheckTicket> check_tickets;  // by ticket (shares next_ticket), at most kMaxCheckTickets
  struct CheckRequest {
    uint64_t ticket = 0;
    uint32_t peer = 0, chunk = 0;
  };
  std::map<uint64_t, CheckRequest> check_requests;  // by request id, at most kMaxCheckRequests
  std::vector<PeerCheckResult> checks_done;
  uint64_t next_check_id = 0;  // drawn from rng at the first request, like next_route_id

  // Info() scans per generation, memoized by (uid, epoch) while `changes` is
  // unchanged. Bounded; any thread.
  // Each figure carries the change count it was computed at (kNotScanned:
  // never), so a count and a digest are memoized independently.
  static constexpr uint64_t kNotScanned = ~uint64_t{0};
  struct ScanResult {
    uint64_t bits_changes = kNotScanned, set_bits = 0;
    uint64_t digest_changes = kNotScanned, digest = 0;
  };
  mutable std::mutex scans_mu;
  mutable std::map<std::pair<uint64_t, uint64_t>, ScanResult> scans;  // guarded by scans_mu

  uint64_t frame_rejects = 0;             // driver only: Reject() calls and unresolved tree pushes so far
  absl::flat_hash_map<std::string, Time> last_data;  // driver only: by member name, see Peers(); never iterated in order

  bool started = false;
  Time now{0};
  Time next_gossip = Time::max();
  Time next_anti_entropy = Time::max();
  // Adaptive anti-entropy (NodeConfig::anti_entropy_max_interval), driver
  // only: the current wait, and TroubleCount() when it was last set.
  Duration anti_entropy_wait{0};
  uint64_t trouble_seen = 0;
  uint64_t ae_resume_range = 0;  // where this node's last budget-cut range data or block hashes stopped
  uint64_t ae_salts = 0;         // block-hash legs sent: each gets its own salt (NextBlockSalt)
  std::string summary_refresh_after;  // RefreshSummaries' round-robin: the last filter it finished
  uint64_t stale_summary_ranges = 0;  // last told to Stats (NodeCounters::stale_summary_ranges)
  // Content legs cut by the byte budget, by peer: the block hashes not yet
  // answered, so that the peer's resume continues where the leg stopped
  // instead of descending again (three legs, and from the first range
  // rather than the cut: jepsen heal-under-load, a node waited 1.2 s for
  // the last 89 of 1024 ranges). An entry whose `rest` is empty was served
  // whole: a second resume for it is answered by nothing.
  struct CutLeg {
    Time kept{0};
    std::deque<UnansweredBlocks> rest;
    size_t hashes = 0;      // in `rest`: at most kMaxCutLegHashes
    bool leg_cut = false;   // the block-hash leg was cut too (or `rest` overflowed): ranges past `rest` differ
  };
  std::map<Address, CutLeg> cut_legs;  // at most kMaxCutLegs
  // The bulk repair this node clocks (it continues the peer's cut legs as
  // it merges them: HandleSyncRanges), and the peers whose bulk repairs
  // wait for it to go quiet (ClockBulk). One at a time: after a heal every
  // member of the other side sent its contents at once, each carrying the
  // same bits (jepsen heal-under-load, 10^6 keys: a node of the smaller
  // side took in 46 MB of contents in 4 s, ~4 copies of the 12 MB it lacked).
  Address bulk_clocked;           // empty: none
  Time bulk_clocked_seen{0};      // its last bulk frame
  std::deque<Address> bulk_waiting;  // at most kMaxCutLegs, each once
  // The clocked peer whose current content leg this node asked to follow at
  // its first frame (HandleSyncRanges, pipelined); its last frame clears it.
  // Cleared by a timed run too, so a leg whose last frame never came does not
  // leave the next one unanswered.
  Address bulk_requested_early;
  // Until then this node is in an exchange (it started one, or an exchange's
  // frames reached it lately): the runs it would start from ae_queue or its
  // timer wait, so that a healed partition is repaired by one exchange per
  // node at a time. Each member coming back queued a run with it, all
  // concurrent, every one carrying the same bits (jepsen heal-under-load at
  // 10^6 keys: a sample everywhere 7.0 s after the heal with this, 20.6 s
  // without). Continuations and the tree's syncs with a new parent or child
  // do not wait.
  Time ae_busy_until{0};
  void NoteExchange() {
    ae_busy_until = std::max(ae_busy_until, now + config.gossip_interval);
  }
  Time last_trouble{0};  // when TroubleCount() last moved (as seen by NoteTrouble)
  uint64_t membership_changes = 0;  // member events (PumpMembership)

  // ---- helpers ----
  // Signs that anti-entropy may have something to repair: a count that only
  // grows (NodeConfig::anti_entropy_max_interval). A push sent again and
  // delivered is not one (PushDelivery repaired it); one given up is, on
  // whichever side gave up.
  uint64_t TroubleCount() {
    std::lock_guard lock(stats_mu);
    return membership_changes + frame_rejects + membership_stalls + stats.delta_overflows + stats.held_deltas_refused +
           stats.held_deltas_dropped + stats.tree_parent_changes + (delivery != nullptr ? delivery->abandoned() : 0);
  }
  // The wait from one anti-entropy run to the next, called once per run. It
  // stays at the base interval until kCalmRuns base intervals have passed
  // with no sign of trouble, then doubles at each run. (Doubling from the
  // first quiet run made a healed partition's last repairs wait: N=1000
  // partition-heal, seeds 1-3, 8.3 / 7.5 / 9.5 s to converge with a fixed
  // interval, 10.2 / 9.9 / 12.8 s so.)
  static constexpr int kCalmRuns = 3;
  Duration NextAntiEntropyWait() {
    const Duration base = config.anti_entropy_interval;
    NoteTrouble();
    if (tree == nullptr || now - last_trouble < kCalmRuns * base || anti_entropy_wait.count() == 0) {
      anti_entropy_wait = base;
    } else {
      anti_entropy_wait = std::min(std::max(base, config.anti_entropy_max_interval), 2 * anti_entropy_wait);
    }
    return anti_entropy_wait;
  }
  // Records when the trouble count last moved; true if it just did.
  bool NoteTrouble() {
    const uint64_t trouble = TroubleCount();
    if (trouble == trouble_seen) return false;
    trouble_seen = trouble;
    last_trouble = now;
    return true;
  }
  // Once a gossip round: trouble cuts a long wait short. The next run comes
  // at a random point of one base interval, as at Start, so that nodes that
  // all see the same event (a partition healing) do not run together.
  void CheckAntiEntropyWait() {
    if (!NoteTrouble() || anti_entropy_wait <= config.anti_entropy_interval) return;
    anti_entropy_wait = config.anti_entropy_interval;
    const auto base = static_cast<uint64_t>(config.anti_entropy_interval.count());
    next_anti_entropy = std::min(next_anti_entropy, now + Duration(static_cast<int64_t>(rng.Below(base) + 1)));
  }
  template <typename F>
  void Stats(F f) {
    std::lock_guard lock(stats_mu);
    f(stats);
  }

  // Any thread, no lock: the shared_ptr copy outlives the read section.
  std::shared_ptr<const FilterState> Lookup(std::string_view name) const {
    const crdt::GracePeriod::Section section = published_grace.Enter();
    const FilterMap& map = *published.load(std::memory_order_seq_cst);
    auto it = map.find(name);
    return it == map.end() ? nullptr : it->second;
  }
  // Any thread: every published state, in name order.
  std::vector<std::shared_ptr<const FilterState>> PublishedStates() const {
    const crdt::GracePeriod::Section section = published_grace.Enter();
    std::vector<std::shared_ptr<const FilterState>> out;
    for (const auto& [name, state] : *published.load(std::memory_order_seq_cst)) out.push_back(state);
    return out;
  }
  // Driver thread: `filters` is its own.
  // The memory budget (NodeConfig::max_filter_bytes, max_memory_bytes):
  // OK if this node can hold `e` once the filter it replaces (`replacing`,
  // possibly null) is gone; else ResourceExhausted naming the limit, and
  // *reason ("max_filter_bytes" or "max_memory") if non-null.
  absl::Status CheckBudget(const CatalogEntry& e, const FilterState* replacing, std::string* reason = nullptr) const;
  // What the filters held here count against max_memory_bytes, but `except`.
  uint64_t HeldBytes(const FilterState* except) const;
  // Remembers (and counts and reports once) a peer's entry refused by CheckBudget.
  void RefuseEntry(const CatalogEntry& e, const absl::Status& why, const std::string& reason);
  struct Refusal {
    CatalogEntry entry;
    Node::RefusedFilter info;
  };
  std::map<std::string, Refusal> refused;  // by name; driver only
  // The names in `refused`, for client threads (Missing).
  mutable std::mutex refused_names_mu;
  std::set<std::string, std::less<>> refused_names;
  void Unrefuse(const std::string& name) {
    if (refused.erase(name) == 0) return;
    std::lock_guard lock(refused_names_mu);
    refused_names.erase(name);
  }
  // Any thread: the error for a read of a filter this node does not hold.
  // NotFound, or for a filter refused by the memory budget, Unavailable
  // saying so: a read must not answer "absent" for keys the cluster holds.
  absl::Status Missing(std::string_view name) const {
    std::lock_guard lock(refused_names_mu);
    if (refused_names.find(name) == refused_names.end()) return absl::NotFoundError("ERR not found");
    return absl::UnavailableError(
        "ERR filter not held on this node (over its max-memory or max-filter-bytes): ask another node");
  }

  std::shared_ptr<const FilterState> DriverLookup(const std::string& name) const {
    auto it = filters.find(name);
    return it == filters.end() ? nullptr : it->second;
  }
  // Whether a snapshot of `entry` would be ORed into sub-filters of the
  // filter held here that have never held a bit: the same parameters, the
  // same newest epoch, every slot of `parsed` already live, and none of them
  // ever added to, merged into, or counted. Recovery's fast path
  // (crdt::OrSnapshotIntoEmpty) needs exactly that.
  bool EmptyConfigTarget(const CatalogEntry& entry, const crdt::ParsedSnapshot& parsed) const {
    std::shared_ptr<const FilterState> local = DriverLookup(entry.config.name);
    if (local == nullptr || !(local->entry.params == entry.params) || local->set->epoch() != parsed.newest) {
      return false;
    }
    const auto clock = clocks.find(entry.config.name);
    for (uint64_t slot : parsed.slots) {
      std::shared_ptr<const crdt::SubFilter> sub = local->set->Sub(slot);
      if (sub == nullptr || sub->items.load(std::memory_order_relaxed) != 0 ||
          sub->merged.load(std::memory_order_relaxed)) {
        return false;
      }
      if (clock != clocks.end()) {
        const auto bits = clock->second.set_bits.find(slot);
        if (bits != clock->second.set_bits.end() && bits->second != 0) return false;
      }
    }
    return true;
  }
  // Driver thread. Filters are created or replaced rarely (at most kMaxFilters
  // entries), so each change publishes a whole new copy of the map and frees
  // the old one once no client lookup can still be reading it.
  void Publish(std::shared_ptr<const FilterState> state) {
    filters[state->entry.config.name] = std::move(state);
    Republish();
  }
  void Unpublish(const std::string& name) {
    filters.erase(name);
    Republish();
  }
  void Republish() {
    ++filters_version;
    const FilterMap* old = published.exchange(new FilterMap(filters), std::memory_order_seq_cst);
    published_grace.Synchronize();
    delete old;
  }

  void Emit(Event::Kind kind, std::string subject, std::string detail = "", uint64_t count = 0) {
    events.push_back(Event{kind, std::move(subject), std::move(detail), count});
  }

  void Reject(const Address& from, const std::string& reason) {
    ++frame_rejects;
    Stats([&](NodeCounters& s) { ++s.rejected_by_reason[reason]; });
    Emit(Event::Kind::kFrameRejected, from, reason);
  }

  void RefuseMerge(const std::string& filter, const std::string& detail) {
    Stats([&](NodeCounters& s) { ++s.rejected_by_reason["params"]; });
    Emit(Event::Kind::kMergeRefused, filter, detail);
  }

  // Seals and queues an envelope. Stream when asked, when tcp_only, or when
  // the sealed datagram would exceed the budget.
  void Send(const Address& to, wire::Envelope& env, bool stream) {
    SendPlain(to, Serialize(env), BodyIndex(env), stream);
  }
  std::string Serialize(wire::Envelope& env) const;
  // The bytes Serialize() gives for an Envelope whose body is `body` in oneof
  // field `field`, without building that Envelope: protobuf writes fields in
  // field-number order, so they are the header fields (1-3, serialized once
  // per node) followed by the body field. For the per-round gossip and
  // membership frames (moving each body into an Envelope and freeing it
  // again was ~2% of pollen-sim N=100).
  // Which of the header fields go before the body.
  enum class Header {
    kFull,       // version, sender_name, sender_address
    kNoAddress,  // version, sender_name (kTreeFeatureImplicitSender)
    kBare,       // none: a tree push the neighbour attributes by its seal (kTreeFeatureBarePushes)
  };
  std::string SerializeBody(int field, const google::protobuf::MessageLite& body, Header header = Header::kFull);
  std::string envelope_header;  // Serialize() of an Envelope with no body; built on first use
  std::string envelope_header_implicit;  // the same without sender_address
  // Seals serialized envelope bytes (`type`: BodyIndex) for one peer.
  void SendPlain(const Address& to, const std::string& plain, size_t type, bool stream);
  // The same bytes for several peers: sealed once, under one (sender,
  // counter), and that frame queued for each of them. Each receiver's replay
  // window sees the counter once; the frame is not bound to a receiver (the
  // associated data is the header and the cluster label), so this is the
  // frame a per-peer seal would produce, with a shared counter. Sealing a
  // gossip round's frame per peer was a third of pollen-sim's AEAD work.
  // `seal`: kCompact only to compact_seal_links (kTreeFeatureCompactSeal).
  void SendPlainToAll(std::span<const Address> peers, const std::string& plain, size_t type, bool stream,
                      protocol::SealForm seal = protocol::SealForm::kFull);

  // `count` distinct random live peers, O(count) for count << N: indices
  // into membership's live set (PickDistinct), never a list of all peers
  // (rebuilding a sorted peer list on every membership change was 15% of
  // pollen-sim's CPU at N=1000 while members joined; perf).
  std::vector<Address> PickPeers(size_t count);

  // `force`: refresh the Members() snapshot now if anything changed; otherwise
  // at most every kMembersRefresh of `now` (copying the whole table on every
  // membership event was O(N) per event, O(N^3) cluster-wide during joins).
  void PumpMembership(bool force = false);

  // A member (re)appeared: sync with it soon. So that a join or a healed
  // partition does not make every node sync with the same member at once, each
  // node takes the event with probability kJoinSyncs / LiveCount (about
  // kJoinSyncs syncs per appearance cluster-wide), and runs at most one such
  // sync per gossip round from a small bounded queue.
  void QueueAntiEntropy(const std::string& member);

  // Membership refuses some messages itself (unknown sender, bad name...):
  // surface those as "membership_<reason>" in rejected_by_reason; likewise
  // its Lifeguard health score and stalls. Takes stats_mu only on a change.
  void CopyMembershipStats();

  // ---- filters, catalog, epochs ----
  absl::StatusOr<std::shared_ptr<const FilterState>> NewState(const CatalogEntry& entry, uint64_t epoch);

  void CountBits(const std::string& name, const crdt::GenerationSet& set, bool scan);

  void ResetClock(const std::string& name, const crdt::GenerationSet& set, bool count_bits) {
    CountBits(name, set, count_bits);
    if (started) clocks[name].epoch_began = now;
  }

  void Install(std::shared_ptr<const FilterState> state, bool count_bits) {
    const std::string name = state->entry.config.name;
    ResetClock(name, *state->set, count_bits);
    Publish(std::move(state));
    announce_catalog.insert(name);
  }

  // Discards `loser`'s state for `winner`, a winning catalog entry with other
  // parameters: a new incarnation that starts at `winner`'s own epoch, which
  // may be below the loser's (FilterInfo::incarnation). Counted and announced.
  void Replace(const FilterState& loser, std::shared_ptr<const FilterState> winner, std::string why) {
    assert(Precedes(winner->entry, loser.entry) && !(winner->entry.params == loser.entry.params));
    assert(winner->uid > loser.uid);
    const std::string name = winner->entry.config.name;
    Install(std::move(winner), true);
    Stats([](NodeCounters& s) { ++s.filters_replaced; });
    Emit(Event::Kind::kFilterDiscarded, name, std::move(why));
  }

  bool OwnsDigest(const FilterState& s) const {
    return s.entry.config.scope == Scope::kDigest && s.entry.config.owner == config.name;
  }

  // Moves `name` to `epoch` if higher (max-register). True if it moved.
  bool LearnEpoch(const std::string& name, uint64_t epoch);
  // Opens layers of generation `epoch` up to `count` (a max-register per
  // generation). False if none opened: a fixed filter, a dead epoch, a count
  // over kMaxLayers (refused as params) or an allocation failure.
  bool LearnLayers(const FilterState& state, uint64_t epoch, uint32_t count);
  // Scaling filters: raises each newest layer's count to the estimate from
  // its set bits and opens the next layer when it holds its capacity;
  // announces layers opened by client adds. Every filter: the estimate feeds
  // the NONSCALING limit.
  void CheckGrowth();
  // After CheckGrowth's estimate: warns once per crossing of the saturation
  // thresholds (kFilterSaturated), and once when the filter leaves them
  // (kFilterRelieved: it grew, rotated or was replaced).
  void CheckSaturation(const FilterState& state, const crdt::SubFilter& newest, uint64_t set_bits);

  // The catalog rule (catalog.h). Returns false if the entry was refused.
  void ApplyCatalogEntry(const CatalogEntry& e, uint64_t epoch);

  // ---- deletion (node_tombstones.cc) ----
  // True if a tombstone kills `e`.
  bool IsDeleted(const CatalogEntry& e) const {
    auto it = tombstones.find(e.config.name);
    return it != tombstones.end() && Covers(Tombstone{it->first, it->second}, e);
  }
  // A creation stamp for `name` at `now`: above the name's tombstone, if any.
  uint64_t FreshStamp(std::string_view name) const;
  // Merges a tombstone (max-register per name), removes the live filter it
  // covers, and announces it. True if it raised the name's tombstone.
  bool ApplyTombstone(const Tombstone& t);
  // Drops a live filter: no longer published, its announcements and
  // bookkeeping forgotten; its memory goes with the last reader's reference.
  // Emits kFilterDeleted with count = deleted_through.
  void RemoveFilter(const std::string& name, uint64_t deleted_through);
  void ApplyTombstones(const std::vector<Tombstone>& in) {
    for (const Tombstone& t : in) ApplyTombstone(t);
  }
  // Validates tombstones without touching state.
  static bool DecodeTombstones(const google::protobuf::RepeatedPtrField<wire::Tombstone>& in, std::vector<Tombstone>* out);
  // Anti-entropy: every tombstone to `peer`, as CatalogUpdate stream frames.
  void SendTombstones(const Address& peer);

  // Checks that an incoming reference matches our filter (invariant 4).
  std::shared_ptr<const FilterState> MatchFilter(const crdt::FilterParams& params);

  // Merges words into (filter, sub-filter slot) and buffers the bits that
  // were new here (or, given `changed`, appends them there). Returns the
  // number of new bits.
  uint64_t MergeWords(const FilterState& state, uint64_t slot, std::span<const crdt::WordBits> words,
                      std::vector<crdt::WordBits>* changed = nullptr);

  void Buffer(const FilterState& state, uint64_t slot, std::span<const crdt::WordBits> words) {
    if (!(capture != nullptr ? capture : &deltas)->Add(state.entry.config.name, state.uid, slot, words)) {
      Stats([](NodeCounters& s) { ++s.delta_overflows; });
    }
  }

  void DrainPending();

  // Client adds (any thread): FailedPrecondition for a digest filter this
  // node does not own; AddLocal is the test-and-add itself (node.cc).
  absl::Status CheckWritable(const FilterState& state) const;
  std::vector<bool> AddLocal(const FilterState& state, std::span<const std::string_view> keys,
                             std::vector<bool>* full);
  // Notes keys added at a peer's request for TakePeerAdds (when reported),
  // but not those `full` says the filter refused. No keys at all: a repeated
  // answer, noted without keys (Node::TakePeerAdds).
  void NotePeerAdds(const FilterState& state, std::span<const std::string_view> keys, const std::vector<bool>& full);

  // ---- owner routing (node_routing.cc) ----
  void RefreshRendezvous();
  // Sends (or sends again) request `id` to its current owner; decides it
  // here if that member is no longer live.
  void SendRoute(RouteRequest& req);
  // Decides the keys of request `req` here, as the owner would have; as a
  // fallback after the owner was asked, a key absent here at BeginAdd answers
  // new (StandIns says why).
  void DecideLocally(RouteRequest& req, bool fallback);
  // The test-and-add of a stand-in for a silent owner (StandIns).
  std::vector<bool> StandInAdd(const FilterState& state, std::span<const std::string_view> keys, std::vector<bool>* full);
  // Records the answers of `req` in its ticket and retires it.
  void CompleteRequest(const RouteRequest& req, const std::vector<bool>& added, const std::vector<bool>& full);
  void FinishTicket(uint64_t ticket);
  void ExpireRoutes();
  Time NextRouteDeadline() const { return route_deadlines.empty() ? Time::max() : route_deadlines.front().first; }
  // The common checks of a RouteAdd or a KeyCheck, before any state
  // changes: an id, keys within KeysWithinLimits, valid filter parameters.
  // Rejects the frame as malformed (nullopt) otherwise.
  template <typename KeyRequest>
  std::optional<crdt::FilterParams> ValidKeyRequest(const Address& from, const KeyRequest& msg) {
    absl::StatusOr<crdt::FilterParams> params =
        msg.id() != 0 && KeysWithinLimits(msg.keys()) ? ParamsFromWire(msg.filter())
                                                       : absl::InvalidArgumentError("id or keys");
    if (!params.ok()) {
      Reject(from, "malformed");
      return std::nullopt;
    }
    return *std::move(params);
  }
  void HandleRouteAdd(const Address& from, const std::string& sender, const wire::RouteAdd& msg);
  void HandleRouteReply(const Address& from, const std::string& sender, const wire::RouteReply& msg);

  // ---- WAIT and quorum EXISTS (node_peer_checks.cc) ----
  // Files the ticket, splits its keys into chunks and sends them to `peers`.
  absl::StatusOr<uint64_t> StartCheck(CheckTicket ticket, const std::vector<std::string>& peers);
  void SendCheck(CheckTicket& ticket, uint32_t peer, uint32_t chunk);  // marks the peer failed if it left
  // Resends what is unanswered, drops peers that left, answers what is done.
  void ServiceChecks();
  void FinishCheckIfAnswered(uint64_t ticket_id);
  Time NextCheckWakeup() const;
  void HandleKeyCheck(const Address& from, const wire::KeyCheck& msg);
  void HandleKeyCheckReply(const Address& from, const std::string& sender, const wire::KeyCheckReply& msg);

  // ---- periodic work ----
  // Each batch of new bits (and each announcement) goes out for
  // RetransmitRounds() gossip rounds, each time to `fanout` fresh random peers:
  // sending once reaches only a fraction 1 - e^{-F x} = x of the cluster
  // (~94% for F = 3), while r rounds reach 1 - e^{-r F} (r = 3: 99.99%).
  uint32_t RetransmitRounds() const {
    const double live = static_cast<double>(membership->LiveCount());
    return std::max<uint32_t>(2, static_cast<uint32_t>(std::ceil(std::log10(live + 1))));
  }

  // Rounds a new catalog entry is repeated to `fanout` random peers. Every
  // node that installs it repeats it too, so a node hears it about
  // rounds * fanout times in all and misses it with probability
  // exp(-rounds * fanout): rounds * fanout >= ln(N) + 7 leaves all N nodes
  // covered with probability 0.999 (N = 20: 4 rounds, 1000: 5, 10,000: 6 at
  // fanout 3). RetransmitRounds (2 at N = 20) left some node without a new
  // filter's entry in about 1 of 400 (node, filter) pairs, until
  // anti-entropy: scenario fresh-filters, seeds 1 and 5. Entries are rare
  // and small; deltas keep RetransmitRounds.
  uint32_t CatalogRounds() const {
    const double live = static_cast<double>(membership->LiveCount());
    const double fanout = static_cast<double>(std::max<uint32_t>(1, config.fanout));
    return std::max(RetransmitRounds(), static_cast<uint32_t>(std::ceil((std::log(live + 1) + 7) / fanout)));
  }

  void GossipRound();

  // ---- tree dissemination (node_tree.cc) ----
  // Once a gossip round: keeps the overlay and the tree, sends beacons when
  // they changed (and every tree_beacon_interval), and pushes.
  void TreeRound();
  void MaintainOverlay();
  // Heals a split overlay: see broadcast_tree.h, "Splits".
  void LinkTowardsTheRoot();
  // Recomputes this node's beacon; counts a new parent.
  void RecomputeTree();
  wire::TreeBeacon BeaconToWire() const;
  // A link request (link = 1) carrying this node's beacon.
  wire::Tree HelloToWire() const;
  // Pushes this node's own new bits and every pending entry to the tree links.
  void TreePush();
  // Moves this node's own new bits (client adds, anti-entropy repairs, bits
  // from frames that were not tree pushes) from `deltas` to tree_pending.
  void TakeOwnBits();
  // A received entry: pushed tree_push_delay from now, or when the push gap
  // ends (PushPacing).
  void SchedulePush() {
    next_push = std::min(next_push, std::max(now + config.tree_push_delay, pacing->Earliest(now, tree_pending_words)));
  }
  // Sends the pending entries not received from `exclude` (nullptr: all) to
  // each of `links`, packed to the datagram budget, numbered per link.
  void PushEntries(const std::string* exclude, std::span<const std::string> links);
  // Sends one numbered push (new or again) to a tree link, with the link's
  // piggybacked delivery fields.
  // `resend`: a push the link NACKed, sent with full filter references
  // (a compact one it could not resolve is what a NACK may be about).
  void SendPush(const std::string& link, const PushDelivery::Numbered& push, bool resend);
  // Sends the probes, acks and NACKs that are due, each link's in one frame.
  void ServiceDelivery();
  // `header`: what of the envelope's header goes (kNoAddress only to
  // implicit_sender_links, kBare only as BarePushTo allows).
  void SendTree(std::span<const Address> peers, const wire::Tree& msg, Header header = Header::kFull,
                protocol::SealForm seal = protocol::SealForm::kFull);
  protocol::SealForm SealFor(const std::string& link) const {
    return compact_seal_links.contains(link) ? protocol::SealForm::kCompact : protocol::SealForm::kFull;
  }
  // The header for push `msg` to `link` (and notes a named one): bare once
  // the link has acknowledged a push of our current stream (past bare_state's
  // named_until), when it is a datagram (the only channel whose sender id the
  // link learns from pushes) and carries no probe, and not for the first
  // push in kNamedPushEvery.
  Header PushHeader(const std::string& link, const wire::Tree& msg);
  // Learns the seal sender id of a tree neighbour's named frame.
  void NoteSealSender(uint64_t seal_sender, Channel channel, const std::string& name);
  // `link` cannot attribute our bare pushes (Tree.link = 3): name them until
  // it acknowledges a newer push.
  void OnBareRefused(const std::string& link);
  // Asks `from` to name itself (Tree.link = 3), as rate-limited above.
  void AskToNameItself(const Address& from);
  void HandleTree(const Address& from, const std::string& sender, const wire::Tree& msg);

  // Appends the words of (filter, slot) to `packer` as Delta parts; returns
  // the bits packed (0 if the filter or sub-filter is gone), and appends each
  // Delta's bits to `bits_per_delta` when given.
  uint64_t PackWords(const DeltaBuffer::Key& key, uint64_t filter_uid, std::span<const crdt::WordBits> words,
                     GossipPacker& packer, std::vector<uint64_t>* bits_per_delta = nullptr);

  // Bytes a Gossip body may take so that the sealed frame fits a datagram.
  size_t GossipBudget() const {
    const size_t header = 2 + 3 + config.name.size() + 3 + config.advertise.size() + 2 + 3;  // envelope fields
    const size_t overhead = header + FrameCodec::kOverhead;
    return config.max_datagram_bytes > overhead + 1 ? config.max_datagram_bytes - overhead : 1;
  }

  // Epoch, catalog and tombstone announcements, each repeated for `rounds` rounds.
  void Announce(uint32_t rounds, GossipPacker& packer);

  void CheckRotations();

  Time NextRotationDeadline() const;

  // ---- anti-entropy ----
  // The first leg goes as a datagram when it fits (equal replicas: one
  // datagram, no answer), else, or `by_stream`, by stream. It summarizes
  // each generation at `level` (a digest, group hashes or range summaries).
  void StartAntiEntropy(const Address& peer, bool by_stream = false, uint32_t level = kDigestLevel);
  // Once a gossip round: recomputes dirty summaries of generations too big
  // for one SummaryCache::Get (SummaryCache::Refresh), kRefreshWords in all,
  // round-robin over the filters.
  void RefreshSummaries();
  // No set bit counted in generation `slot` of `state` (SummaryCache's
  // looks_empty hint): clocks count every bit drained, merged or loaded.
  bool CountsNoBits(const FilterState& state, uint64_t slot) const {
    auto clock = clocks.find(state.entry.config.name);
    if (clock == clocks.end()) return true;
    auto bits = clock->second.set_bits.find(slot);
    return bits == clock->second.set_bits.end() || bits->second == 0;
  }

  // Into `reply`: this node's catalog entries that differ from the request's.
  void CatalogNews(const wire::SyncRequest& req, wire::SyncRanges& reply) const;
  // Accumulates SyncRanges frames for one peer, flushing at the chunk size.
  class RangesWriter {
   public:
    RangesWriter(Impl* impl, Address to, bool reply) : impl_(impl), to_(std::move(to)), reply_(reply) {}
    wire::SyncRanges& message() { return msg_; }
    void BeginFilter(const FilterState& state) {
      state_ = &state;
      f_ = nullptr;
      g_ = nullptr;
    }
    void BeginGeneration(uint64_t slot) {
      slot_ = slot;
      g_ = nullptr;
    }
    void AddWanted(uint64_t range) { Gen()->add_wanted(range); }
    // False once the round's byte budget is spent (the last frame then says
    // `more`). Leaves out the bits in `known` (what the peer said it holds
    // there; EncodeRange).
    // With `blocks` (a block-hash leg's differing blocks), only those, and
    // the data goes even if empty: its bitmap scopes the answer.
    bool AddRange(const crdt::BlockedFilter& filter, uint64_t range, std::span<const crdt::WordBits> known = {},
                  std::string_view blocks = {}) {
      if (total_ >= impl_->config.anti_entropy_round_bytes) {
        cut_ = true;
        return false;
      }
      wire::RangeData data;
      bits_ += EncodeRange(filter, range, &data, known, blocks);
      if (data.positions().size() <= 1 && blocks.empty()) return true;  // nothing to send (codec mode 0: the empty set)
      const size_t positions = BlocksPerRange(filter.shape().blocks) * crdt::kBlockBits;
      if (bytes_ + data.positions().size() > kSyncChunkBytes || positions_ + positions > kSendChunkPositions) Flush();
      bytes_ += data.positions().size() + 16;
      total_ += data.positions().size() + 16;
      positions_ += positions;
      *Gen()->add_data() = std::move(data);
      return true;
    }
    // Bits put in ranges so far.
    uint64_t bits() const { return bits_; }
    // The next flush says `more`: the exchange left ranges out before this
    // leg (a budget-cut block-hash leg).
    void SetMore() { cut_ = true; }
    // The budget ran out (AddRange returned false).
    bool cut() const { return cut_; }
    // A cut leg's rest is kept (Impl::cut_legs): the flush that says `more`
    // says `resumable` too, and the receiver's resume brings the next
    // budget's worth.
    void SetResumable() { resumable_ = true; }
    void Flush() {
      if (cut_) msg_.set_more(true);
      if (cut_ && resumable_) msg_.set_resumable(true);
      if (msg_.filters_size() > 0 || msg_.catalog_size() > 0 || msg_.more()) {
        wire::Envelope env;
        *env.mutable_sync_ranges() = std::move(msg_);
        impl_->Send(to_, env, true);
      }
      msg_.Clear();
      msg_.set_reply(reply_);
      f_ = nullptr;
      g_ = nullptr;
      bytes_ = 0;
      positions_ = 0;
      cut_ = false;  // said, on the frame just sent
      resumable_ = false;
    }

   private:
    wire::GenerationRanges* Gen() {
      if (f_ == nullptr) {
        f_ = msg_.add_filters();
        ToWire(state_->entry.params, f_->mutable_filter());
        f_->set_epoch(state_->set->epoch());
      }
      if (g_ == nullptr) {
        g_ = f_->add_generations();
        g_->set_epoch(crdt::EpochOfSlot(slot_));
        g_->set_layer(crdt::LayerOfSlot(slot_));
        g_->set_blocks_per_range(BlocksPerRange(LayerBlocks(state_->entry.params, slot_)));
      }
      return g_;
    }
    Impl* impl_;
    Address to_;
    bool reply_;
    wire::SyncRanges msg_;
    const FilterState* state_ = nullptr;
    uint64_t slot_ = 0;
    wire::FilterRanges* f_ = nullptr;
    wire::GenerationRanges* g_ = nullptr;
    size_t bytes_ = 0, total_ = 0, positions_ = 0;
    uint64_t bits_ = 0;
    bool cut_ = false;
    bool resumable_ = false;
  };

  // Validates a list of catalog entries (and their epochs) without state.
  bool DecodeCatalog(const google::protobuf::RepeatedPtrField<wire::CatalogEntry>& in,
                     std::vector<std::pair<CatalogEntry, uint64_t>>* out) {
    if (static_cast<size_t>(in.size()) > kMaxFilters) return false;
    for (const wire::CatalogEntry& w : in) {
      absl::StatusOr<CatalogEntry> e = FromWire(w);
      if (!e.ok() || w.epoch() > kMaxEpoch) return false;
      out->emplace_back(*std::move(e), w.epoch());
    }
    return true;
  }

  void ApplyCatalog(const std::vector<std::pair<CatalogEntry, uint64_t>>& entries);

  struct DecodedSummary {
    crdt::FilterParams params;
    uint64_t epoch = 0;
    const wire::FilterSummary* wire = nullptr;
  };

  void HandleSyncRequest(const Address& from, const wire::SyncRequest& req);
  // Answers one generation of a block-hash leg (validated). Keeps the hashes
  // the writer's budget did not get to in cut_legs, for the peer's resume;
  // true if it kept any.
  bool AnswerBlockHashes(RangesWriter& writer, const Address& from, const FilterState& state,
                         const crdt::SubFilter& sub, const wire::GenerationSummary& theirs, bool leg_cut);
  // This node's contents of the blocks of `blocks.ranges` whose hashes
  // differ, each range wanted back (scoped to those blocks). Returns how
  // many of the ranges it got through before the writer's budget ran out.
  size_t SendDifferingBlocks(RangesWriter& writer, const crdt::BlockedFilter& filter, const UnansweredBlocks& blocks);
  // Keeps `blocks` for `peer`'s resume (bounded: kMaxCutLegs peers,
  // kMaxCutLegHashes hashes each; what does not fit is left to a new descent).
  // True if any of this peer's cut leg is kept.
  bool KeepCutLeg(const Address& peer, UnansweredBlocks blocks, bool leg_cut);
  // A peer's SyncRequest.resume: the next budget of the content leg cut
  // last, from the kept hashes; a new exchange if they were lost.
  void ResumeCutLeg(const Address& from);
  // A bulk frame from `from` asks to be continued: true if this node clocks
  // `from`'s repair now (none other is under way, or it went quiet); else
  // `from` waits in bulk_waiting (false).
  bool ClockBulk(const Address& from);
  // Once the clocked repair has gone quiet (kBulkQuiet), the first waiting
  // peer's repair goes on as a new descent from this side (Tick).
  void ServeWaitingBulk();
  // The clocked repair has sent no bulk frame for over kBulkQuiet (or there is none).
  bool BulkQuiet() const { return now - bulk_clocked_seen > kBulkQuiet; }
  Time NextBulkWakeup() const {  // when BulkQuiet() turns true, while a peer waits
    return bulk_waiting.empty() ? Time::max() : bulk_clocked_seen + kBulkQuiet + Duration(1);
  }

  // False if the budget ran out first.
  bool SendWholeGeneration(RangesWriter& writer, const crdt::BlockedFilter& filter) {
    const uint64_t ranges = filter.RangeCount(BlocksPerRange(filter.shape().blocks));
    for (uint64_t r = 0; r < ranges; ++r) {
      if (!writer.AddRange(filter, r)) return false;  // the rest in the next exchange (SyncRanges.more)
    }
    return true;
  }

  struct DecodedRanges {
    crdt::FilterParams params;
    uint64_t epoch = 0;
    const wire::FilterRanges* wire = nullptr;
    // Per generation, per data entry: its decoded words, as [begin, end)
    // in sync_words.
    std::vector<std::vector<std::pair<size_t, size_t>>> words;
  };
  // Working space of HandleSyncRanges, kept from frame to frame while a bulk
  // repair goes on (a joining node's frames: fresh vectors per range, grown
  // by doubling and faulted in each time, were a third of its CPU at 512 MiB,
  // most of it in the kernel) and freed once it has gone quiet
  // (ReleaseSyncScratch). Each holds at most a frame's kMaxFramePositions
  // words.
  std::vector<crdt::WordBits> sync_words;    // a frame's decoded ranges
  std::vector<crdt::WordBits> sync_changed;  // the bits they brought that were new here
  void ReleaseSyncScratch() {
    if (sync_words.capacity() + sync_changed.capacity() <= (size_t{1} << 16)) return;  // 1 MiB: kept
    std::vector<crdt::WordBits>().swap(sync_words);
    std::vector<crdt::WordBits>().swap(sync_changed);
  }

  void HandleSyncRanges(const Address& from, const wire::SyncRanges& msg);

  // ---- other message types ----
  // FromWire, with a shortcut for the common case: a reference equal to one of
  // our own filters' parameters is valid by construction (skips re-validating
  // it, which hashes the name).
  // `matched` (optional): the state whose parameters the reference equals, if
  // the shortcut applied; nullptr otherwise. A compact reference resolves only
  // to a filter held here with its name and digest (NotFound otherwise).
  absl::StatusOr<crdt::FilterParams> ParamsFromWire(const wire::FilterRef& ref,
                                                    std::shared_ptr<const FilterState>* matched = nullptr) const;

  struct DecodedDelta {
    crdt::FilterParams params;
    uint64_t slot = 0;
    std::vector<crdt::WordBits> words;
    uint64_t bits = 0;  // CountBits(words), counted once while decoding
    bool unresolved = false;  // refused: a compact reference to no filter held here
    // The filter state `params` were taken from while `filters` was at
    // `filters_version` (nullptr if they came from the wire): while the map is
    // unchanged it is what MatchFilter(params) would find, so ApplyDelta skips
    // that lookup (two string-keyed map lookups per delta, perf).
    std::shared_ptr<const FilterState> state;
    uint64_t filters_version = 0;
  };
  // Validates one Delta without touching state; `budget` (decoded positions
  // left for this frame) shrinks by what it decodes. False if malformed.
  bool DecodeDelta(const wire::Delta& delta, size_t* budget, DecodedDelta* out) const;

  // Merges `d`; a delta for a name not in the catalog yet (and not deleted)
  // is held (HeldDeltas) until ReleaseHeld.
  void ApplyDelta(const DecodedDelta& d);
  // After `name` was installed (from a peer's entry, Reserve or a snapshot):
  // merges the deltas held for it that match its parameters, as this node's
  // own new bits; holds the others again (another incarnation's entry may
  // still win).
  void ReleaseHeld(const std::string& name);

  void HandleDelta(const Address& from, const wire::Delta& delta);

  struct DecodedEpoch {
    crdt::FilterParams params;
    uint64_t epoch = 0;
    uint32_t layers = 1;
  };
  using DecodedEpochs = std::vector<DecodedEpoch>;
  void ApplyEpochs(const DecodedEpochs& epochs);
  static bool DecodeEpochs(const google::protobuf::RepeatedPtrField<wire::FilterEpoch>& in, DecodedEpochs* out);

  void HandleEpochs(const Address& from, const wire::EpochAnnounce& msg);

  struct DecodedGossip {
    std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
    std::vector<Tombstone> dead;
    DecodedEpochs epochs;
    std::vector<DecodedDelta> deltas;
    // Refused because a delta's compact reference names no filter held here
    // (everything before it was valid; the rest was not looked at).
    bool unresolved_ref = false;
  };
  // Validates every part of `g` without touching state.
  bool DecodeGossip(const wire::Gossip& g, DecodedGossip* out);
  // Tombstones, then catalog, epochs and deltas.
  void ApplyGossip(const DecodedGossip& g);
  // Every part is validated before any is applied.
  void HandleGossip(const Address& from, const wire::Gossip& g);

  void HandleCatalog(const Address& from, const wire::CatalogUpdate& msg);

  void HandleFrame(const Address& from, std::string_view bytes, Time t, Channel channel);

  // Valid replication data arrived from `sender`: remember when, for known
  // members only; bounded by the membership table (stale names swept).
  void NoteData(const std::string& sender);

  // Bit count and digest of one generation; rescanned only when the filter's
  // change counter moved since the last scan. The counter is read before the
  // scan: a change racing with it bumps the counter after, forcing a rescan.
  // Only the figures in `parts` are computed; the others are zero.
  ScanResult Scan(const FilterState& state, uint64_t slot, const crdt::BlockedFilter& filter, InfoParts parts) const;

  FilterInfo InfoOf(const FilterState& state, InfoParts parts) const;
};

}  // namespace pollen::node
