// Membership: SWIM-style failure detection and member dissemination, sans-IO.
//
// One instance per node. The owner (Node) feeds it decoded messages and the
// current time and carries out what it returns; it owns no socket, clock or
// random source (randomness: an Rng seeded from the constructor argument).
//
// What it promises:
//  - Join: Start() sends a join (a push/pull carrying this node's full state) to
//    every seed other than self_address, again every probe_interval until some
//    other member has been heard from (joined(): a push/pull arrived or some
//    other member is live). No seeds but self: joined at Start().
//  - Failure detection: one member (alive or suspect) is probed per
//    probe_interval, in a randomized round-robin order. No ack within
//    probe_timeout -> indirect pings through `indirect_probes` random alive
//    members and (reliable_fallback_ping) one more ping to the member by
//    stream, answered by stream; still no ack when the next probe starts ->
//    the member is suspected.
//    A suspect not refuted within
//      suspicion_multiplier * log10(max(N, 1) + 1) * probe_interval
//    (N = LiveCount()) is declared dead.
//  - Per member, the state kept is the largest (incarnation, state) in
//    lexicographic order, states ranked alive < suspect < dead < left. So an
//    alive needs a strictly higher incarnation to override anything, a left
//    member is never resurrected by an older or equal incarnation, and any two
//    nodes that saw the same updates hold the same table. One exception: a
//    "dead" learned through a full-state list (push/pull, join) is taken as
//    "suspect" (as memberlist does), so a healing partition does not flap.
//  - Refutation: a node that learns it is suspect, dead or left at an
//    incarnation i >= its own, or alive at an i > its own (a previous life of
//    a restarted node), moves to alive at max(own, i) + 1, unless it has left.
//  - Dissemination: each update is queued (one entry per member, newest wins)
//    and piggybacked on pings, acks, ping-reqs and periodic gossip messages
//    (gossip_fanout random live members every gossip_interval while anything
//    is queued), fewest-sent and then newest first, as many per message as
//    fit max_piggyback_bytes (and at most max_piggyback), each sent
//    ceil(3*log10(N+1))+1 times.
//  - Accusations reach the accused directly: a member that becomes suspect or
//    dead here is sent its state at once, suspects are reminded every
//    probe_interval, and every message to a member held suspect, dead or left
//    carries that member's state first. A node that hears a wrong view of
//    itself (an accusation, or after Leave anything but its leave) answers the
//    sender with its current state; a sender held suspect or dead is answered
//    with its state. (At most kMaxNotify such messages per Handle or Tick.)
//  - Anti-entropy of the table: a push/pull with a random live member every
//    push_pull_every probe intervals (random phase), stretched by
//    PushPullScale() past 32 live members. It opens with a summary (the
//    sender's TableDigest()): a receiver whose table is equal answers
//    nothing, else it sends its full list and gets the sender's back (so
//    between equal tables one datagram, between different ones three
//    messages instead of two). Every dead_reconnect_interval a join to one random
//    dead (not left) member, or to a random seed when no other member is live,
//    so a healed partition merges back by itself.
//  - Leave(): incarnation+1, state left, announced to up to kMaxLeaveFanout
//    live members at once; probing, push/pull and reconnects stop.
//  - Input validation before any state change: a message with an empty or
//    oversized name or address, an unknown status, more than
//    kMaxPiggybackWire updates or a full list over max_members is dropped
//    whole and counted (rejected()); so are acks that match no probe or relay,
//    ping-reqs from senders not held alive or suspect, and pings for another
//    name. A ping from an unknown sender is answered (one ack, no state), so a
//    newcomer is never suspected by a member that has not heard of it yet.
//    All tables and queues are bounded (max_members: when full, the oldest
//    left then dead member is evicted, else the newcomer is refused;
//    kMaxRelays, kMaxSeeds, kMaxNotify, probe order <= 2 * max_members).
//  - Round-trip times: an ack from the probed member itself (not relayed)
//    before the indirect phase (so not the stream ping's)
//    records now - (time its ping was sent) as that member's probe_rtt
//    (MemberInfo), kept until the next such ack or the member's eviction.
//  - Lifeguard (config.lifeguard; Dadgar, Phillips, Currey: "Lifeguard: Local
//    Health Awareness for More Accurate Failure Detection", 2017, as in
//    memberlist). A node that is itself slow must not accuse healthy peers:
//     * Health score in [0, max_health_multiplier - 1]: +1 per missing nack
//       of a failed probe (+1 when it had no helpers), +1 per refutation of a
//       suspicion of self, +1 per stall; -1 per answered probe. The probe
//       interval and probe timeout are multiplied by (score + 1).
//     * Nacks: a ping-req helper whose target has not answered within 80% of
//       its probe_timeout tells the prober so (MemberNack).
//     * Suspicion timeout: a suspicion starts at suspicion_max_multiplier x
//       the SWIM timeout above and shrinks, as distinct accusers confirm it
//       (each suspect update names its accuser), to the SWIM timeout at
//       K = suspicion_multiplier - 2 confirmations:
//         max - (max - min) * log(C + 1) / log(K + 1)
//       (K = 0 below K + 2 live members: the SWIM timeout at once).
//     * Stall: a Tick later than probe_timeout past NextWakeup() means this
//       node did not run (paused, CPU starved) while answers may sit unread.
//       The outstanding probe is dropped without a verdict, relays that
//       lapsed send no nack, and suspicions that lapsed get one more probe
//       interval (the refutation may be in the backlog).
//  - Compact frames (config.features has kMemberFeatureCompactFrames): this
//    node announces the bit in its own updates and says it in every
//    full-form message (MembershipMessage.features). Per member it keeps
//    the bit that member announced, with its address: from the first
//    record and from each new incarnation. A member's own word counts
//    whatever the incarnation: every message says what its sender takes (a
//    compact one implies the bit; an older build says nothing), and so does
//    its own update. A message by datagram to a member with the bit is
//    marked compact (Send::compact): the owner sends it without the
//    sender's address, with an empty MembershipMessage.sender (the envelope
//    names the sender) and under the compact seal header
//    (node/core/frames.h). A join, a stream message or a message to any
//    other member keeps the full form. This node's probe numbers start
//    below 2^21 (3 bytes; a 64-bit random start took 10) and count up.
//    A node restarted into an older build at the same incarnation is sent
//    the full form by its seeds from its join on, and by any other member
//    from the first message that member gets from it (its probe, at most N
//    probe intervals later; until then that member's compact frames to it
//    are lost, and its stream pings, which are full, still answer).
//    pollen-sim N=100: a ping 105 -> ~60 bytes, an ack 94 -> ~49
//    (simulation/README.md, "Compact membership frames and push pacing").
//  - Deterministic: same config, seed and inputs give the same outputs.
//
// Messages that carry full state (push_pull) can be large; the owner should
// send them as stream frames when they exceed its datagram budget.
//
// Not thread-safe: one driver thread.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "google/protobuf/arena.h"
#include "node/core/member_table.h"
#include "node/core/rng.h"
#include "node/core/types.h"
#include "protocol/membership.pb.h"

namespace pollen::node {

inline constexpr size_t kMaxPiggybackWireDefault = 64;  // Membership::kMaxPiggybackWire

// MemberUpdate.features bits.
inline constexpr uint32_t kMemberFeatureCompactFrames = 1;  // see "Compact frames" above

// An outgoing membership message, built on an arena of its own: its updates
// and their strings are a few large allocations, freed at once. A full-state
// list at N=10,000 is 10,000 updates. Built and freed on the heap, malloc and
// free were ~45% of the CPU in the first seconds of a 10,000-node cold start
// in pollen-sim, mostly for these lists; on arenas a 2000-node cold start
// takes 28% less CPU (simulation/README.md, "Cold start at N=10,000").
class OutMessage {
 public:
  OutMessage()
      : arena_(std::make_unique<google::protobuf::Arena>()),
        msg_(google::protobuf::Arena::CreateMessage<wire::MembershipMessage>(arena_.get())) {}
  OutMessage(OutMessage&& other) noexcept
      : arena_(std::move(other.arena_)), msg_(std::exchange(other.msg_, nullptr)) {}
  OutMessage& operator=(OutMessage&& other) noexcept {
    arena_ = std::move(other.arena_);
    msg_ = std::exchange(other.msg_, nullptr);
    return *this;
  }
  wire::MembershipMessage* operator->() const {
    assert(msg_ != nullptr);  // not moved from
    return msg_;
  }
  wire::MembershipMessage& operator*() const { return *operator->(); }

 private:
  std::unique_ptr<google::protobuf::Arena> arena_;  // owns *msg_; its address is stable across moves
  wire::MembershipMessage* msg_;
};

struct MembershipConfig {
  std::string self_name;
  Address self_address;
  std::vector<Address> seeds;  // may include self_address (skipped); at most kMaxSeeds used
  Duration probe_interval = std::chrono::seconds(1);
  Duration probe_timeout = std::chrono::milliseconds(500);  // < probe_interval
  uint32_t indirect_probes = 3;
  double suspicion_multiplier = 4.0;
  Duration dead_reconnect_interval = std::chrono::seconds(30);
  Duration gossip_interval = std::chrono::milliseconds(200);
  uint32_t gossip_fanout = 3;          // peers per gossip_interval (only when updates are queued)
  uint32_t push_pull_every = 30;       // push/pull every this many probe intervals; 0 = never
  // Piggybacked updates per message: at most this many (<= kMaxPiggybackWire)
  // and only while the message stays within max_piggyback_bytes serialized,
  // so it fits one datagram; but always at least one queued update, however
  // big (the frame then goes as a stream frame), so every update goes out. Filling the datagram (as memberlist does)
  // rather than 8 per message drains a 1000-node join 4-5x sooner, in fewer
  // frames (pollen-sim N=1000; simulation/README.md).
  size_t max_piggyback = kMaxPiggybackWireDefault;
  size_t max_piggyback_bytes = 1000;
  size_t max_members = 10000;          // table bound, self included
  // When a direct probe goes unanswered, ping the target once more by
  // stream alongside the indirect probes (memberlist's TCP ping, on by
  // default there too): datagram loss alone then rarely makes a suspect.
  bool reliable_fallback_ping = true;
  // Lifeguard (see above); false gives plain SWIM (for comparisons).
  bool lifeguard = true;
  uint32_t max_health_multiplier = 8;     // memberlist's AwarenessMaxMultiplier
  double suspicion_max_multiplier = 6.0;  // memberlist's SuspicionMaxTimeoutMult
  // Where member names, and addresses, are interned; null: a pool of this
  // node's own (one for both if `addresses` is null too). Nodes that share a
  // pool must run in one thread, unless it is frozen (NamePool). Apart, each pool's ids are
  // dense, and the member table's index is as long as the name ids.
  std::shared_ptr<NamePool> names;
  std::shared_ptr<NamePool> addresses;
  // A warm start: the (name, address) of members held alive at incarnation 0
  // from Start on, as if this node had joined long ago and every join had
  // reached it. No events, nothing queued for piggybacking (not even self),
  // no join sent: joined() at Start. Self, duplicates and members past
  // max_members are skipped. Read once, at Start, then dropped. For
  // pollen-sim's --warm-start, which measures a large cluster's steady state
  // without its O(N^2 log N) cold start; a daemon leaves it null.
  // Warm members are taken to announce this node's own `features`.
  std::shared_ptr<const std::vector<std::pair<std::string, Address>>> warm_members;
  // MemberUpdate.features of this node: what its build takes
  // (kMemberFeatureCompactFrames, or 0 for the full form from and to all).
  uint32_t features = 0;
};

class Membership {
 public:
  static constexpr size_t kMaxNameBytes = 255;
  static constexpr size_t kMaxAddressBytes = 255;
  static constexpr size_t kMaxPiggybackWire = kMaxPiggybackWireDefault;  // more in one message: rejected
  static constexpr size_t kMaxRelays = 256;        // pending ping-reqs relayed for others
  static constexpr size_t kMaxSeeds = 64;
  static constexpr size_t kMaxLeaveFanout = 64;
  static constexpr size_t kMaxNotify = 16;  // accused members told directly per Handle/Tick

  struct Send {
    Address to;
    OutMessage msg;
    // Send it as a stream frame (ordered, retransmitted by the transport)
    // even if it fits a datagram: the reliable fallback ping and its ack.
    bool reliable = false;
    // To a member that announced kMemberFeatureCompactFrames, by datagram,
    // from a node with the feature: the owner sends it compact (see above).
    bool compact = false;
  };

  // Asserts a valid config (non-empty name and address within the bounds,
  // positive intervals, probe_timeout < probe_interval, max_members >= 1).
  Membership(MembershipConfig config, uint64_t rng_seed);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;
  Membership(Membership&&) = default;  // the table moves by pointer: live_ and queue_ hold its slots
  Membership& operator=(Membership&&) = default;

  void Start(Time now);  // join through the seeds
  // Equal for two nodes that hold the same (name, address, incarnation,
  // state) for every member, themselves included (wire MemberPushPull's
  // table_digest). O(1): kept as the table changes.
  uint64_t TableDigest() const;
  void Leave(Time now);  // announce leave (incarnation+1), stop probing
  // `sender`: the sender's name, from the message or, if that is empty (a
  // compact frame), from the envelope.
  void Handle(const Address& from, const std::string& sender, const wire::MembershipMessage& msg, Time now);
  void Handle(const Address& from, const wire::MembershipMessage& msg, Time now) {
    Handle(from, msg.sender(), msg, now);
  }

  void Tick(Time now);
  Time NextWakeup() const;  // earliest time Tick has work; Time::max() if none

  std::vector<Send> TakeOutgoing();
  std::vector<Event> TakeEvents();  // kMemberJoined/Alive/Suspect/Dead/Left about others
  // Tests only: the piggyback queue's order numbers run out after `left`
  // more Enqueues (~67 million otherwise), so that its renumbering runs.
  void ExhaustQueueOrderForTesting(uint64_t left) {
    assert(left < kQueueOrderMask - queue_order_);
    queue_order_ = kQueueOrderMask - left;
  }

  std::vector<MemberInfo> Members() const;  // sorted by name, self included
  std::optional<MemberInfo> Find(const std::string& name) const;
  bool Knows(const std::string& name) const;  // Find(name).has_value(), without the copy
  std::vector<Address> LivePeers() const;  // alive+suspect, excluding self, sorted; O(N log N)
  size_t LiveCount() const;                // alive+suspect, self included unless left
  // The live peers (alive+suspect, not self) by position in [0, live_peer_count()),
  // in no meaningful order: for O(1) random picks (PickDistinct) without
  // building LivePeers(). Positions change with any membership change.
  size_t live_peer_count() const { return live_.size(); }
  const Address& LivePeerAddress(size_t position) const;
  const std::string& LivePeerName(size_t position) const;
  // The smallest name among live peers, or nullptr if none. O(1), but
  // O(live peers) once after the smallest stops being live.
  const std::string* SmallestLivePeer() const;
  // The address of `name` if it is a live peer, else nullptr. Valid until the
  // next Handle/Tick/Leave.
  const Address* LiveAddressOf(const std::string& name) const;
  // Alive, not merely live: a suspect is live but not alive.
  bool IsAlive(const std::string& name) const;
  // Counts changes of any other member's state, incarnation or address, and
  // of the table's membership: answers of LiveAddressOf, IsAlive and
  // SmallestLivePeer can differ only after it moves. Lets an owner skip work
  // that depends on nothing else (Node's tree maintenance, every round).
  uint64_t view_version() const { return view_version_; }
  // Members held dead (not left), kept as a count so that reconnects walk
  // the table only when there is one to find.
  size_t dead_count() const { return dead_count_; }
  bool joined() const { return joined_; }
  bool left() const { return left_; }
  uint64_t incarnation() const { return incarnation_; }
  const MembershipConfig& config() const { return config_; }

  // Rejected input by reason ("name", "self", "address", "status", "too_many_updates",
  // "no_body", "unknown_ack", "unknown_nack", "unknown_sender", "target", "relays_full",
  // "table_full"), for metrics.
  const std::map<std::string, uint64_t>& rejected() const { return rejected_; }

  // SWIM's suspicion timeout for the current LiveCount(): Lifeguard's
  // minimum (reached at K confirmations).
  Duration SuspicionTimeout() const;
  // The suspicion timeout after `confirmations` distinct accusers beyond the
  // first (Lifeguard); SuspicionTimeout() without Lifeguard.
  Duration SuspicionTimeoutAfter(size_t confirmations) const;
  // Lifeguard's local health score (0 = healthy), and the probe interval and
  // timeout it stretches.
  uint32_t health_score() const { return health_score_; }
  Duration ProbeInterval() const { return config_.probe_interval * (health_score_ + 1); }
  Duration ProbeTimeout() const { return config_.probe_timeout * (health_score_ + 1); }
  // Ticks that came more than probe_timeout late (this node did not run).
  uint64_t stalls() const { return stalls_; }
  // The push/pull period's multiplier for the current LiveCount() N: 1 up to
  // 32, then 1 + ceil(log2(N / 32)) (memberlist's scaling): a full-state
  // exchange costs O(N) bytes each way, so without it the cluster's push/pull
  // traffic grows as N^2. N=1000: 6 (every 180 s at the defaults).
  uint32_t PushPullScale() const;

 private:
  using Member = MemberEntry;
  // The piggyback queue's key: (transmits, newest first) in 32 bits, and
  // the queue a B-tree of (key, slot) packed into 8 bytes. It was a B-tree of
  // 16-byte pairs (and before that a map of wire updates, ~265 of the ~725
  // bytes per pair at N=1000's cold-start peak): a cold start queues nearly
  // every member at every node, and the pairs were 286 MB of pollen-sim's
  // N=4000 cold start (heaptrack). The order counts down from kQueueOrderMask
  // and is renumbered (RenumberQueue) when it runs out, every ~67 million
  // Enqueues.
  static constexpr int kQueueOrderBits = 26;
  static constexpr uint32_t kQueueOrderMask = (uint32_t{1} << kQueueOrderBits) - 1;
  static constexpr uint32_t kMaxTransmits = (uint32_t{1} << (32 - kQueueOrderBits)) - 1;
  static constexpr MemberSlot kSelfSlot = kNoSlot - 1;  // self's entry in queue_
  static uint64_t QueueEntry(uint32_t key, MemberSlot slot) { return uint64_t{key} << 32 | slot; }
  static uint32_t KeyOf(uint64_t entry) { return static_cast<uint32_t>(entry >> 32); }
  static MemberSlot SlotOf(uint64_t entry) { return static_cast<MemberSlot>(entry); }
  struct Probe {
    std::string target;
    uint64_t seq = 0;
    Time started{0};
    Duration timeout{0};  // ProbeTimeout() when it started: a score change mid-probe does not move it
    bool acked = false;
    bool indirect_sent = false;
    std::vector<std::string> helpers;
    std::vector<std::string> nacked;  // helpers that sent a nack (each once)
  };
  struct Relay {
    Address origin;
    std::string origin_name;
    uint64_t origin_seq = 0;
    std::string target;
    Time nack_at{0};   // no ack from the target by then: nack the origin
    bool nack_done = false;
    Time deadline{0};  // acks still relayed until then
  };

  // Validation; true if usable. Counts the reason otherwise.
  bool ValidUpdate(const wire::MemberUpdate& u);
  bool ValidName(const std::string& name);
  void Reject(const std::string& reason);

  // Applies one update with the lattice rule; `from_full_state` maps dead to
  // suspect. Returns true if the local table changed.
  bool Apply(const wire::MemberUpdate& u, bool from_full_state, Time now);
  // What a member says of itself sets what it takes, whatever the
  // incarnation: a node restarted into another build (say, back to one
  // without compact frames) says so in every message, before its new
  // incarnation spreads, if ever. TakeWord: `features` as said by the
  // message itself (MembershipMessage.features, or compact); TakeOwnWord:
  // an update about `sender`, from `sender`.
  void TakeWord(const std::string& sender, uint32_t features);
  void TakeOwnWord(const std::string& sender, const wire::MemberUpdate& u);
  void Refute(uint64_t accused_incarnation, Time now);
  // `accuser`: for a new suspicion, who raised it (may be empty).
  void SetState(Member& m, MemberState state, uint64_t incarnation, Time now, const std::string& accuser = {});
  // Lifeguard: `accuser` confirms the suspicion of m; a new distinct one
  // shortens its deadline and is gossiped on.
  void Confirm(Member& m, const std::string& accuser, Time now);
  size_t ExpectedConfirmations() const;
  void AdjustHealth(int delta);
  void RecoverFromStall(Time now);
  bool MakeRoom();  // evicts the oldest left, then dead, member; false if none
  // Queues the member's (or self's) current state for piggybacking, replacing
  // what was queued for it. The update is built when sent, from the state
  // then: every change of what it carries comes with an Enqueue.
  void Enqueue(Member& m) { Enqueue(m.slot, &m.queue_key); }
  void EnqueueSelf() { Enqueue(kSelfSlot, &self_queue_key_); }
  void Enqueue(MemberSlot slot, uint32_t* key);
  void Dequeue(MemberSlot slot, uint32_t* key);
  uint32_t* HeldKey(MemberSlot slot) { return slot == kSelfSlot ? &self_queue_key_ : &members_->at(slot).queue_key; }
  // New order numbers for every queued entry, oldest first from 0, keeping
  // the queue's order: the counter then starts again above them.
  void RenumberQueue();
  void WriteUpdate(const Member& m, wire::MemberUpdate* out) const;  // into a fresh update
  void WriteSelfUpdate(wire::MemberUpdate* out) const;
  MemberInfo InfoOf(const Member& m) const;

  void Emit(Event::Kind kind, const Member& m);
  void SendMsg(const Address& to, OutMessage msg, const std::string& peer_name, bool reliable = false);
  OutMessage NewMessage() const;
  uint64_t DigestOf(const Member& m) const;  // one entry's share of TableDigest
  void FillFullState(wire::MemberPushPull* pp) const;

  void HandlePing(const Address& from, const std::string& sender, const wire::MemberPing& p);
  void HandleAck(const std::string& sender, const wire::MemberAck& a, Time now);
  void HandlePingReq(const Address& from, const std::string& sender, const wire::MemberPingReq& r, Time now);
  void HandleNack(const std::string& sender, const wire::MemberNack& n);
  void HandlePushPull(const Address& from, const std::string& sender, const wire::MemberPushPull& pp, Time now);

  void ProbeTick(Time now);
  void SendIndirect(Time now);
  void GossipTick(Time now);
  void PushPullTick(Time now);
  void ReconnectTick(Time now);
  void JoinTick(Time now);
  void WarmStart(const std::vector<std::pair<std::string, Address>>& members, Time now);
  void SuspicionTick(Time now);
  void RelayTick(Time now);
  void FlushNotify();
  void SendJoin(const Address& to);

  std::optional<std::string> NextProbeTarget();
  // Keeps live_ (and the smallest live name) in step with m.state; call after
  // any change of it.
  void TrackLive(Member& m);
  // Up to k distinct random live members (alive only if `alive_only`), never
  // `exclude` (may be null). O(k) expected for k small against the table.
  std::vector<std::string> RandomMembers(size_t k, const std::string* exclude, bool alive_only);
  uint32_t RetransmitLimit() const;
  bool IsLive(const Member& m) const { return m.state == MemberState::kAlive || m.state == MemberState::kSuspect; }

  MembershipConfig config_;
  std::vector<Address> seeds_;  // without self, at most kMaxSeeds
  Rng rng_;
  bool started_ = false;
  bool joined_ = false;
  // Sum of DigestOf over the table (self not included): see TableDigest.
  uint64_t others_digest_ = 0;
  bool left_ = false;
  uint64_t incarnation_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t queue_order_ = 0;
  uint64_t view_version_ = 0;
  size_t dead_count_ = 0;  // members held dead: ReconnectTick walks the table only if some are
  uint32_t health_score_ = 0;  // Lifeguard, < max_health_multiplier
  uint64_t stalls_ = 0;

  // Others only. Held by pointer: its index's hasher points at it, and
  // Membership stays movable.
  std::unique_ptr<MemberTable> members_;
  // Piggyback queue, at most one entry per member and one for self:
  // QueueEntry(transmits << kQueueOrderBits | newest-first order, slot)
  // (kSelfSlot for self). The member's entry holds its key, so replacing it
  // needs no search.
  absl::btree_set<uint64_t> queue_;
  uint32_t self_queue_key_ = 0;  // 0: self not queued
  std::set<std::pair<Time, std::string>> suspicions_;  // (deadline, name) of suspects
  // A suspect's Lifeguard bookkeeping, by slot: exactly the members held
  // suspect have one. Looked up, never iterated (its order is the hash's).
  struct MemberSuspicion {
    Time since{0};
    Time deadline{0};                   // declared dead then, unless refuted
    std::vector<std::string> accusers;  // distinct, the first one first
  };
  absl::flat_hash_map<MemberSlot, MemberSuspicion> suspects_;
  MemberSuspicion& SuspicionOf(const Member& m) {
    assert(m.state == MemberState::kSuspect && suspects_.contains(m.slot));
    return suspects_.find(m.slot)->second;
  }
  const MemberSuspicion& SuspicionOf(const Member& m) const {
    assert(m.state == MemberState::kSuspect && suspects_.contains(m.slot));
    return suspects_.find(m.slot)->second;
  }
  // The alive and suspect members' slots, each at its Member::live_pos: added
  // at the end, removed by moving the last one into the gap. Random picks
  // index it, so a pick is O(1), not a walk of the table (at N=1000
  // rebuilding a list of live names on every change was a quarter of
  // pollen-sim's CPU; perf).
  std::vector<MemberSlot> live_;
  // SmallestLivePeer's answer; recomputed (O(live)) only after the smallest
  // one stops being live. The tree asks for it every round.
  mutable MemberSlot smallest_live_ = kNoSlot;
  mutable bool smallest_live_stale_ = false;
  // The entry for `name`, nullptr if absent. Hashed.
  Member* FindMember(std::string_view name) {
    const MemberSlot slot = members_->Find(name);
    return slot == kNoSlot ? nullptr : &members_->at(slot);
  }
  const std::string& NameOf(const Member& m) const { return members_->name(m); }
  const Address& AddressOf(const Member& m) const { return members_->address(m); }
  const Member* FindMember(std::string_view name) const {
    const MemberSlot slot = members_->Find(name);
    return slot == kNoSlot ? nullptr : &members_->at(slot);
  }
  std::map<uint64_t, Relay> relays_;       // by the seq this node used
  std::optional<Probe> probe_;
  std::vector<MemberSlot> probe_order_;  // an evicted member's place holds kNoSlot
  size_t probe_index_ = 0;

  Time next_probe_ = Time::max();
  Time next_gossip_ = Time::max();
  Time next_push_pull_ = Time::max();
  Time next_reconnect_ = Time::max();
  Time next_join_ = Time::max();

  std::vector<std::string> notify_;  // members that just became suspect or dead
  bool tell_sender_self_ = false;    // during Handle: the sender holds a wrong view of self
  std::string reply_peer_;           // during Handle: the sender's name
  bool replied_to_sender_ = false;   // during Handle: something was sent to the sender
  std::vector<Send> outgoing_;
  std::vector<Event> events_;
  std::map<std::string, uint64_t> rejected_;
};

}  // namespace pollen::node
