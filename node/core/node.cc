// Node: glue between membership, catalog, dissemination, anti-entropy and
// epochs. See node.h for the contract and the helper headers for each piece.
//
// Concurrency: `filters_` (name -> FilterState) is read by client threads under
// a shared lock and replaced, never mutated in place, by the driver thread
// under the exclusive lock. A FilterState's entry and set pointer are immutable
// once published; the set itself is thread-safe (crdt::GenerationSet). Client
// adds hand their newly set bits to the driver through PendingAdds (a mutex
// held for one vector append). Counters live under `stats_mu_`; the client
// counters are atomics. Everything else is driver-thread only.
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
#include <shared_mutex>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "crdt/sizing.h"
#include "crdt/snapshot.h"
#include "node/core/anti_entropy.h"
#include "node/core/catalog.h"
#include "node/core/dissemination.h"
#include "node/core/epochs.h"
#include "node/core/frames.h"
#include "node/core/gossip_packer.h"
#include "node/core/membership.h"
#include "node/core/rng.h"
#include "node/core/summary_cache.h"

namespace pollen::node {
namespace {

constexpr size_t kMaxPendingWords = size_t{1} << 20;   // client adds not yet drained
constexpr size_t kMaxBufferedWords = size_t{1} << 20;  // bits waiting for the next gossip round
constexpr size_t kMaxInFlightWords = size_t{4} << 20;  // all batches being repeated
constexpr size_t kMaxDeltaWords = size_t{1} << 15;     // per Delta message
constexpr size_t kMaxFramePositions = size_t{1} << 23; // decoded bit positions per frame
constexpr size_t kMaxGossipDeltas = kMaxFilters * crdt::kMaxGenerations;  // Delta parts per Gossip frame
constexpr size_t kSendChunkPositions = size_t{1} << 22;
constexpr size_t kSyncChunkBytes = size_t{1} << 20;    // per anti-entropy frame
constexpr size_t kMaxSyncBytesPerRound = size_t{32} << 20;
constexpr double kJoinSyncs = 3;      // expected syncs per member (re)appearance
constexpr size_t kMaxQueuedSyncs = 16;
constexpr size_t kMinDatagramBytes = 256;
constexpr Duration kMembersRefresh = std::chrono::milliseconds(100);  // Members() snapshot period when read
constexpr Duration kMembersIdleRefresh = std::chrono::seconds(1);    // ... when nobody reads it
constexpr size_t kMaxDatagramBytes = 65507;
constexpr char kSnapshotMagic[] = "PLNNODE1";  // 8 bytes

struct FilterState {
  uint64_t uid = 0;  // changes when the state is replaced by a conflict winner
  CatalogEntry entry;
  std::shared_ptr<crdt::GenerationSet> set;
  // Bumped (release) after every add or merge that set a bit in `set`, so
  // Info() can reuse its bit counts and digests while nothing changed.
  // Shared by copies of this state (they share `set`).
  std::shared_ptr<std::atomic<uint64_t>> changes = std::make_shared<std::atomic<uint64_t>>(0);
};

// A batch of new bits being repeated for a few gossip rounds.
struct InFlight {
  uint64_t filter_uid = 0;
  std::vector<crdt::WordBits> words;  // canonical
  uint32_t remaining = 0;
};

// Driver-only bookkeeping per filter name.
struct FilterClock {
  std::optional<Time> epoch_began;
  std::map<uint64_t, uint64_t> set_bits;  // per live epoch, from observed new bits
};

// Per-type traffic counters are kept in arrays indexed by BodyIndex (a map
// lookup by name per frame showed up in profiles) and become maps in Counters().
constexpr size_t kBodyKinds = 8;
constexpr const char* kBodyNames[kBodyKinds] = {"membership",   "catalog",     "delta",  "epochs",
                                                "sync_request", "sync_ranges", "gossip", "unknown"};
size_t BodyIndex(const wire::Envelope& env) {
  switch (env.body_case()) {
    case wire::Envelope::kMembership: return 0;
    case wire::Envelope::kCatalog: return 1;
    case wire::Envelope::kDelta: return 2;
    case wire::Envelope::kEpochs: return 3;
    case wire::Envelope::kSyncRequest: return 4;
    case wire::Envelope::kSyncRanges: return 5;
    case wire::Envelope::kGossip: return 6;
    default: return 7;
  }
}
using TypeCounts = std::array<uint64_t, kBodyKinds>;
void AddTypeCounts(const TypeCounts& counts, std::map<std::string, uint64_t>* out) {
  for (size_t i = 0; i < kBodyKinds; ++i) {
    if (counts[i] != 0) (*out)[kBodyNames[i]] += counts[i];
  }
}

absl::Status ValidateNodeConfig(const NodeConfig& c) {
  if (c.name.empty() || c.name.size() > Membership::kMaxNameBytes) return absl::InvalidArgumentError("node name must be 1 to 255 bytes");
  if (c.advertise.empty() || c.advertise.size() > Membership::kMaxAddressBytes) {
    return absl::InvalidArgumentError("advertise address must be 1 to 255 bytes");
  }
  if (c.cluster_label.size() > protocol::kMaxLabelBytes) return absl::InvalidArgumentError("cluster label too long");
  auto positive = [](Duration d) { return d.count() > 0; };
  if (!positive(c.gossip_interval) || !positive(c.probe_interval) || !positive(c.probe_timeout) ||
      !positive(c.anti_entropy_interval) || !positive(c.dead_reconnect_interval)) {
    return absl::InvalidArgumentError("intervals must be positive");
  }
  if (c.probe_timeout >= c.probe_interval) return absl::InvalidArgumentError("probe_timeout must be below probe_interval");
  if (c.fanout < 1 || c.fanout > 64) return absl::InvalidArgumentError("fanout must be 1 to 64");
  if (c.indirect_probes > 64) return absl::InvalidArgumentError("indirect_probes must be at most 64");
  if (!(c.suspicion_multiplier > 0 && c.suspicion_multiplier < 1000)) {
    return absl::InvalidArgumentError("suspicion_multiplier out of range");
  }
  if (c.max_datagram_bytes < kMinDatagramBytes || c.max_datagram_bytes > kMaxDatagramBytes) {
    return absl::InvalidArgumentError(absl::StrCat("max_datagram_bytes must be ", kMinDatagramBytes, " to ", kMaxDatagramBytes));
  }
  if (c.filters.size() > kMaxFilters) return absl::InvalidArgumentError("too many filters");
  std::set<std::string> names;
  for (const FilterConfig& f : c.filters) {
    if (!names.insert(f.name).second) return absl::InvalidArgumentError(absl::StrCat("duplicate filter '", f.name, "'"));
  }
  return absl::OkStatus();
}

uint64_t GenerationDigest(const crdt::BlockedFilter& filter) {
  return filter.RangeSummary(0, filter.shape().blocks);
}

}  // namespace

struct Node::Impl {
  explicit Impl(NodeConfig c)
      : config(std::move(c)), rng(config.rng_seed), codec(config.secret, config.cluster_label, rng),
        pending(kMaxPendingWords), deltas(kMaxBufferedWords) {}

  // ---- state ----
  NodeConfig config;
  Rng rng;
  FrameCodec codec;
  std::unique_ptr<Membership> membership;
  uint64_t key_id = 0;

  mutable std::shared_mutex filters_mu;
  // std::less<>: lookups by string_view without building a std::string.
  std::map<std::string, std::shared_ptr<const FilterState>, std::less<>> filters;  // guarded by filters_mu for writes
  std::map<std::string, FilterClock> clocks;                           // driver only
  uint64_t next_uid = 1;

  PendingAdds pending;
  DeltaBuffer deltas;
  std::set<std::string> announce_catalog, announce_epochs;  // driver only: new since the last round
  std::map<std::string, uint32_t> catalog_rounds, epoch_rounds;  // announcements still to repeat
  std::deque<std::pair<DeltaBuffer::Key, InFlight>> inflight;    // batches still to repeat
  size_t inflight_words = 0;
  std::deque<Address> ae_queue;  // members that (re)appeared, to sync with

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
  Time members_refreshed = Time::min();     // driver only
  uint64_t membership_rejected = 0;
  std::vector<Address> live_peers;  // driver only, see LivePeers()
  uint64_t live_peers_version = ~uint64_t{0};

  SummaryCache summary_cache;  // driver only

  // Info() scans per generation, memoized by (uid, epoch) while `changes` is
  // unchanged. Bounded; any thread.
  struct ScanResult {
    uint64_t changes = 0, set_bits = 0, digest = 0;
  };
  mutable std::mutex scans_mu;
  mutable std::map<std::pair<uint64_t, uint64_t>, ScanResult> scans;  // guarded by scans_mu

  mutable std::mutex estimates_mu;
  mutable std::map<std::tuple<uint64_t, uint32_t, uint64_t>, std::pair<double, double>> estimates;

  uint64_t frame_rejects = 0;             // driver only: Reject() calls so far
  absl::flat_hash_map<std::string, Time> last_data;  // driver only: by member name, see Peers(); never iterated in order

  bool started = false;
  Time now{0};
  Time next_gossip = Time::max();
  Time next_anti_entropy = Time::max();

  // ---- helpers ----
  template <typename F>
  void Stats(F f) {
    std::lock_guard lock(stats_mu);
    f(stats);
  }

  std::shared_ptr<const FilterState> Lookup(std::string_view name) const {
    std::shared_lock lock(filters_mu);
    auto it = filters.find(name);
    return it == filters.end() ? nullptr : it->second;
  }
  // Driver thread: its own reads need no lock (only it writes).
  std::shared_ptr<const FilterState> DriverLookup(const std::string& name) const {
    auto it = filters.find(name);
    return it == filters.end() ? nullptr : it->second;
  }
  void Publish(std::shared_ptr<const FilterState> state) {
    std::unique_lock lock(filters_mu);
    filters[state->entry.config.name] = std::move(state);
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
  std::string Serialize(wire::Envelope& env) const {
    env.set_version(kWireVersion);
    env.set_sender_name(config.name);
    env.set_sender_address(config.advertise);
    std::string plain;
    env.SerializeToString(&plain);
    return plain;
  }
  // Seals serialized envelope bytes (`type`: BodyIndex) for one peer.
  void SendPlain(const Address& to, const std::string& plain, size_t type, bool stream) {
    const size_t sealed = plain.size() + FrameCodec::kOverhead;
    if (sealed > protocol::kMaxFrameBytes) {  // senders chunk below this; never expected
      Stats([&](NodeCounters& s) { ++s.rejected_by_reason["oversize_out"]; });
      return;
    }
    const Channel channel =
        (stream || config.tcp_only || sealed > config.max_datagram_bytes) ? Channel::kStream : Channel::kDatagram;
    Outgoing o{to, channel, codec.Seal(plain, channel)};
    {
      std::lock_guard lock(stats_mu);
      ++stats.frames_out;
      stats.bytes_out += o.bytes.size();
      bytes_out_type[type] += o.bytes.size();
      ++frames_out_type[type];
    }
    out.push_back(std::move(o));
  }

  std::vector<Address> PickPeers(size_t count) { return PickPeers(LivePeers(), count); }
  // Membership::LivePeers() builds an O(N) sorted list; gossip wants it every
  // round. Cached until membership's peers_version() moves.
  const std::vector<Address>& LivePeers() {
    if (membership->peers_version() != live_peers_version) {
      live_peers = membership->LivePeers();
      live_peers_version = membership->peers_version();
    }
    return live_peers;
  }
  // `count` distinct random peers. For the usual count << N, draws indices
  // (rejecting repeats) rather than copying the whole list.
  std::vector<Address> PickPeers(const std::vector<Address>& peers, size_t count) {
    count = std::min(count, peers.size());
    std::vector<size_t> chosen;
    if (count * 4 > peers.size()) {  // dense: partial Fisher-Yates over indices
      std::vector<size_t> all(peers.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      for (size_t i = 0; i < count; ++i) std::swap(all[i], all[i + rng.Below(all.size() - i)]);
      chosen.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count));
    } else {
      while (chosen.size() < count) {  // expected < 2 draws per pick here
        const size_t i = rng.Below(peers.size());
        if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
      }
    }
    std::vector<Address> out;
    out.reserve(count);
    for (size_t i : chosen) out.push_back(peers[i]);
    return out;
  }

  // `force`: refresh the Members() snapshot now if anything changed; otherwise
  // at most every kMembersRefresh of `now` (copying the whole table on every
  // membership event was O(N) per event, O(N^3) cluster-wide during joins).
  void PumpMembership(bool force = false) {
    for (Membership::Send& s : membership->TakeOutgoing()) {
      wire::Envelope env;
      *env.mutable_membership() = std::move(s.msg);
      Send(s.to, env, false);
    }
    std::vector<Event> member_events = membership->TakeEvents();
    // Every state change of another member comes with an event; our own
    // incarnation and the live count catch the rest.
    const bool refresh = !member_events.empty() || membership->incarnation() != cached_incarnation ||
                         membership->LiveCount() != cached_live;
    for (Event& e : member_events) {
      if (e.kind == Event::Kind::kMemberJoined || e.kind == Event::Kind::kMemberAlive) QueueAntiEntropy(e.subject);
      events.push_back(std::move(e));
    }
    if (refresh) {
      cached_incarnation = membership->incarnation();
      cached_live = membership->LiveCount();
      members_dirty = true;
    }
    // Without readers (the simulator never asks) the copy is made at most once
    // per kMembersIdleRefresh; after a Members() call, every kMembersRefresh.
    const Duration period =
        members_requested.load(std::memory_order_relaxed) ? kMembersRefresh : kMembersIdleRefresh;
    if (members_dirty && (force || now >= members_refreshed + period)) {
      members_requested.store(false, std::memory_order_relaxed);
      members_dirty = false;
      members_refreshed = now;
      std::vector<MemberInfo> members = membership->Members();
      std::lock_guard lock(members_mu);
      members_cache = std::move(members);
    }
  }

  // A member (re)appeared: sync with it soon. So that a join or a healed
  // partition does not make every node sync with the same member at once, each
  // node takes the event with probability kJoinSyncs / LiveCount (about
  // kJoinSyncs syncs per appearance cluster-wide), and runs at most one such
  // sync per gossip round from a small bounded queue.
  void QueueAntiEntropy(const std::string& member) {
    const double live = static_cast<double>(std::max<size_t>(1, membership->LiveCount()));
    if (rng.Unit() * live >= kJoinSyncs) return;
    std::optional<MemberInfo> m = membership->Find(member);
    if (!m || std::find(ae_queue.begin(), ae_queue.end(), m->address) != ae_queue.end()) return;
    if (ae_queue.size() >= kMaxQueuedSyncs) return;
    ae_queue.push_back(m->address);
  }

  // Membership refuses some messages itself (unknown sender, bad name...):
  // surface those as "membership_<reason>" in rejected_by_reason.
  void CopyMembershipRejections() {
    uint64_t total = 0;
    for (const auto& [reason, count] : membership->rejected()) total += count;
    if (total == membership_rejected) return;
    membership_rejected = total;
    Stats([&](NodeCounters& s) {
      for (const auto& [reason, count] : membership->rejected()) s.rejected_by_reason["membership_" + reason] = count;
    });
  }

  // ---- filters, catalog, epochs ----
  absl::StatusOr<std::shared_ptr<const FilterState>> NewState(const CatalogEntry& entry, uint64_t epoch) {
    absl::StatusOr<std::unique_ptr<crdt::GenerationSet>> set = crdt::GenerationSet::Create(entry.params, config.secret, epoch);
    if (!set.ok()) return set.status();
    auto state = std::make_shared<FilterState>();
    state->uid = next_uid++;
    state->entry = entry;
    state->set = std::shared_ptr<crdt::GenerationSet>(std::move(*set));
    return std::shared_ptr<const FilterState>(std::move(state));
  }

  void CountBits(const std::string& name, const crdt::GenerationSet& set, bool scan) {
    FilterClock& clock = clocks[name];
    clock.set_bits.clear();
    for (uint64_t e : set.epochs()) {
      auto gen = set.Find(e);
      clock.set_bits[e] = (scan && gen) ? gen->filter->CountSetBits() : 0;
    }
  }

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

  bool OwnsDigest(const FilterState& s) const {
    return s.entry.config.scope == Scope::kDigest && s.entry.config.owner == config.name;
  }

  // Moves `name` to `epoch` if higher (max-register). True if it moved.
  bool LearnEpoch(const std::string& name, uint64_t epoch) {
    std::shared_ptr<const FilterState> state = DriverLookup(name);
    if (state == nullptr || epoch > kMaxEpoch || epoch <= state->set->epoch()) return false;
    absl::StatusOr<bool> moved = state->set->Advance(epoch);
    if (!moved.ok() || !*moved) return false;
    FilterClock& clock = clocks[name];
    std::map<uint64_t, uint64_t> bits;
    for (uint64_t e : state->set->epochs()) bits[e] = clock.set_bits.count(e) ? clock.set_bits[e] : 0;
    clock.set_bits = std::move(bits);
    clock.epoch_began = now;
    announce_epochs.insert(name);
    Stats([](NodeCounters& s) { ++s.epochs_advanced; });
    Emit(Event::Kind::kEpochAdvanced, name, "", state->set->epoch());
    return true;
  }

  // The catalog rule (catalog.h). Returns false if the entry was refused.
  void ApplyCatalogEntry(const CatalogEntry& e, uint64_t epoch) {
    const std::string& name = e.config.name;
    std::shared_ptr<const FilterState> local = DriverLookup(name);
    if (local == nullptr) {
      if (filters.size() >= kMaxFilters) {
        Stats([](NodeCounters& s) { ++s.rejected_by_reason["catalog_full"]; });
        return;
      }
      absl::StatusOr<std::shared_ptr<const FilterState>> state = NewState(e, epoch);
      if (!state.ok()) {
        RefuseMerge(name, std::string(state.status().message()));
        return;
      }
      Install(*std::move(state), false);
      Emit(Event::Kind::kFilterCreated, name, e.creator);
      return;
    }
    const bool same_descriptor = Descriptor(e) == Descriptor(local->entry);
    if (Precedes(e, local->entry)) {
      if (e.params == local->entry.params) {
        // Same state shape: adopt the winning entry, keep the bits.
        auto state = std::make_shared<FilterState>(*local);
        state->entry = e;
        Publish(std::move(state));
        announce_catalog.insert(name);
      } else {
        absl::StatusOr<std::shared_ptr<const FilterState>> state = NewState(e, epoch);
        if (!state.ok()) {
          RefuseMerge(name, std::string(state.status().message()));
          return;
        }
        Install(*std::move(state), false);
        Emit(Event::Kind::kFilterDiscarded, name, absl::StrCat("lost to the entry created by '", e.creator, "'"));
      }
    } else if (!same_descriptor && e.params != local->entry.params) {
      announce_catalog.insert(name);  // spread the winner towards the loser
      return;
    }
    if (same_descriptor || e.params == local->entry.params) LearnEpoch(name, epoch);
  }

  // Checks that an incoming reference matches our filter (invariant 4).
  std::shared_ptr<const FilterState> MatchFilter(const crdt::FilterParams& params) {
    std::shared_ptr<const FilterState> state = DriverLookup(params.name);
    if (state == nullptr) {
      Stats([](NodeCounters& s) { ++s.unknown_filter; });
      return nullptr;
    }
    if (!(state->entry.params == params)) {
      RefuseMerge(params.name, "filter parameters differ (blocks, k, generations, hash scheme or key id)");
      return nullptr;
    }
    return state;
  }

  // Merges words into (filter, epoch) and buffers the bits that were new here.
  // Returns the number of new bits.
  uint64_t MergeWords(const FilterState& state, uint64_t epoch, std::span<const crdt::WordBits> words) {
    std::vector<crdt::WordBits> changed;
    if (!state.set->Merge(epoch, words, &changed).ok()) return 0;  // epoch left the window meanwhile
    const uint64_t n = CountWordBits(changed);
    if (n == 0) return 0;
    state.changes->fetch_add(1, std::memory_order_release);
    summary_cache.MarkWords(state.uid, epoch, changed);
    clocks[state.entry.config.name].set_bits[epoch] += n;
    Buffer(state, epoch, changed);
    return n;
  }

  void Buffer(const FilterState& state, uint64_t epoch, std::span<const crdt::WordBits> words) {
    if (!deltas.Add(state.entry.config.name, state.uid, epoch, words)) {
      Stats([](NodeCounters& s) { ++s.delta_overflows; });
    }
  }

  void DrainPending() {
    uint64_t dropped = 0;
    std::vector<PendingAdds::Entry> entries = pending.Drain(&dropped);
    if (dropped > 0) {
      Stats([](NodeCounters& s) { ++s.delta_overflows; });
      for (auto& [name, state] : filters) CountBits(name, *state->set, true);  // recount fills
      summary_cache.InvalidateAll();
    }
    // A node with no live peer has no one to send deltas to: it keeps its
    // counts and summaries current but buffers nothing, and anti-entropy
    // (which runs when a member joins or comes back) carries these bits later.
    // Saves the driver's sort-and-encode work on a standalone node (~10% of a
    // core under redis-benchmark, perf).
    const bool alone = LivePeers().empty();
    // Entries for one filter arrive in runs; look each run's filter up once.
    std::map<uint64_t, std::shared_ptr<const FilterState>> by_uid;
    for (const auto& [name, state] : filters) by_uid[state->uid] = state;
    for (const PendingAdds::Entry& e : entries) {
      auto it = by_uid.find(e.filter_uid);
      if (it == by_uid.end() || it->second->set->Find(e.epoch) == nullptr) continue;
      FilterClock& clock = clocks[it->second->entry.config.name];
      if (dropped == 0) clock.set_bits[e.epoch] += static_cast<uint64_t>(std::popcount(e.word.bits));
      summary_cache.MarkWord(e.filter_uid, e.epoch, e.word.index);
      if (!alone) Buffer(*it->second, e.epoch, {&e.word, 1});
    }
  }

  // ---- periodic work ----
  // Each batch of new bits (and each announcement) goes out for
  // RetransmitRounds() gossip rounds, each time to `fanout` fresh random peers:
  // sending once reaches only a fraction 1 - e^{-F x} = x of the cluster
  // (~94% for F = 3), while r rounds reach 1 - e^{-r F} (r = 3: 99.99%).
  uint32_t RetransmitRounds() const {
    const double live = static_cast<double>(membership->LiveCount());
    return std::max<uint32_t>(2, static_cast<uint32_t>(std::ceil(std::log10(live + 1))));
  }

  void GossipRound() {
    DrainPending();
    const uint32_t rounds = RetransmitRounds();
    for (auto& [key, bits] : deltas.Take()) {
      inflight.emplace_back(key, InFlight{bits.filter_uid, std::move(bits.words), rounds});
      inflight_words += inflight.back().second.words.size();
    }
    while (inflight_words > kMaxInFlightWords && !inflight.empty()) {  // oldest first
      inflight_words -= inflight.front().second.words.size();
      inflight.pop_front();
      Stats([](NodeCounters& s) { ++s.delta_overflows; });
    }
    if (inflight.empty() && announce_epochs.empty() && announce_catalog.empty() && epoch_rounds.empty() &&
        catalog_rounds.empty() && ae_queue.empty()) {
      return;  // the common idle round: no O(N) peer list
    }
    const std::vector<Address>& live = LivePeers();  // not refreshed below: no membership calls
    // One part per (filter, epoch): the union of its batches still in flight.
    std::map<DeltaBuffer::Key, std::vector<crdt::WordBits>> unions;
    for (auto& [key, batch] : inflight) {
      std::shared_ptr<const FilterState> state = DriverLookup(key.first);
      if (state == nullptr || state->uid != batch.filter_uid || state->set->Find(key.second) == nullptr) {
        batch.remaining = 0;
        continue;
      }
      std::vector<crdt::WordBits>& u = unions[key];
      u.insert(u.end(), batch.words.begin(), batch.words.end());
      --batch.remaining;
    }
    for (auto it = inflight.begin(); it != inflight.end();) {
      if (it->second.remaining == 0) {
        inflight_words -= it->second.words.size();
        it = inflight.erase(it);
      } else {
        ++it;
      }
    }
    // Everything this round goes to the same `fanout` random peers, packed
    // into as few frames as the datagram budget allows.
    GossipPacker packer(GossipBudget());
    Announce(rounds, packer);
    uint64_t delta_bits = 0;
    for (auto& [key, words] : unions) {
      std::shared_ptr<const FilterState> state = DriverLookup(key.first);
      crdt::Canonicalize(words);
      const uint64_t universe = state->entry.params.shape.bits();
      for (size_t start = 0; start < words.size(); start += kMaxDeltaWords) {
        const size_t n = std::min(kMaxDeltaWords, words.size() - start);
        std::span<const crdt::WordBits> chunk(words.data() + start, n);
        wire::Delta delta;
        ToWire(state->entry.params, delta.mutable_filter());
        delta.set_epoch(key.second);
        delta.set_positions(EncodeWords(chunk, 0, universe));
        delta_bits += CountWordBits(chunk);
        packer.AddDelta(std::move(delta));
      }
    }
    if (!packer.empty()) {
      const std::vector<Address> peers = PickPeers(live, config.fanout);
      for (wire::Gossip& body : packer.Take()) {
        if (peers.empty()) break;
        wire::Envelope env;
        *env.mutable_gossip() = std::move(body);
        const std::string plain = Serialize(env);
        for (const Address& peer : peers) SendPlain(peer, plain, BodyIndex(env), false);
      }
      Stats([&](NodeCounters& s) { s.delta_bits_sent += delta_bits * peers.size(); });
    }
    if (!ae_queue.empty()) {
      const Address peer = ae_queue.front();
      ae_queue.pop_front();
      if (std::find(live.begin(), live.end(), peer) != live.end()) StartAntiEntropy(peer);
    }
  }

  // Bytes a Gossip body may take so that the sealed frame fits a datagram.
  size_t GossipBudget() const {
    const size_t header = 2 + 3 + config.name.size() + 3 + config.advertise.size() + 2 + 3;  // envelope fields
    const size_t overhead = header + FrameCodec::kOverhead;
    return config.max_datagram_bytes > overhead + 1 ? config.max_datagram_bytes - overhead : 1;
  }

  // Epoch and catalog announcements, each repeated for `rounds` rounds.
  void Announce(uint32_t rounds, GossipPacker& packer) {
    for (const std::string& name : announce_epochs) epoch_rounds[name] = rounds;
    for (const std::string& name : announce_catalog) catalog_rounds[name] = rounds;
    announce_epochs.clear();
    announce_catalog.clear();
    for (auto it = catalog_rounds.begin(); it != catalog_rounds.end();) {
      std::shared_ptr<const FilterState> state = DriverLookup(it->first);
      if (state != nullptr) {
        wire::CatalogEntry entry;
        ToWire(state->entry, state->set->epoch(), &entry);
        packer.AddCatalog(std::move(entry));
      }
      it = (state == nullptr || --it->second == 0) ? catalog_rounds.erase(it) : std::next(it);
    }
    for (auto it = epoch_rounds.begin(); it != epoch_rounds.end();) {
      std::shared_ptr<const FilterState> state = DriverLookup(it->first);
      if (state != nullptr) {
        wire::FilterEpoch fe;
        ToWire(state->entry.params, fe.mutable_filter());
        fe.set_epoch(state->set->epoch());
        packer.AddEpoch(std::move(fe));
      }
      it = (state == nullptr || --it->second == 0) ? epoch_rounds.erase(it) : std::next(it);
    }
  }

  void CheckRotations() {
    for (const auto& [name, state] : filters) {
      FilterClock& clock = clocks[name];
      if (!clock.epoch_began) clock.epoch_began = now;
      const FilterConfig& fc = state->entry.config;
      if (fc.rotate_fill <= 0 && fc.rotate_interval.count() <= 0) continue;
      const uint64_t epoch = state->set->epoch();
      RotationInput in;
      in.fill_ratio = static_cast<double>(clock.set_bits[epoch]) / static_cast<double>(state->entry.params.shape.bits());
      in.now = now;
      in.epoch_began = *clock.epoch_began;
      in.may_propose = fc.scope == Scope::kShared || OwnsDigest(*state);
      if (ShouldRotate(fc, in) && epoch < kMaxEpoch) LearnEpoch(name, epoch + 1);
    }
  }

  Time NextRotationDeadline() const {
    Time next = Time::max();
    for (const auto& [name, state] : filters) {
      const FilterConfig& fc = state->entry.config;
      if (fc.rotate_interval.count() <= 0) continue;
      if (fc.scope == Scope::kDigest && !OwnsDigest(*state)) continue;
      auto it = clocks.find(name);
      if (it == clocks.end() || !it->second.epoch_began) return now;
      next = std::min(next, *it->second.epoch_began + fc.rotate_interval);
    }
    return next;
  }

  // ---- anti-entropy ----
  void StartAntiEntropy(const Address& peer) {
    if (peer.empty() || peer == config.advertise) return;
    DrainPending();  // mark the words of client adds in the summary cache
    Stats([](NodeCounters& s) { ++s.anti_entropy_runs; });
    wire::Envelope env;
    wire::SyncRequest* req = env.mutable_sync_request();
    for (const auto& [name, state] : filters) ToWire(state->entry, state->set->epoch(), req->add_catalog());
    size_t bytes = 0;
    bool complete = true;
    for (const auto& [name, state] : filters) {
      if (bytes > kSyncChunkBytes) {
        complete = false;
        Send(peer, env, true);
        req->Clear();
        bytes = 0;
      }
      wire::FilterSummary* fs = req->add_filters();
      ToWire(state->entry.params, fs->mutable_filter());
      fs->set_epoch(state->set->epoch());
      for (uint64_t e : state->set->epochs()) {
        std::shared_ptr<const crdt::Generation> gen = state->set->Find(e);
        if (gen == nullptr) continue;
        Summarize(summary_cache.Get(state->uid, e, *gen->filter), state->entry.params.shape.blocks, e,
                  fs->add_generations());
        bytes += 16 + 8 * crdt::kWordsPerBlock;  // approximate header
        bytes += 8 * fs->generations(fs->generations_size() - 1).summaries_size();
      }
    }
    req->set_complete(complete);
    Send(peer, env, true);
  }

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
    void BeginGeneration(uint64_t epoch) {
      epoch_ = epoch;
      g_ = nullptr;
    }
    void AddWanted(uint64_t range) { Gen()->add_wanted(range); }
    // False once the round's byte budget is spent.
    bool AddRange(const crdt::BlockedFilter& filter, uint64_t range) {
      if (total_ >= kMaxSyncBytesPerRound) return false;
      wire::RangeData data;
      EncodeRange(filter, range, &data);
      if (data.positions().size() <= 1) return true;  // empty range (codec mode 0): nothing to send
      const size_t positions = BlocksPerRange(filter.shape().blocks) * crdt::kBlockBits;
      if (bytes_ + data.positions().size() > kSyncChunkBytes || positions_ + positions > kSendChunkPositions) Flush();
      bytes_ += data.positions().size() + 16;
      total_ += data.positions().size() + 16;
      positions_ += positions;
      *Gen()->add_data() = std::move(data);
      return true;
    }
    void Flush() {
      if (msg_.filters_size() > 0 || msg_.catalog_size() > 0) {
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
        g_->set_epoch(epoch_);
        g_->set_blocks_per_range(BlocksPerRange(state_->entry.params.shape.blocks));
      }
      return g_;
    }
    Impl* impl_;
    Address to_;
    bool reply_;
    wire::SyncRanges msg_;
    const FilterState* state_ = nullptr;
    uint64_t epoch_ = 0;
    wire::FilterRanges* f_ = nullptr;
    wire::GenerationRanges* g_ = nullptr;
    size_t bytes_ = 0, total_ = 0, positions_ = 0;
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

  void ApplyCatalog(const std::vector<std::pair<CatalogEntry, uint64_t>>& entries) {
    for (const auto& [entry, epoch] : entries) {
      if (entry.params.key_id != key_id) {
        RefuseMerge(entry.config.name, "catalog entry under another cluster secret");
        continue;
      }
      ApplyCatalogEntry(entry, epoch);
    }
  }

  struct DecodedSummary {
    crdt::FilterParams params;
    uint64_t epoch = 0;
    const wire::FilterSummary* wire = nullptr;
  };

  void HandleSyncRequest(const Address& from, const wire::SyncRequest& req) {
    std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
    std::vector<DecodedSummary> summaries;
    if (!DecodeCatalog(req.catalog(), &catalog) || static_cast<size_t>(req.filters_size()) > kMaxFilters) {
      Reject(from, "malformed");
      return;
    }
    for (const wire::FilterSummary& fs : req.filters()) {
      absl::StatusOr<crdt::FilterParams> params = FromWire(fs.filter());
      bool ok = params.ok() && fs.epoch() <= kMaxEpoch && fs.generations_size() <= static_cast<int>(crdt::kMaxGenerations);
      for (int i = 0; ok && i < fs.generations_size(); ++i) {
        ok = fs.generations(i).epoch() <= kMaxEpoch && ValidateSummary(fs.generations(i), params->shape).ok();
      }
      if (!ok) {
        Reject(from, "malformed");
        return;
      }
      summaries.push_back({*std::move(params), fs.epoch(), &fs});
    }
    // Validated: apply.
    DrainPending();  // mark the words of client adds in the summary cache
    ApplyCatalog(catalog);
    RangesWriter writer(this, from, true);
    writer.message().set_reply(true);
    for (const auto& [name, state] : filters) ToWire(state->entry, state->set->epoch(), writer.message().add_catalog());
    std::set<std::string> mentioned;
    for (const DecodedSummary& s : summaries) {
      mentioned.insert(s.params.name);
      std::shared_ptr<const FilterState> state = MatchFilter(s.params);
      if (state == nullptr) continue;
      LearnEpoch(s.params.name, s.epoch);
      writer.BeginFilter(*state);
      for (uint64_t e : state->set->epochs()) {
        std::shared_ptr<const crdt::Generation> gen = state->set->Find(e);
        if (gen == nullptr) continue;
        const wire::GenerationSummary* theirs = nullptr;
        for (const wire::GenerationSummary& g : s.wire->generations()) {
          if (g.epoch() == e) theirs = &g;
        }
        writer.BeginGeneration(e);
        if (theirs != nullptr) {
          std::vector<uint64_t> differing = DifferingRanges(summary_cache.Get(state->uid, e, *gen->filter), *theirs);
          for (uint64_t r : differing) writer.AddWanted(r);
          for (uint64_t r : differing) {
            if (!writer.AddRange(*gen->filter, r)) break;
          }
        } else {
          SendWholeGeneration(writer, *gen->filter);
        }
      }
    }
    if (req.complete()) {  // filters the requester does not have at all
      for (const auto& [name, state] : filters) {
        if (mentioned.count(name)) continue;
        writer.BeginFilter(*state);
        for (uint64_t e : state->set->epochs()) {
          std::shared_ptr<const crdt::Generation> gen = state->set->Find(e);
          if (gen == nullptr) continue;
          writer.BeginGeneration(e);
          SendWholeGeneration(writer, *gen->filter);
        }
      }
    }
    writer.Flush();
  }

  void SendWholeGeneration(RangesWriter& writer, const crdt::BlockedFilter& filter) {
    const uint64_t ranges = filter.RangeCount(BlocksPerRange(filter.shape().blocks));
    for (uint64_t r = 0; r < ranges; ++r) {
      if (!writer.AddRange(filter, r)) return;
    }
  }

  struct DecodedRanges {
    crdt::FilterParams params;
    uint64_t epoch = 0;
    const wire::FilterRanges* wire = nullptr;
    // Per generation, per data entry: the decoded words.
    std::vector<std::vector<std::vector<crdt::WordBits>>> words;
  };

  void HandleSyncRanges(const Address& from, const wire::SyncRanges& msg) {
    std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
    std::vector<DecodedRanges> decoded;
    if (!DecodeCatalog(msg.catalog(), &catalog) || static_cast<size_t>(msg.filters_size()) > kMaxFilters) {
      Reject(from, "malformed");
      return;
    }
    size_t budget = kMaxFramePositions;
    for (const wire::FilterRanges& fr : msg.filters()) {
      absl::StatusOr<crdt::FilterParams> params = FromWire(fr.filter());
      if (!params.ok() || fr.epoch() > kMaxEpoch || fr.generations_size() > static_cast<int>(crdt::kMaxGenerations)) {
        Reject(from, "malformed");
        return;
      }
      DecodedRanges d{*params, fr.epoch(), &fr, {}};
      const uint64_t bpr = BlocksPerRange(params->shape.blocks);
      const uint64_t ranges = (params->shape.blocks + bpr - 1) / bpr;
      for (const wire::GenerationRanges& g : fr.generations()) {
        bool ok = g.epoch() <= kMaxEpoch && g.blocks_per_range() == bpr &&
                  static_cast<uint64_t>(g.wanted_size()) <= ranges && static_cast<uint64_t>(g.data_size()) <= ranges;
        for (int i = 0; ok && i < g.wanted_size(); ++i) ok = g.wanted(i) < ranges;
        std::vector<std::vector<crdt::WordBits>> gen_words;
        for (int i = 0; ok && i < g.data_size(); ++i) {
          absl::StatusOr<std::vector<crdt::WordBits>> words = DecodeRange(g.data(i), params->shape);
          ok = words.ok() && CountWordBits(*words) <= budget;
          if (ok) {
            budget -= CountWordBits(*words);
            gen_words.push_back(*std::move(words));
          }
        }
        if (!ok) {
          Reject(from, "malformed");
          return;
        }
        d.words.push_back(std::move(gen_words));
      }
      decoded.push_back(std::move(d));
    }
    // Validated: apply.
    ApplyCatalog(catalog);
    RangesWriter writer(this, from, false);
    uint64_t repaired = 0;
    for (const DecodedRanges& d : decoded) {
      std::shared_ptr<const FilterState> state = MatchFilter(d.params);
      if (state == nullptr) continue;
      LearnEpoch(d.params.name, d.epoch);
      writer.BeginFilter(*state);
      for (int gi = 0; gi < d.wire->generations_size(); ++gi) {
        const wire::GenerationRanges& g = d.wire->generations(gi);
        std::shared_ptr<const crdt::Generation> gen = state->set->Find(g.epoch());
        if (gen == nullptr) continue;  // left our window, or not reached yet
        for (const std::vector<crdt::WordBits>& words : d.words[static_cast<size_t>(gi)]) {
          if (MergeWords(*state, g.epoch(), words) > 0) ++repaired;
        }
        if (msg.reply() && g.wanted_size() > 0) {
          writer.BeginGeneration(g.epoch());
          for (uint64_t r : g.wanted()) {
            if (!writer.AddRange(*gen->filter, r)) break;
          }
        }
      }
    }
    writer.Flush();
    if (repaired > 0) {
      Stats([&](NodeCounters& s) { s.ranges_repaired += repaired; });
      Emit(Event::Kind::kAntiEntropyRepaired, from, "", repaired);
    }
  }

  // ---- other message types ----
  // FromWire, with a shortcut for the common case: a reference equal to one of
  // our own filters' parameters is valid by construction (skips re-validating
  // it, which hashes the name).
  absl::StatusOr<crdt::FilterParams> ParamsFromWire(const wire::FilterRef& ref) const {
    auto it = filters.find(ref.name());
    if (it != filters.end()) {
      const crdt::FilterParams& p = it->second->entry.params;
      if (p.filter_id == ref.filter_id() && p.shape.blocks == ref.blocks() && p.shape.k == ref.k() &&
          p.generations == ref.generations() && p.hash_scheme == ref.hash_scheme() && p.key_id == ref.key_id()) {
        return p;
      }
    }
    return FromWire(ref);
  }

  struct DecodedDelta {
    crdt::FilterParams params;
    uint64_t epoch = 0;
    std::vector<crdt::WordBits> words;
  };
  // Validates one Delta without touching state; `budget` (decoded positions
  // left for this frame) shrinks by what it decodes. False if malformed.
  bool DecodeDelta(const wire::Delta& delta, size_t* budget, DecodedDelta* out) const {
    absl::StatusOr<crdt::FilterParams> params = ParamsFromWire(delta.filter());
    if (!params.ok() || delta.epoch() > kMaxEpoch) return false;
    const uint64_t universe = params->shape.bits();
    absl::StatusOr<std::vector<crdt::WordBits>> words =
        DecodeWords(delta.positions(), 0, universe, std::min<uint64_t>(universe, *budget));
    if (!words.ok()) return false;
    *budget -= CountWordBits(*words);
    out->params = *std::move(params);
    out->epoch = delta.epoch();
    out->words = *std::move(words);
    return true;
  }

  void ApplyDelta(const DecodedDelta& d) {
    std::shared_ptr<const FilterState> state = MatchFilter(d.params);
    if (state == nullptr) return;
    const uint64_t nbits = CountWordBits(d.words);
    Stats([&](NodeCounters& s) { s.delta_bits_received += nbits; });
    LearnEpoch(d.params.name, d.epoch);  // a delta for a newer epoch implies it
    if (state->set->Find(d.epoch) == nullptr) {
      Stats([](NodeCounters& s) { ++s.stale_deltas; });
      return;
    }
    MergeWords(*state, d.epoch, d.words);
  }

  void HandleDelta(const Address& from, const wire::Delta& delta) {
    size_t budget = kMaxFramePositions;
    DecodedDelta d;
    if (!DecodeDelta(delta, &budget, &d)) {
      Reject(from, "malformed");
      return;
    }
    ApplyDelta(d);
  }

  using DecodedEpochs = std::vector<std::pair<crdt::FilterParams, uint64_t>>;
  static bool DecodeEpochs(const google::protobuf::RepeatedPtrField<wire::FilterEpoch>& in, DecodedEpochs* out) {
    if (static_cast<size_t>(in.size()) > kMaxFilters) return false;
    for (const wire::FilterEpoch& fe : in) {
      absl::StatusOr<crdt::FilterParams> params = FromWire(fe.filter());
      if (!params.ok() || fe.epoch() > kMaxEpoch) return false;
      out->emplace_back(*std::move(params), fe.epoch());
    }
    return true;
  }

  void HandleEpochs(const Address& from, const wire::EpochAnnounce& msg) {
    DecodedEpochs decoded;
    if (!DecodeEpochs(msg.epochs(), &decoded)) {
      Reject(from, "malformed");
      return;
    }
    for (const auto& [params, epoch] : decoded) {
      if (MatchFilter(params) != nullptr) LearnEpoch(params.name, epoch);
    }
  }

  // Every part is validated before any is applied; then catalog, epochs, deltas.
  void HandleGossip(const Address& from, const wire::Gossip& g) {
    std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
    DecodedEpochs epochs;
    std::vector<DecodedDelta> decoded;
    bool ok = static_cast<size_t>(g.deltas_size()) <= kMaxGossipDeltas && DecodeCatalog(g.catalog(), &catalog) &&
              DecodeEpochs(g.epochs(), &epochs);
    size_t budget = kMaxFramePositions;
    decoded.resize(ok ? static_cast<size_t>(g.deltas_size()) : 0);
    for (size_t i = 0; ok && i < decoded.size(); ++i) ok = DecodeDelta(g.deltas(static_cast<int>(i)), &budget, &decoded[i]);
    if (!ok) {
      Reject(from, "malformed");
      return;
    }
    ApplyCatalog(catalog);
    for (const auto& [params, epoch] : epochs) {
      if (MatchFilter(params) != nullptr) LearnEpoch(params.name, epoch);
    }
    for (const DecodedDelta& d : decoded) ApplyDelta(d);
  }

  void HandleCatalog(const Address& from, const wire::CatalogUpdate& msg) {
    std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
    if (!DecodeCatalog(msg.entries(), &catalog)) {
      Reject(from, "malformed");
      return;
    }
    ApplyCatalog(catalog);
  }

  void HandleFrame(const Address& from, std::string_view bytes, Time t, Channel channel) {
    now = t;
    Stats([&](NodeCounters& s) {
      ++s.frames_in;
      s.bytes_in += bytes.size();
    });
    const size_t max = channel == Channel::kDatagram ? config.max_datagram_bytes : protocol::kMaxFrameBytes;
    auto opened = codec.Open(bytes, max);
    if (auto* rejection = std::get_if<FrameCodec::Rejection>(&opened)) {
      Reject(from, rejection->reason);
      return;
    }
    const wire::Envelope& env = *std::get<const wire::Envelope*>(opened);
    const uint64_t rejects_before = frame_rejects;
    {
      std::lock_guard lock(stats_mu);
      bytes_in_type[BodyIndex(env)] += bytes.size();
    }
    // Replies go to where the sender listens (a stream's source port is not it).
    const Address reply_to = (!env.sender_address().empty() && env.sender_address().size() <= Membership::kMaxAddressBytes)
                                 ? env.sender_address()
                                 : from;
    switch (env.body_case()) {
      case wire::Envelope::kMembership:
        if (started) {
          membership->Handle(reply_to, env.membership(), now);
          PumpMembership();
          CopyMembershipRejections();
        }
        break;
      case wire::Envelope::kCatalog: HandleCatalog(reply_to, env.catalog()); break;
      case wire::Envelope::kDelta: HandleDelta(reply_to, env.delta()); break;
      case wire::Envelope::kEpochs: HandleEpochs(reply_to, env.epochs()); break;
      case wire::Envelope::kSyncRequest: HandleSyncRequest(reply_to, env.sync_request()); break;
      case wire::Envelope::kSyncRanges: HandleSyncRanges(reply_to, env.sync_ranges()); break;
      case wire::Envelope::kGossip: HandleGossip(reply_to, env.gossip()); break;
      default: Reject(from, "malformed"); break;
    }
    if (env.body_case() == wire::Envelope::kDelta || env.body_case() == wire::Envelope::kSyncRequest ||
        env.body_case() == wire::Envelope::kSyncRanges ||
        (env.body_case() == wire::Envelope::kGossip && env.gossip().deltas_size() > 0)) {
      if (frame_rejects == rejects_before) NoteData(env.sender_name());
    }
  }

  // Valid replication data arrived from `sender`: remember when, for known
  // members only; bounded by the membership table (stale names swept).
  void NoteData(const std::string& sender) {
    if (!started || sender == config.name || !membership->Knows(sender)) return;
    if (last_data.size() >= membership->config().max_members && !last_data.count(sender)) {
      for (auto it = last_data.begin(); it != last_data.end();) {  // order-free: erases every stale name
        auto next = std::next(it);
        if (!membership->Knows(it->first)) last_data.erase(it);
        it = next;
      }
      if (last_data.size() >= membership->config().max_members) return;
    }
    last_data[sender] = now;
  }

  // The sizing estimates cost a model evaluation per bisection step; pollers
  // (metrics, simulator checkers) mostly ask again for unchanged fills, so
  // they are memoized by (shape, set bits). Bounded; any thread.
  std::pair<double, double> Estimates(crdt::FilterShape shape, uint64_t set_bits) const {
    const std::tuple<uint64_t, uint32_t, uint64_t> key(shape.blocks, shape.k, set_bits);
    {
      std::lock_guard lock(estimates_mu);
      auto it = estimates.find(key);
      if (it != estimates.end()) return it->second;
    }
    const std::pair<double, double> value(crdt::EstimateCardinality(shape, set_bits), crdt::EstimateFpr(shape, set_bits));
    std::lock_guard lock(estimates_mu);
    if (estimates.size() >= 4096) estimates.clear();
    estimates[key] = value;
    return value;
  }

  // Bit count and digest of one generation; rescanned only when the filter's
  // change counter moved since the last scan. The counter is read before the
  // scan: a change racing with it bumps the counter after, forcing a rescan.
  ScanResult Scan(const FilterState& state, uint64_t epoch, const crdt::BlockedFilter& filter) const {
    const std::pair<uint64_t, uint64_t> key(state.uid, epoch);
    const uint64_t changes = state.changes->load(std::memory_order_acquire);
    {
      std::lock_guard lock(scans_mu);
      auto it = scans.find(key);
      if (it != scans.end() && it->second.changes == changes) return it->second;
    }
    const ScanResult scan{changes, filter.CountSetBits(), GenerationDigest(filter)};
    std::lock_guard lock(scans_mu);
    if (scans.size() >= 4096) scans.clear();
    scans[key] = scan;
    return scan;
  }

  FilterInfo InfoOf(const FilterState& state) const {
    FilterInfo info;
    info.config = state.entry.config;
    info.blocks = state.entry.params.shape.blocks;
    info.k = state.entry.params.shape.k;
    info.epoch = state.set->epoch();
    for (uint64_t e : state.set->epochs()) {
      std::shared_ptr<const crdt::Generation> gen = state.set->Find(e);
      if (gen == nullptr) continue;
      GenerationInfo g;
      g.epoch = e;
      const ScanResult scan = Scan(state, e, *gen->filter);
      g.set_bits = scan.set_bits;
      g.digest = scan.digest;
      g.fill_ratio = static_cast<double>(g.set_bits) / static_cast<double>(state.entry.params.shape.bits());
      std::tie(g.estimated_items, g.estimated_fpr) = Estimates(state.entry.params.shape, g.set_bits);
      info.memory_bytes += state.entry.params.shape.bytes();
      info.generations.push_back(g);
    }
    return info;
  }
};

// ---------------------------------------------------------------------------

Node::Node() = default;
Node::~Node() = default;

absl::StatusOr<std::unique_ptr<Node>> Node::Create(NodeConfig config) {
  if (absl::Status s = ValidateNodeConfig(config); !s.ok()) return s;
  crdt::EnsureSodiumInitialized();
  std::unique_ptr<Node> node(new Node());
  node->impl_ = std::make_unique<Impl>(std::move(config));
  Impl& impl = *node->impl_;
  impl.key_id = crdt::KeyIdForSecret(impl.config.secret);
  MembershipConfig mc;
  mc.self_name = impl.config.name;
  mc.self_address = impl.config.advertise;
  mc.seeds = impl.config.seeds;
  if (mc.seeds.size() > Membership::kMaxSeeds) mc.seeds.resize(Membership::kMaxSeeds);
  mc.probe_interval = impl.config.probe_interval;
  mc.probe_timeout = impl.config.probe_timeout;
  mc.indirect_probes = impl.config.indirect_probes;
  mc.suspicion_multiplier = impl.config.suspicion_multiplier;
  mc.dead_reconnect_interval = impl.config.dead_reconnect_interval;
  mc.gossip_interval = impl.config.gossip_interval;
  mc.gossip_fanout = impl.config.fanout;
  impl.membership = std::make_unique<Membership>(mc, impl.rng.Next());
  for (const FilterConfig& fc : impl.config.filters) {
    absl::StatusOr<CatalogEntry> entry = MakeCatalogEntry(fc, impl.config.secret, 0, "");
    if (!entry.ok()) return absl::InvalidArgumentError(absl::StrCat("filter '", fc.name, "': ", entry.status().message()));
    absl::StatusOr<std::shared_ptr<const FilterState>> state = impl.NewState(*entry, 0);
    if (!state.ok()) return state.status();
    impl.Install(*std::move(state), false);
  }
  impl.announce_catalog.clear();  // config filters: every node has them already
  impl.PumpMembership(true);
  return node;
}

void Node::Start(Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  if (impl.started) return;
  impl.started = true;
  for (auto& [name, clock] : impl.clocks) clock.epoch_began = now;
  impl.membership->Start(now);
  impl.next_gossip = now + impl.config.gossip_interval;
  // Stagger the first anti-entropy round so a cluster started at once spreads out.
  impl.next_anti_entropy =
      now + Duration(static_cast<int64_t>(impl.rng.Below(static_cast<uint64_t>(impl.config.anti_entropy_interval.count())) + 1));
  impl.PumpMembership(true);
}

void Node::Leave(Time now) {
  impl_->now = now;
  impl_->membership->Leave(now);
  impl_->PumpMembership(true);
}

void Node::HandleDatagram(const Address& from, std::string_view bytes, Time now) {
  impl_->HandleFrame(from, bytes, now, Channel::kDatagram);
}

void Node::HandleStreamFrame(const Address& from, std::string_view bytes, Time now) {
  impl_->HandleFrame(from, bytes, now, Channel::kStream);
}

void Node::Tick(Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  if (!impl.started) return;
  impl.membership->Tick(now);
  impl.PumpMembership();
  impl.DrainPending();
  impl.CheckRotations();
  if (now >= impl.next_gossip) {
    impl.GossipRound();
    impl.next_gossip = now + impl.config.gossip_interval;
  }
  if (now >= impl.next_anti_entropy) {
    std::vector<Address> peers = impl.PickPeers(1);
    if (!peers.empty() && !impl.membership->left()) impl.StartAntiEntropy(peers[0]);
    impl.next_anti_entropy = now + impl.config.anti_entropy_interval;
  }
}

Time Node::NextWakeup() const {
  const Impl& impl = *impl_;
  if (!impl.started) return Time::max();
  Time next = std::min({impl.membership->NextWakeup(), impl.next_gossip, impl.next_anti_entropy});
  return std::min(next, impl.NextRotationDeadline());
}

std::vector<Outgoing> Node::TakeOutgoing() {
  std::vector<Outgoing> out;
  out.swap(impl_->out);
  return out;
}

std::vector<Event> Node::TakeEvents() {
  std::vector<Event> events;
  events.swap(impl_->events);
  return events;
}

absl::Status Node::Reserve(const FilterConfig& filter, Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  if (absl::Status s = ValidateFilterConfig(filter); !s.ok()) return s;
  if (impl.DriverLookup(filter.name) != nullptr) return absl::AlreadyExistsError("ERR item exists");
  if (impl.filters.size() >= kMaxFilters) return absl::ResourceExhaustedError("ERR too many filters");
  absl::StatusOr<CatalogEntry> entry =
      MakeCatalogEntry(filter, impl.config.secret, static_cast<uint64_t>(std::max<int64_t>(0, now.count())), impl.config.name);
  if (!entry.ok()) return entry.status();
  absl::StatusOr<std::shared_ptr<const FilterState>> state = impl.NewState(*entry, 0);
  if (!state.ok()) return state.status();
  impl.Install(*std::move(state), false);
  impl.Emit(Event::Kind::kFilterCreated, filter.name, impl.config.name);
  return absl::OkStatus();
}

absl::Status Node::Rotate(std::string_view filter, Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  std::shared_ptr<const FilterState> state = impl.DriverLookup(std::string(filter));
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  const uint64_t epoch = state->set->epoch();
  if (epoch >= kMaxEpoch) return absl::OutOfRangeError("ERR epoch limit reached");
  impl.LearnEpoch(state->entry.config.name, epoch + 1);
  return absl::OkStatus();
}

absl::StatusOr<bool> Node::Add(std::string_view filter, std::string_view key) {
  absl::StatusOr<std::vector<bool>> r = AddMany(filter, std::span<const std::string_view>(&key, 1));
  if (!r.ok()) return r.status();
  return (*r)[0];
}

absl::StatusOr<std::vector<bool>> Node::AddMany(std::string_view filter, std::span<const std::string_view> keys) {
  Impl& impl = *impl_;
  std::shared_ptr<const FilterState> state = impl.Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  if (state->entry.config.scope == Scope::kDigest && state->entry.config.owner != impl.config.name) {
    return absl::FailedPreconditionError(
        absl::StrCat("ERR digest filter '", state->entry.config.name, "' is written only by its owner '",
                     state->entry.config.owner, "'"));
  }
  std::vector<crdt::KeyAdd> adds(keys.size());
  state->set->AddMany(keys, adds);
  std::vector<bool> was_new(keys.size());
  // Group by epoch (a rotation can land between batches inside AddMany).
  std::vector<crdt::AddResult> run;
  uint64_t run_epoch = 0;
  for (size_t i = 0; i < adds.size(); ++i) {
    was_new[i] = adds[i].was_new;
    if (!adds[i].was_new) continue;
    if (!run.empty() && adds[i].epoch != run_epoch) {
      impl.pending.Push(state->uid, run_epoch, run);
      run.clear();
    }
    run_epoch = adds[i].epoch;
    run.push_back(adds[i].bits);
  }
  if (!run.empty()) impl.pending.Push(state->uid, run_epoch, run);
  if (std::find(was_new.begin(), was_new.end(), true) != was_new.end()) {
    state->changes->fetch_add(1, std::memory_order_release);
  }
  impl.adds.fetch_add(keys.size(), std::memory_order_relaxed);
  return was_new;
}

// The single-key form skips ExistsMany's batch buffers (the simulator's
// checkers call it for every acknowledged key on every node).
absl::StatusOr<bool> Node::Exists(std::string_view filter, std::string_view key) const {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  const bool found = state->set->MightContain(key);
  impl_->queries.fetch_add(1, std::memory_order_relaxed);
  if (found) impl_->hits.fetch_add(1, std::memory_order_relaxed);
  return found;
}

absl::StatusOr<std::vector<bool>> Node::ExistsMany(std::string_view filter, std::span<const std::string_view> keys) const {
  const Impl& impl = *impl_;
  std::shared_ptr<const FilterState> state = impl.Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  state->set->MightContainMany(keys, std::span<bool>(found.get(), keys.size()));
  std::vector<bool> out(found.get(), found.get() + keys.size());
  const uint64_t hits = static_cast<uint64_t>(std::count(out.begin(), out.end(), true));
  impl_->queries.fetch_add(keys.size(), std::memory_order_relaxed);
  impl_->hits.fetch_add(hits, std::memory_order_relaxed);
  return out;
}

std::vector<std::string> Node::WhoHas(std::span<const std::string> digests, std::string_view key) const {
  std::vector<std::shared_ptr<const FilterState>> candidates;
  {
    std::shared_lock lock(impl_->filters_mu);
    for (const auto& [name, state] : impl_->filters) {
      if (state->entry.config.scope != Scope::kDigest) continue;
      if (!digests.empty() && std::find(digests.begin(), digests.end(), name) == digests.end()) continue;
      candidates.push_back(state);
    }
  }
  std::vector<std::string> owners;
  for (const auto& state : candidates) {
    if (state->set->MightContain(key)) owners.push_back(state->entry.config.owner);
  }
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  impl_->queries.fetch_add(1, std::memory_order_relaxed);
  return owners;
}

absl::StatusOr<FilterInfo> Node::Info(std::string_view filter) const {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  return impl_->InfoOf(*state);
}

std::vector<FilterInfo> Node::Filters() const {
  std::vector<std::shared_ptr<const FilterState>> states;
  {
    std::shared_lock lock(impl_->filters_mu);
    for (const auto& [name, state] : impl_->filters) states.push_back(state);
  }
  std::vector<FilterInfo> out;
  for (const auto& state : states) out.push_back(impl_->InfoOf(*state));
  return out;
}

std::vector<MemberInfo> Node::Members() const {
  impl_->members_requested.store(true, std::memory_order_relaxed);
  std::lock_guard lock(impl_->members_mu);
  return impl_->members_cache;
}

std::vector<PeerStats> Node::Peers(Time now) const {
  std::vector<PeerStats> out;
  if (impl_->membership == nullptr) return out;
  for (const MemberInfo& m : impl_->membership->Members()) {
    if (m.name == impl_->config.name) continue;
    PeerStats p{m.name, m.address, m.state, m.probe_rtt, std::nullopt};
    auto it = impl_->last_data.find(m.name);
    if (it != impl_->last_data.end()) p.since_data = now >= it->second ? now - it->second : Duration{0};
    out.push_back(std::move(p));
  }
  return out;
}

NodeCounters Node::Counters() const {
  NodeCounters c;
  {
    std::lock_guard lock(impl_->stats_mu);
    c = impl_->stats;
    AddTypeCounts(impl_->bytes_out_type, &c.bytes_out_by_type);
    AddTypeCounts(impl_->frames_out_type, &c.frames_out_by_type);
    AddTypeCounts(impl_->bytes_in_type, &c.bytes_in_by_type);
  }
  c.adds = impl_->adds.load(std::memory_order_relaxed);
  c.queries = impl_->queries.load(std::memory_order_relaxed);
  c.hits = impl_->hits.load(std::memory_order_relaxed);
  return c;
}

const std::string& Node::name() const { return impl_->config.name; }

std::map<std::string, std::string> Node::ExportSnapshots() const {
  std::map<std::string, std::string> out;
  for (const auto& [name, state] : impl_->filters) {
    wire::CatalogEntry entry;
    ToWire(state->entry, state->set->epoch(), &entry);
    const std::string catalog = entry.SerializeAsString();
    std::string bytes(kSnapshotMagic, 8);
    const uint32_t len = static_cast<uint32_t>(catalog.size());
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    bytes += catalog;
    bytes += crdt::EncodeSnapshot(*state->set);
    out[name] = std::move(bytes);
  }
  return out;
}

absl::Status Node::ImportSnapshot(std::string_view bytes) {
  Impl& impl = *impl_;
  if (bytes.size() < 12 || bytes.substr(0, 8) != std::string_view(kSnapshotMagic, 8)) {
    return absl::InvalidArgumentError("ERR snapshot: bad magic or truncated");
  }
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  if (len > bytes.size() - 12) return absl::InvalidArgumentError("ERR snapshot: truncated catalog entry");
  wire::CatalogEntry wentry;
  if (!wentry.ParseFromArray(bytes.data() + 12, static_cast<int>(len))) {
    return absl::InvalidArgumentError("ERR snapshot: catalog entry does not parse");
  }
  absl::StatusOr<CatalogEntry> entry = FromWire(wentry);
  if (!entry.ok()) return absl::InvalidArgumentError(absl::StrCat("ERR snapshot: ", entry.status().message()));
  if (entry->params.key_id != impl.key_id) return absl::InvalidArgumentError("ERR snapshot: other cluster secret");
  absl::StatusOr<std::unique_ptr<crdt::GenerationSet>> set =
      crdt::DecodeSnapshot(bytes.substr(12 + len), impl.config.secret, &entry->params);
  if (!set.ok()) return set.status();
  std::shared_ptr<const FilterState> local = impl.DriverLookup(entry->config.name);
  if (local == nullptr || (!(local->entry.params == entry->params) && Precedes(*entry, local->entry))) {
    if (local == nullptr && impl.filters.size() >= kMaxFilters) return absl::ResourceExhaustedError("ERR too many filters");
    auto state = std::make_shared<FilterState>();
    state->uid = impl.next_uid++;
    state->entry = *entry;
    state->set = std::shared_ptr<crdt::GenerationSet>(std::move(*set));
    impl.Install(std::move(state), true);
    if (local != nullptr) impl.Emit(Event::Kind::kFilterDiscarded, entry->config.name, "replaced by snapshot");
    return absl::OkStatus();
  }
  if (!(local->entry.params == entry->params)) {
    return absl::FailedPreconditionError("ERR snapshot: filter exists with other parameters");
  }
  // Same filter: move to the snapshot's epoch and OR its generations in.
  impl.LearnEpoch(entry->config.name, (*set)->epoch());
  for (uint64_t e : (*set)->epochs()) {
    std::shared_ptr<const crdt::Generation> gen = (*set)->Find(e);
    if (gen == nullptr || local->set->Find(e) == nullptr) continue;
    std::vector<crdt::WordBits> words = gen->filter->ExportBlocks(0, gen->filter->shape().blocks);
    impl.MergeWords(*local, e, words);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Node::ExportCatalogEntry(std::string_view filter) const {
  std::shared_ptr<const FilterState> state = impl_->DriverLookup(std::string(filter));
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  wire::CatalogEntry entry;
  ToWire(state->entry, state->set->epoch(), &entry);
  return entry.SerializeAsString();
}

absl::Status Node::ImportCatalogEntry(std::string_view bytes, Time now) {
  Impl& impl = *impl_;
  constexpr size_t kMaxEntryBytes = 64u << 10;
  wire::CatalogEntry w;
  if (bytes.empty() || bytes.size() > kMaxEntryBytes || !w.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("ERR catalog entry: does not parse");
  }
  absl::StatusOr<CatalogEntry> entry = FromWire(w);
  if (!entry.ok()) return absl::InvalidArgumentError(absl::StrCat("ERR catalog entry: ", entry.status().message()));
  if (w.epoch() > kMaxEpoch) return absl::InvalidArgumentError("ERR catalog entry: epoch out of range");
  if (entry->params.key_id != impl.key_id) return absl::InvalidArgumentError("ERR catalog entry: other cluster secret");
  impl.now = now;
  impl.ApplyCatalogEntry(*entry, w.epoch());
  if (impl.DriverLookup(entry->config.name) == nullptr) return absl::ResourceExhaustedError("ERR catalog entry refused");
  return absl::OkStatus();
}

absl::Status Node::KeyringInstall(std::string_view key) {
  if (key.size() != 32) return absl::InvalidArgumentError("ERR key must be 32 bytes");
  protocol::GossipKey k;
  std::memcpy(k.data(), key.data(), 32);
  absl::StatusOr<uint64_t> id = impl_->codec.keyring().Install(k);
  return id.status();
}

absl::Status Node::KeyringUse(uint64_t key_id) { return impl_->codec.keyring().Use(key_id); }
absl::Status Node::KeyringRemove(uint64_t key_id) { return impl_->codec.keyring().Remove(key_id); }
std::vector<uint64_t> Node::KeyringList() const { return impl_->codec.keyring().ids(); }

}  // namespace pollen::node
