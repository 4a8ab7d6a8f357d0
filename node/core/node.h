// Node: one Pollen cluster member, as a sans-IO state machine.
//
// The driver (the simulator or pollend) feeds it received frames, client
// operations and the current time, and carries out what it returns: frames to
// send (TakeOutgoing) and events to log or check (TakeEvents). The Node owns no
// socket, thread, clock or random source: randomness comes from a PRNG seeded by
// NodeConfig::rng_seed, so a run is reproducible from its seeds.
//
// Threading: the client operations Add/AddMany/Exists/ExistsMany/WhoHas/Info are
// thread-safe and may run concurrently with each other and with one driver thread
// that calls everything else (Handle*, Tick, Take*, Start, Leave, Reserve, Rotate,
// state export/import). Only that driver thread may call the non-client methods.
// Members(), Filters(), Counters() and name() are safe from any thread as well.
// Client reads (Exists*, WhoHas, Info, Filters) take no lock, adds one short one:
// filters are looked up in an immutable published map, the filter itself is
// lock-free, and an add's new bits reach the driver through a queue whose
// mutex is held only to copy them in (PendingAdds, dissemination.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/keyed_hash.h"
#include "node/core/peer_checks.h"
#include "node/core/types.h"

namespace pollen::crdt {
class GenerationSet;
struct SubFilter;
}  // namespace pollen::crdt

namespace pollen::node {

class NamePool;  // node/core/name_pool.h

// RedisBloom's reply to a new key for a full NONSCALING filter.
inline constexpr char kFilterFullError[] = "ERR non scaling filter is full";

struct NodeConfig {
  std::string name;                 // unique member name
  Address advertise;                // how peers reach this node
  std::vector<Address> seeds;       // join through these (may include self)
  crdt::ClusterSecret secret;       // never leaves memory
  std::string cluster_label;        // bound into every frame as associated data
  // Seeds every random choice of the node, including its seal sender ids
  // (protocol/seal.h), which with per-boot counters make the AEAD nonces: two
  // nodes, or two boots of one node, must never share a seed outside the
  // simulator, or nonces repeat under the cluster key. pollend draws it from
  // randombytes_buf at every start.
  uint64_t rng_seed = 1;

  Duration gossip_interval = std::chrono::milliseconds(200);
  uint32_t fanout = 3;
  Duration probe_interval = std::chrono::seconds(1);
  Duration probe_timeout = std::chrono::milliseconds(500);
  uint32_t indirect_probes = 3;
  double suspicion_multiplier = 4.0;  // suspicion timeout = mult * log10(N+1) * probe_interval
  bool lifeguard = true;              // MembershipConfig::lifeguard (false: plain SWIM)
  bool reliable_fallback_ping = true;  // MembershipConfig::reliable_fallback_ping
  // MembershipConfig::names and ::addresses: where member names and
  // addresses are interned. Null (the default): the node's own. Nodes driven
  // by one thread may share them (pollen-sim's do); nodes on several threads
  // only once they are frozen (NamePool::Freeze; pollen-sim's --threads).
  std::shared_ptr<NamePool> member_names;
  std::shared_ptr<NamePool> member_addresses;
  // MembershipConfig::warm_members: members taken as alive from Start on, as
  // if the join were long done (pollen-sim's --warm-start); null: join
  // through the seeds.
  std::shared_ptr<const std::vector<std::pair<std::string, Address>>> warm_members;
  // Memory budget (0: no limit). A filter whose generations would take more
  // than max_filter_bytes, or whose creation would take the filters this
  // node holds past max_memory_bytes, is refused: a config filter fails
  // Create, Reserve and a restore answer ResourceExhausted naming the limit,
  // and a peer's catalog entry is not held here (RefusedFilters, counted in
  // NodeCounters::filters_refused, one kFilterRefused event per entry). The
  // others hold and serve it; this node answers "not found" for it, and takes
  // it as soon as a later announcement fits (after a DEL frees memory, say).
  // Counted at creation: every generation's first layer. A scaling filter's
  // later layers open regardless (each bounded by crdt::kMaxBlocks).
  uint64_t max_filter_bytes = 0;
  uint64_t max_memory_bytes = 0;
  Duration anti_entropy_interval = std::chrono::seconds(10);
  // kTree only: once three anti_entropy_intervals have passed with no sign of
  // trouble (member event, tree push given up by its sender or receiver,
  // parent change, rejected frame, dropped buffer or held delta, stall), the
  // wait doubles at each run, up to
  // this; any sign brings it back to anti_entropy_interval within a gossip
  // round. Per-link acks already repair a lost push, so in a healthy cluster
  // anti-entropy mostly re-sends bits still in flight (N=100 at 20,000
  // adds/s: ~45% of all bytes; simulation/README.md). At or below
  // anti_entropy_interval: a fixed interval. Flood dissemination (no acks)
  // always uses the fixed interval.
  Duration anti_entropy_max_interval = std::chrono::seconds(60);
  // One exchange's range data (and block hashes), each way. Below the
  // daemon's stream queue (16 MiB per peer by default): at 32 MiB, a healed
  // partition's first exchanges filled the queues of CPU-starved receivers,
  // whose dropped frames cut exchanges and tree pushes short and sent them
  // again (jepsen heal-under-load, 10^6 keys: ~1,400 frames dropped per
  // node). A cut exchange says so (SyncRanges.more) and the receiver starts
  // the next one once it has merged this one: a big repair moves at the
  // pace the receiver keeps up with. (At 8 MiB, with ranges as bitmaps,
  // 3 of 4 such heals dropped 1-14 frames again, and a cut exchange left a
  // node without ~80 of the 2,000 sampled keys for 2 s; at 4 MiB, none in 5.)
  size_t anti_entropy_round_bytes = size_t{4} << 20;
  Duration dead_reconnect_interval = std::chrono::seconds(30);
  size_t max_datagram_bytes = 1200;   // below any sane path MTU
  bool tcp_only = false;              // send everything as stream frames
  // Members() snapshot: refreshed even while nobody reads it (see Members()).
  // The simulator, which never reads it, turns this off: at N=1000 copying
  // every node's table every second was 10% of its CPU (perf).
  bool refresh_unread_members = true;

  // How new bits spread. kTree (the default): pushed once along a
  // self-repairing spanning tree of a small overlay (node/core/broadcast_tree.h),
  // numbered per link and sent again when lost (push_delivery.h): about
  // 1.0-1.1·(N-1) transmissions per bit. kFlood: each batch goes to `fanout`
  // random peers in each of RetransmitRounds() rounds, about 9·(N-1) at N=100.
  // Epoch, catalog and tombstone announcements flood in both modes; nodes in
  // different modes interoperate (each takes the other's bits as its own).
  enum class Dissemination : uint8_t { kFlood, kTree };
  Dissemination dissemination = Dissemination::kTree;
  uint32_t tree_degree = 4;                              // overlay neighbours sought (kTree)
  Duration tree_beacon_interval = std::chrono::seconds(5);  // beacons go out on change and this often
  // A push received is forwarded this long after it arrived, with whatever
  // else arrived meanwhile: the hop latency, traded against frames per bit.
  Duration tree_push_delay = std::chrono::milliseconds(50);
  // While this node is busy (bits arriving about once per gap or more
  // often), a push due sooner than tree_push_gap after its last one waits
  // for the gap to end, unless it already carries PushPacing::kFullWords
  // words: a busy node gathers more bits per push, an idle one still
  // forwards tree_push_delay after arrival. The hop latency is at most
  // max(tree_push_delay, tree_push_gap). 0: no gap. At most 60 s.
  // node/core/push_pacing.h; docs/node-core.md, "Push pacing".
  Duration tree_push_gap = std::chrono::milliseconds(200);
  // Name filters in tree pushes by a compact reference (name and digest,
  // wire.proto FilterRef.digest) to neighbours that advertise it, once the
  // filter's catalog entry is no longer being announced. false: full
  // references only, and none advertised (for comparisons).
  bool tree_compact_refs = true;
  // Leave the sender's address out of pushes and delivery control sent to
  // neighbours whose beacon advertises that they take it from their member
  // list (wire.proto TreeBeacon.features bit 1); beacons and hellos keep it.
  // false: the address on every frame, and none of that advertised.
  bool tree_implicit_sender = true;
  // Name filters in pushes to neighbours that advertise it (TreeBeacon
  // features bit 2) by link-scoped numbers instead of compact references
  // (node/core/filter_aliases.h); needs tree_compact_refs. false: none sent
  // and none advertised.
  bool tree_filter_aliases = true;
  // Send tree pushes bare (no version, name or address: the neighbour knows
  // this boot's seal sender id from a named frame) to neighbours that
  // advertise it (TreeBeacon features bit 3), once they have acknowledged a
  // push of the current stream; needs tree_implicit_sender. Probes, acks,
  // beacons and hellos stay named. false: none sent and none advertised.
  bool tree_bare_pushes = true;
  // Seal pushes and delivery control to neighbours that advertise it
  // (TreeBeacon features bit 4) with the compact header (protocol/seal.h);
  // beacons and hellos keep the full one. false: none sent and none
  // advertised (every node of this build opens both).
  bool tree_compact_seal = true;
  // Announce kMemberFeatureCompactFrames in this node's member record, and
  // send membership datagrams to members that announced it compact: compact
  // seal header, no sender address, the sender named once (Membership,
  // "Compact frames"). false: the full form to every member, none announced
  // (every node of this build takes both).
  bool compact_membership = true;

  // Owner-routed adds (FilterConfig::routed): how long an asker waits for
  // an owner's answer before asking again (node/core/routing.h).
  Duration route_timeout = std::chrono::milliseconds(100);

  // Collect the keys this node adds at a peer's request (TakePeerAdds). The
  // daemon turns this on to put them in its add log; off, nothing is kept
  // (the simulator never takes them).
  bool report_peer_adds = false;

  std::vector<FilterConfig> filters;  // declared filters
};

// Keys added to `filter` at a peer's request (Node::TakePeerAdds).
struct PeerAdds {
  std::string filter;
  std::vector<std::string> keys;
};

// The answer to one BeginAdd (node/core/routing.h).
struct RoutedAddResult {
  uint64_t ticket = 0;
  absl::Status status;      // NotFound if the filter disappeared while owners were asked
  std::vector<bool> added;  // per key: new (the owner's answer for routed keys)
  std::vector<bool> full;   // per key: refused because the filter is full (kFilterFullError)
  uint32_t remote_keys = 0;    // keys another node decided
  uint32_t fallback_keys = 0;  // keys decided here because their owner did not answer
  Duration latency{0};         // from BeginAdd to the answer, in the driver's `now`
};

// The answer to one BeginWait or BeginQuorumExists (node/core/peer_checks.h).
struct PeerCheckResult {
  uint64_t ticket = 0;
  absl::Status status;
  // WAIT: peers that answered holding every key. every_live_peer: they are
  // all the members live here when the WAIT began (the caller may forget
  // the keys then: no live peer lacks them).
  uint32_t peers_acked = 0;
  bool every_live_peer = false;
  // Quorum EXISTS: per key, present here or at a peer asked; and the peers
  // that answered for every key they were asked about.
  std::vector<bool> present;
  uint32_t peers_answered = 0;
  Duration latency{0};  // from the call to the answer, in the driver's `now`
};

// One sub-filter: generation `epoch`, layer `layer` (0 unless it scales).
struct GenerationInfo {
  uint64_t epoch = 0;
  uint32_t layer = 0;
  uint64_t capacity = 0;  // keys the layer is sized for (the filter's capacity if it does not scale)
  uint64_t items = 0;     // keys this node counts in it (new adds here, raised to the estimate if `merged`)
  bool merged = false;    // it received bits other than by this node's adds: `items` is partly an estimate
  uint64_t blocks = 0;
  uint32_t k = 0;
  uint64_t set_bits = 0;
  double fill_ratio = 0;
  double estimated_items = 0;
  double estimated_fpr = 0;
  uint64_t digest = 0;  // hash of the generation's words: equal iff equal state (w.h.p.)
};

struct FilterInfo {
  FilterConfig config;
  uint64_t blocks = 0;
  uint32_t k = 0;
  uint64_t memory_bytes = 0;
  // The epoch is a max-register per incarnation: it never decreases while
  // `incarnation` stays the same. The incarnation (a number local to this node)
  // changes only when the node discards the filter's state for a catalog entry
  // that wins over the local one and has other parameters (a conflicting
  // creation, or a snapshot import): that is a different filter under the same
  // name, and it starts at the winner's epoch, which may be lower. Each such
  // replacement emits kFilterDiscarded and counts in filters_replaced.
  uint64_t incarnation = 0;
  uint64_t epoch = 0;
  // The catalog entry's identity (catalog.h): creation stamp (0 for filters
  // declared in config) and the creating node ("" for config).
  uint64_t stamp = 0;
  std::string creator;
  std::vector<GenerationInfo> generations;  // sub-filters, ascending (epoch, layer)
  // This node's tallies since the filter (this incarnation) appeared here:
  // keys tested, of which answered "may be present", and the false positives
  // clients reported (Node::ReportFalsePositives).
  uint64_t queries = 0, answered_present = 0, false_positives = 0;
  bool saturated = false;  // past a saturation threshold (node_impl.h), as of the last gossip round
};

// The observed false-positive rates of `f` on this node: over the queries
// answered present (how often a "present" is wrong) and over all negatives
// (false / (false + true negatives): the rate the filter was designed for).
// Both are 0 before any report. A node counts at most as many false
// positives as it answered present (more arrive when clients report to
// another node than the one that answered; sum over nodes for those).
struct ObservedFpr {
  double over_present = 0;
  double over_negatives = 0;
};
ObservedFpr ObservedFalsePositiveRate(const FilterInfo& f);

// The largest count one report may carry.
inline constexpr uint64_t kMaxFalsePositiveReport = uint64_t{1} << 40;

// What Node::Version returns: equal values mean the filter's state did not
// change in between (no bit set by an add or a merge, no rotation, no
// replacement). For WATCH.
struct FilterVersion {
  uint64_t incarnation = 0;
  uint64_t epoch = 0;
  uint64_t changes = 0;
  friend bool operator==(const FilterVersion&, const FilterVersion&) = default;
};

// Which per-generation figures Info() and Filters() compute, as bits: kCounts
// (set_bits, fill_ratio: a scan of the generation), kDigests (digest: another
// scan), kEstimates (estimated_items and estimated_fpr: a model evaluation,
// implies kCounts). Scans and estimates are memoized while the filter is
// unchanged; a caller that needs only some figures (the simulator's checkers)
// skips the others. Figures not asked for are zero; epochs are always filled in.
enum class InfoParts : uint8_t { kEpochsOnly = 0, kCounts = 1, kDigests = 2, kEstimates = 4 | 1, kAll = 7 };
inline bool HasParts(InfoParts have, InfoParts want) {
  return (static_cast<uint8_t>(have) & static_cast<uint8_t>(want)) == static_cast<uint8_t>(want);
}

// Counters for metrics; monotonically increasing.
struct NodeCounters {
  uint64_t adds = 0, queries = 0, hits = 0;
  uint64_t delta_bits_sent = 0, delta_bits_received = 0;
  uint64_t bytes_out = 0, bytes_in = 0;
  uint64_t frames_out = 0, frames_in = 0;
  uint64_t anti_entropy_runs = 0, ranges_repaired = 0;
  uint64_t anti_entropy_continued = 0;  // exchanges started at once after a peer's budget ran out (SyncRanges.more)
  uint64_t anti_entropy_resumed = 0;    // cut content legs this node went on with from the kept block hashes
  uint64_t epochs_advanced = 0;
  uint64_t layers_opened = 0;     // layers a scaling filter opened here (by an add, an estimate or a peer)
  uint64_t filters_replaced = 0;  // local state discarded for a winning catalog entry (FilterInfo::incarnation)
  // Peers' catalog entries this node would not hold, by reason: "max_filter_bytes", "max_memory".
  std::map<std::string, uint64_t> filters_refused;
  uint64_t filters_deleted = 0;   // live filters removed by a tombstone (DEL here or on a peer)
  uint64_t tombstones_dropped = 0;  // oldest tombstones forgotten at kMaxTombstones
  uint64_t delta_overflows = 0;  // dissemination buffers dropped (anti-entropy repairs)
  uint64_t stale_deltas = 0;     // deltas for epochs that left the window: dropped
  uint64_t unknown_filter = 0;   // deltas/epochs for filters not (yet) in the catalog
  // Deltas for filters not in the catalog yet (HeldDeltas): held; refused
  // (no room); merged when the catalog entry came; dropped (held one
  // anti-entropy interval, or the name was deleted meanwhile).
  uint64_t held_deltas = 0, held_deltas_refused = 0, held_deltas_released = 0, held_deltas_dropped = 0;
  uint64_t tree_parent_changes = 0;  // kTree: times this node took another parent (or became root)
  uint64_t tree_resends = 0;         // kTree: pushes sent again because a tree link NACKed them
  // Lifeguard (Membership): the local health score (0 = healthy; the probe
  // interval and timeout are stretched by score + 1) and the ticks that came
  // more than a probe timeout late (this node did not run).
  uint32_t health_score = 0;
  uint64_t membership_stalls = 0;
  // A gauge: ranges whose anti-entropy summary is stale (marked dirty, not
  // recomputed yet; SummaryCache), as of the last gossip round.
  uint64_t stale_summary_ranges = 0;
  // Owner routing (BeginAdd on a routed filter), in keys: answered at once
  // because present here; decided here as their owner; decided by another
  // node; decided here because the owner did not answer (a duplicate "new"
  // is possible); and decided here for other nodes.
  uint64_t routed_present = 0, routed_owned = 0, routed_remote = 0, routed_fallbacks = 0, routed_served = 0;
  // "auth", "version", "malformed", "oversize", "replay", "unknown_key" (frames);
  // "params" (refused merges); "catalog_full"; "membership_<reason>".
  std::map<std::string, uint64_t> rejected_by_reason;
  std::map<std::string, uint64_t> bytes_out_by_type, bytes_in_by_type;
  std::map<std::string, uint64_t> frames_out_by_type;
};

// What this node knows about one other member, for metrics (Node::Peers).
struct PeerStats {
  std::string name;
  Address address;
  MemberState state = MemberState::kAlive;
  std::optional<Duration> probe_rtt{};   // last answered direct probe; none yet
  std::optional<Duration> since_data{};  // since the last valid delta or sync message from it; none: never
};

class Node {
 public:
  static absl::StatusOr<std::unique_ptr<Node>> Create(NodeConfig config);
  ~Node();

  // Driver thread only.
  void Start(Time now);  // begin joining through the seeds
  void Leave(Time now);  // graceful leave: announce, then stop probing
  void HandleDatagram(const Address& from, std::string_view bytes, Time now);
  void HandleStreamFrame(const Address& from, std::string_view bytes, Time now);
  void Tick(Time now);
  Time NextWakeup() const;  // when Tick next has work (the driver may tick earlier)
  std::vector<Outgoing> TakeOutgoing();
  std::vector<Event> TakeEvents();

  absl::Status Reserve(const FilterConfig& filter, Time now);  // "ERR item exists" -> AlreadyExists
  // Deletes `filter` cluster-wide (DEL): a tombstone covering the entry this
  // node holds (catalog.h), applied here at once and gossiped. False if this
  // node has no such filter (nothing changes). A later Reserve of the name
  // creates a new filter.
  absl::StatusOr<bool> Delete(std::string_view filter, Time now);
  // Every tombstone this node holds: name -> deleted_through. Driver thread.
  std::map<std::string, uint64_t> Tombstones() const;
  // Merges a tombstone as if a peer had announced it (persistence replay).
  // InvalidArgument for a name over the limit. Driver thread.
  absl::Status ImportTombstone(std::string_view filter, uint64_t deleted_through, Time now);
  absl::Status Rotate(std::string_view filter, Time now);      // operator-proposed epoch+1

  // Client operations: thread-safe. NotFound for an unknown filter.
  absl::StatusOr<bool> Add(std::string_view filter, std::string_view key);  // true: key was new
  // A fixed-size filter (expansion 0) that does not rotate by fill refuses a
  // new key once its newest generation holds its capacity (this node's count
  // of new keys, raised to its estimate from the bits): Add answers
  // ResourceExhausted(kFilterFullError); AddMany reports it per key in
  // `full` (resized to keys.size()) and answers false for it. A key already
  // present still answers false without an error, as in RedisBloom.
  absl::StatusOr<std::vector<bool>> AddMany(std::string_view filter, std::span<const std::string_view> keys,
                                            std::vector<bool>* full = nullptr);
  // Owner-routed add (driver thread), for a filter with FilterConfig::routed:
  // keys present here answer false at once; each other key is decided by its
  // owner (routing.h), which may be this node. Returns a ticket; its answer
  // comes out of TakeRoutedAdds once every owner answered or timed out
  // (after a HandleDatagram/HandleStreamFrame/Tick; at once when no key
  // needed another node). For a filter that is not routed this is AddMany,
  // answered at once. Errors as AddMany's, before anything changes.
  absl::StatusOr<uint64_t> BeginAdd(std::string_view filter, std::span<const std::string_view> keys, Time now);
  std::vector<RoutedAddResult> TakeRoutedAdds();  // driver thread
  // Keys this node added at a peer's request since the last call: an owner's
  // routed decisions (HandleRouteAdd, each request once) and a WAIT's pushed
  // keys (HandleKeyCheck); an entry without keys for a routed request
  // answered again from memory (its keys came with the first). Empty unless
  // NodeConfig::report_peer_adds. They
  // are taken before TakeOutgoing, whose replies report them, so a driver
  // can make them durable first: an owner that restarts then still knows
  // the keys it answered "new" for.
  std::vector<PeerAdds> TakePeerAdds();  // driver thread
  // Thread-safe: true if `filter` exists here and is routed.
  bool IsRouted(std::string_view filter) const;
  // Thread-safe, the fast path of a routed add: true if every key may be
  // present here, so the add answers 0 for each without an owner; counted as
  // adds (and routed_present) then. False changes nothing.
  absl::StatusOr<bool> AnswerIfAllPresent(std::string_view filter, std::span<const std::string_view> keys);

  // WAIT numreplicas (driver thread): pushes `batches` to every live peer,
  // which adds and acknowledges them, and answers (TakePeerChecks) once
  // `replicas` peers hold every key and the others had a short grace, once
  // no other peer can answer, or at `timeout` (zero, or over kMaxWaitTime:
  // kMaxWaitTime). replicas == 0, and a key over kMaxCheckKeyBytes, answer
  // 0 at once. Keys of filters unknown here are skipped (nothing to hold). ResourceExhausted over kMaxWaitKeys keys or when too many
  // checks are in flight.
  absl::StatusOr<uint64_t> BeginWait(const std::vector<KeyBatch>& batches, uint32_t replicas, Duration timeout,
                                     Time now);
  // Quorum EXISTS (driver thread): each key absent here is asked of
  // min(replicas, kMaxQuorumPeers, live peers) random live peers; present if
  // any says so. Answered when they all answered, or after kRouteAttempts
  // route timeouts with what came. NotFound for an unknown filter.
  absl::StatusOr<uint64_t> BeginQuorumExists(std::string_view filter, std::span<const std::string_view> keys,
                                             uint32_t replicas, Time now);
  std::vector<PeerCheckResult> TakePeerChecks();  // driver thread

  absl::StatusOr<bool> Exists(std::string_view filter, std::string_view key) const;
  absl::StatusOr<std::vector<bool>> ExistsMany(std::string_view filter, std::span<const std::string_view> keys) const;
  // A client's report that `count` keys this filter answered "may be present"
  // for were absent from its exact store (POLLEN.FALSEPOSITIVE). Counts on
  // this node only; summed over nodes, the reports give the cluster's rate
  // whichever node they reach. Returns the filter's total reported here.
  // InvalidArgument for a count outside [1, kMaxFalsePositiveReport].
  absl::StatusOr<uint64_t> ReportFalsePositives(std::string_view filter, uint64_t count);
  // Owners of the digest filters named in `digests` (all digests when empty)
  // that may contain `key`, sorted by owner name.
  std::vector<std::string> WhoHas(std::span<const std::string> digests, std::string_view key) const;
  absl::StatusOr<FilterInfo> Info(std::string_view filter) const { return Info(filter, InfoParts::kAll); }
  absl::StatusOr<FilterInfo> Info(std::string_view filter, InfoParts parts) const;
  std::vector<FilterInfo> Filters() const { return Filters(InfoParts::kAll); }  // sorted by name
  std::vector<FilterInfo> Filters(InfoParts parts) const;
  // Thread-safe, no scan: the filter's version (nullopt if unknown), and the
  // names of every filter, sorted.
  std::optional<FilterVersion> Version(std::string_view filter) const;
  std::vector<std::string> FilterNames() const;
  // Sorted by name, self included. A snapshot the driver thread refreshes at
  // Start/Leave and otherwise at most every 100 ms of its `now` while someone
  // reads it (every 1 s when nobody has since the last refresh), at the next
  // Tick or frame after a change: it can lag a change by up to about 1 s.
  // With NodeConfig::refresh_unread_members off, it is not refreshed at all
  // until the first call, which then returns the snapshot taken at Create
  // (self only).
  std::vector<MemberInfo> Members() const;
  NodeCounters Counters() const;
  // Driver thread. Members held alive or suspect, self included.
  size_t LiveMemberCount() const;
  const std::string& name() const;
  // Driver thread. Every member in the table but self, sorted by name. A
  // delta, sync request or sync ranges message that passes validation counts
  // as replication data from its (authenticated) sender, if the sender is a
  // known member at that time.
  std::vector<PeerStats> Peers(Time now) const;

  // Persistence (driver thread): snapshot bytes per filter (crdt snapshot format)
  // plus the catalog, and the reverse on restart before Start().
  // Each value is self-contained: "PLNNODE1" | u32 LE length | the filter's
  // catalog entry (wire::CatalogEntry) | crdt::EncodeSnapshot bytes, so values
  // can be imported in any order. Importing a filter that exists merges it in.
  // A value whose entry a tombstone covers is refused with Aborted and
  // changes nothing (a restore, which makes a new filter under a fresh
  // stamp, is PrepareRestore and CommitRestore below). `consumed` (optional): as
  // crdt::OrSnapshotIntoEmpty's, in offsets of `bytes`; called only on
  // recovery's one-pass load into an empty filter.
  std::map<std::string, std::string> ExportSnapshots() const;
  // The same without a copy of any filter (driver thread; the daemon's
  // snapshots): per filter, sorted by name, what crdt::StreamSnapshot needs to
  // write its value from the live sub-filters on another thread.
  struct SnapshotSource {
    std::string name;
    std::string prefix;  // "PLNNODE1" | u32 length | catalog entry: the value's start
    std::shared_ptr<const crdt::GenerationSet> set;  // for its parameters
    std::vector<std::shared_ptr<const crdt::SubFilter>> subs;  // kept alive by these
    FilterVersion version;  // when taken: equal versions, equal contents
  };
  std::vector<SnapshotSource> SnapshotSources() const;

  // Filters in the cluster's catalog that this node does not hold because
  // of its memory budget (NodeConfig::max_memory_bytes), sorted by name
  // (driver thread). HeldFilterBytes: what the filters held here count
  // against max_memory_bytes (each at least its full window of generations).
  struct RefusedFilter {
    std::string name;
    std::string reason;  // "max_filter_bytes" or "max_memory"
    std::string detail;  // the refusal, as logged
    uint64_t bytes = 0;  // what holding it would take
    std::string creator;
  };
  std::vector<RefusedFilter> RefusedFilters() const;
  uint64_t HeldFilterBytes() const;
  // Persistence's incremental snapshots (driver thread, before Start()): a
  // delta value is "PLNNODE1" | u32 length | catalog entry, as a snapshot
  // value, then crdt::StreamDelta bytes. ImportDelta ORs one into the live
  // filter of equal parameters, after validating all of it (crdt::VisitDelta);
  // NotFound if the filter is unknown, Aborted if a tombstone covers the
  // entry, FailedPrecondition if the parameters differ, DataLoss if corrupt;
  // each changes nothing. ClearDirtyMarks drops every filter's dirty marks
  // (after loading files that hold those bits already).
  absl::Status ImportDelta(std::string_view bytes);
  void ClearDirtyMarks();
  absl::Status ImportSnapshot(std::string_view bytes, const std::function<void(size_t)>& consumed = nullptr);
  // A restore (BF.LOADCHUNK, COPY, RENAME) in two halves, so that the driver
  // does not stall on a big filter. PrepareRestore (any thread: it reads only
  // what never changes) validates a snapshot value whole (entry, key id,
  // structure, checksum) and builds its filter: at gigabytes, seconds of
  // first touches of fresh memory. CommitRestore (driver thread) installs
  // it as a new filter of this node (a fresh stamp, above any tombstone),
  // unless the name is deleted for good (FailedPrecondition), taken
  // (AlreadyExists) or over a memory limit (ResourceExhausted). A copy of a
  // config filter is no config filter.
  struct PreparedRestore;
  absl::StatusOr<std::shared_ptr<PreparedRestore>> PrepareRestore(std::string_view bytes) const;
  absl::Status CommitRestore(std::shared_ptr<PreparedRestore> restore, Time now);
  // The filter name inside such a value (validated as ImportSnapshot would
  // parse its catalog entry); any thread.
  static absl::StatusOr<std::string> SnapshotFilterName(std::string_view bytes);
  // Such a value from a serialized wire::CatalogEntry and crdt snapshot bytes.
  static std::string SnapshotValue(std::string_view catalog_entry, std::string_view crdt_snapshot);

  // Thread-safe: copies words [first, first + out.size()) of `filter`'s
  // sub-filter in `slot` (crdt::SlotOf(epoch, layer); BF.SCANDUMP). NotFound
  // if the filter or the sub-filter is not live, OutOfRange past its end.
  absl::Status ExportWords(std::string_view filter, uint64_t slot, uint64_t first, std::span<uint64_t> out) const;
  // The add log's creation records (driver thread). ExportCatalogEntry: the
  // filter's catalog entry (stamp and creator included) as a serialized
  // wire::CatalogEntry carrying the current epoch; NotFound if unknown.
  // ImportCatalogEntry validates such bytes fully (parse, FromWire, epoch
  // range, key id) before touching state, then applies them under the catalog
  // rule exactly as if a peer had announced them: an unknown filter is created
  // empty; a conflict keeps the deterministic winner.
  absl::StatusOr<std::string> ExportCatalogEntry(std::string_view filter) const;
  absl::Status ImportCatalogEntry(std::string_view bytes, Time now);

  // Keyring for frame sealing (driver thread). Keys are 32 bytes.
  absl::Status KeyringInstall(std::string_view key);
  absl::Status KeyringUse(uint64_t key_id);
  absl::Status KeyringRemove(uint64_t key_id);
  std::vector<uint64_t> KeyringList() const;  // primary first

 private:
  Node();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pollen::node
