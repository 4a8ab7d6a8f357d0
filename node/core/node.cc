// Node: glue between membership, catalog, dissemination, anti-entropy and
// epochs. See node.h for the contract and the helper headers for each piece.
//
// Concurrency: `filters` (name -> FilterState) belongs to the driver thread;
// client threads look filters up in an immutable published copy, inside a
// crdt::GracePeriod section (no lock; Publish frees a replaced copy once no
// lookup can hold it). A FilterState's entry and set pointer are immutable
// once published; the set itself is lock-free (crdt::GenerationSet). Client
// adds that set new bits hand them to the driver through PendingAdds (a
// vector behind a mutex held only for the copy: dissemination.h says why), the
// one lock on the client path. Counters live under `stats_mu_`; the client
// counters are atomics. Everything else is driver-thread only.
#include "node/core/node_impl.h"

#include "crdt/snapshot_delta.h"

#include <algorithm>
#include <mutex>

namespace pollen::node {

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
  mc.lifeguard = impl.config.lifeguard;
  mc.reliable_fallback_ping = impl.config.reliable_fallback_ping;
  mc.names = impl.config.member_names;
  mc.addresses = impl.config.member_addresses;
  mc.warm_members = std::move(impl.config.warm_members);
  mc.dead_reconnect_interval = impl.config.dead_reconnect_interval;
  mc.gossip_interval = impl.config.gossip_interval;
  mc.gossip_fanout = impl.config.fanout;
  mc.max_piggyback_bytes = impl.GossipBudget();  // a membership message fits one datagram
  mc.features = impl.config.compact_membership ? kMemberFeatureCompactFrames : 0;
  impl.membership = std::make_unique<Membership>(mc, impl.rng.Next());
  if (impl.config.dissemination == NodeConfig::Dissemination::kTree) {
    BroadcastTree::Config tc;
    tc.degree = impl.config.tree_degree;
    tc.max_degree = 2 * impl.config.tree_degree;
    impl.tree = std::make_unique<BroadcastTree>(impl.config.name, tc);
    impl.delivery = std::make_unique<PushDelivery>(PushDelivery::Config{}, impl.rng.Next());
    impl.pacing = std::make_unique<PushPacing>(impl.config.tree_push_gap);
  }
  for (const FilterConfig& fc : impl.config.filters) {
    absl::StatusOr<CatalogEntry> entry = MakeCatalogEntry(fc, impl.config.secret, 0, "");
    if (!entry.ok()) return absl::InvalidArgumentError(absl::StrCat("filter '", fc.name, "': ", entry.status().message()));
    if (absl::Status budget = impl.CheckBudget(*entry, nullptr); !budget.ok()) {
      std::string why(budget.message());
      if (why.rfind("ERR ", 0) == 0) why.erase(0, 4);
      return absl::ResourceExhaustedError(absl::StrCat("filter '", fc.name, "': ", why));
    }
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
  impl.CopyMembershipStats();
  impl.ExpireRoutes();
  impl.ServiceChecks();
  impl.DrainPending();
  impl.CheckRotations();
  if (impl.tree != nullptr && now >= impl.next_push) impl.TreePush();
  if (impl.delivery != nullptr && now >= impl.delivery->NextWakeup()) impl.ServiceDelivery();
  if (now >= impl.next_gossip) {
    impl.CheckGrowth();  // once a round: an estimate per changed filter
    impl.CheckAntiEntropyWait();
    if (impl.BulkQuiet()) impl.ReleaseSyncScratch();
    impl.RefreshSummaries();
    impl.GossipRound();
    impl.next_gossip = now + impl.config.gossip_interval;
  }
  impl.ServeWaitingBulk();
  if (now >= impl.next_anti_entropy && now < impl.ae_busy_until) {
    impl.next_anti_entropy = impl.ae_busy_until;  // in an exchange already: this run waits for its end
  } else if (now >= impl.next_anti_entropy) {
    std::vector<Address> peers = impl.PickPeers(1);
    impl.bulk_requested_early.clear();
    if (!peers.empty() && !impl.membership->left()) impl.StartAntiEntropy(peers[0]);
    impl.next_anti_entropy = now + impl.NextAntiEntropyWait();
  }
}

Time Node::NextWakeup() const {
  const Impl& impl = *impl_;
  if (!impl.started) return Time::max();
  Time next = std::min({impl.membership->NextWakeup(), impl.next_gossip, impl.next_anti_entropy, impl.next_push});
  if (impl.delivery != nullptr) next = std::min(next, std::max(impl.now, impl.delivery->NextWakeup()));
  return std::min({next, impl.NextRotationDeadline(), impl.NextRouteDeadline(),
                   impl.NextCheckWakeup(), impl.NextBulkWakeup()});
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
  const uint64_t stamp = impl.FreshStamp(filter.name);
  absl::StatusOr<CatalogEntry> entry = MakeCatalogEntry(filter, impl.config.secret, stamp, impl.config.name);
  if (!entry.ok()) return entry.status();
  if (impl.IsDeleted(*entry)) return absl::FailedPreconditionError("ERR filter name deleted for good (tombstone at the last stamp)");
  if (absl::Status budget = impl.CheckBudget(*entry, nullptr); !budget.ok()) return budget;
  impl.Unrefuse(filter.name);
  absl::StatusOr<std::shared_ptr<const FilterState>> state = impl.NewState(*entry, 0);
  if (!state.ok()) return state.status();
  impl.Install(*std::move(state), false);
  impl.Emit(Event::Kind::kFilterCreated, filter.name, impl.config.name);
  impl.ReleaseHeld(filter.name);  // a peer's first bits under the same name and parameters
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
  std::vector<bool> full;
  absl::StatusOr<std::vector<bool>> r = AddMany(filter, std::span<const std::string_view>(&key, 1), &full);
  if (!r.ok()) return r.status();
  if (full[0]) return absl::ResourceExhaustedError(kFilterFullError);
  return (*r)[0];
}

absl::StatusOr<std::vector<bool>> Node::AddMany(std::string_view filter, std::span<const std::string_view> keys,
                                                std::vector<bool>* full) {
  Impl& impl = *impl_;
  std::shared_ptr<const FilterState> state = impl.Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  if (absl::Status s = impl.CheckWritable(*state); !s.ok()) return s;
  std::vector<bool> was_new = impl.AddLocal(*state, keys, full);
  impl.adds.fetch_add(keys.size(), std::memory_order_relaxed);
  return was_new;
}

absl::Status Node::Impl::CheckWritable(const FilterState& state) const {
  if (state.entry.config.scope == Scope::kDigest && state.entry.config.owner != config.name) {
    return absl::FailedPreconditionError(absl::StrCat("ERR digest filter '", state.entry.config.name,
                                                      "' is written only by its owner '", state.entry.config.owner, "'"));
  }
  return absl::OkStatus();
}

std::vector<bool> Node::Impl::AddLocal(const FilterState& state, std::span<const std::string_view> keys,
                                       std::vector<bool>* full) {
  if (full != nullptr) full->assign(keys.size(), false);
  std::vector<crdt::KeyAdd> adds(keys.size());
  const FilterConfig& fc = state.entry.config;
  // A fixed-size filter that does not rotate by fill refuses new keys once
  // its newest generation holds its capacity (RedisBloom's NONSCALING). Near
  // the limit keys go one by one, as RedisBloom adds them.
  const bool limited = !state.entry.params.scaling() && fc.rotate_fill <= 0;
  if (limited && state.set->NewestSub()->items.load(std::memory_order_relaxed) + keys.size() > fc.capacity) {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (state.set->NewestSub()->items.load(std::memory_order_relaxed) >= fc.capacity) {
        adds[i] = crdt::KeyAdd{};
        if (full != nullptr && !state.set->MightContain(keys[i])) (*full)[i] = true;
        continue;
      }
      adds[i] = state.set->Add(keys[i]);
    }
  } else {
    state.set->AddMany(keys, adds);
  }
  std::vector<bool> was_new(keys.size());
  // Group by sub-filter (a rotation or a growth can land inside AddMany).
  std::vector<crdt::AddResult> run;
  uint64_t run_slot = 0;
  for (size_t i = 0; i < adds.size(); ++i) {
    was_new[i] = adds[i].was_new;
    if (!adds[i].was_new) continue;
    if (!run.empty() && adds[i].slot != run_slot) {
      pending.Push(state.uid, run_slot, run);
      run.clear();
    }
    run_slot = adds[i].slot;
    run.push_back(adds[i].bits);
  }
  if (!run.empty()) pending.Push(state.uid, run_slot, run);
  if (std::find(was_new.begin(), was_new.end(), true) != was_new.end()) {
    state.changes->fetch_add(1, std::memory_order_release);
  }
  return was_new;
}

// The single-key form skips ExistsMany's batch buffers (the simulator's
// checkers call it for every acknowledged key on every node).
absl::StatusOr<bool> Node::Exists(std::string_view filter, std::string_view key) const {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return impl_->Missing(filter);
  const bool found = state->set->MightContain(key);
  impl_->queries.fetch_add(1, std::memory_order_relaxed);
  state->tallies->queries.fetch_add(1, std::memory_order_relaxed);
  if (found) {
    impl_->hits.fetch_add(1, std::memory_order_relaxed);
    state->tallies->answered_present.fetch_add(1, std::memory_order_relaxed);
  }
  return found;
}

absl::StatusOr<std::vector<bool>> Node::ExistsMany(std::string_view filter, std::span<const std::string_view> keys) const {
  const Impl& impl = *impl_;
  std::shared_ptr<const FilterState> state = impl.Lookup(filter);
  if (state == nullptr) return impl.Missing(filter);
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  state->set->MightContainMany(keys, std::span<bool>(found.get(), keys.size()));
  std::vector<bool> out(found.get(), found.get() + keys.size());
  const uint64_t hits = static_cast<uint64_t>(std::count(out.begin(), out.end(), true));
  impl_->queries.fetch_add(keys.size(), std::memory_order_relaxed);
  impl_->hits.fetch_add(hits, std::memory_order_relaxed);
  state->tallies->queries.fetch_add(keys.size(), std::memory_order_relaxed);
  state->tallies->answered_present.fetch_add(hits, std::memory_order_relaxed);
  return out;
}

absl::StatusOr<uint64_t> Node::ReportFalsePositives(std::string_view filter, uint64_t count) {
  if (count < 1 || count > kMaxFalsePositiveReport) {
    return absl::InvalidArgumentError(absl::StrCat("ERR count must be 1 to ", kMaxFalsePositiveReport));
  }
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  return state->tallies->false_positives.fetch_add(count, std::memory_order_relaxed) + count;
}

std::vector<std::string> Node::WhoHas(std::span<const std::string> digests, std::string_view key) const {
  std::vector<std::shared_ptr<const FilterState>> candidates;
  for (std::shared_ptr<const FilterState>& state : impl_->PublishedStates()) {
    const std::string& name = state->entry.config.name;
    if (state->entry.config.scope != Scope::kDigest) continue;
    if (!digests.empty() && std::find(digests.begin(), digests.end(), name) == digests.end()) continue;
    candidates.push_back(std::move(state));
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

absl::StatusOr<FilterInfo> Node::Info(std::string_view filter, InfoParts parts) const {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  return impl_->InfoOf(*state, parts);
}

std::optional<FilterVersion> Node::Version(std::string_view filter) const {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return std::nullopt;
  return FilterVersion{state->uid, state->set->epoch(), state->changes->load(std::memory_order_acquire)};
}

std::vector<std::string> Node::FilterNames() const {
  std::vector<std::string> out;
  for (const auto& state : impl_->PublishedStates()) out.push_back(state->entry.config.name);
  return out;
}

std::vector<FilterInfo> Node::Filters(InfoParts parts) const {
  std::vector<FilterInfo> out;
  for (const auto& state : impl_->PublishedStates()) out.push_back(impl_->InfoOf(*state, parts));
  return out;
}

size_t Node::LiveMemberCount() const { return impl_->membership->LiveCount(); }

std::vector<MemberInfo> Node::Members() const {
  impl_->members_requested.store(true, std::memory_order_relaxed);
  impl_->members_ever_read.store(true, std::memory_order_relaxed);
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
    out[name] = crdt::EncodeSnapshot(*state->set, SnapshotValue(entry.SerializeAsString(), {}));
  }
  return out;
}

std::vector<Node::RefusedFilter> Node::RefusedFilters() const {
  std::vector<RefusedFilter> out;
  for (const auto& [name, refusal] : impl_->refused) {
    if (!impl_->IsDeleted(refusal.entry) && impl_->DriverLookup(name) == nullptr) out.push_back(refusal.info);
  }
  return out;
}

uint64_t Node::HeldFilterBytes() const { return impl_->HeldBytes(nullptr); }

std::vector<Node::SnapshotSource> Node::SnapshotSources() const {
  std::vector<SnapshotSource> out;
  for (const auto& [name, state] : impl_->filters) {
    wire::CatalogEntry entry;
    ToWire(state->entry, state->set->epoch(), &entry);
    SnapshotSource& source = out.emplace_back();
    source.name = name;
    source.prefix = SnapshotValue(entry.SerializeAsString(), {});
    source.set = state->set;
    for (uint64_t slot : state->set->slots()) {
      if (auto sub = state->set->Sub(slot)) source.subs.push_back(std::move(sub));
    }
    source.version = FilterVersion{state->uid, state->set->epoch(), state->changes->load(std::memory_order_acquire)};
  }
  return out;
}

namespace {

// A snapshot value's catalog entry: "PLNNODE1" | u32 LE length | entry. Sets
// *len to the entry's length.
absl::StatusOr<wire::CatalogEntry> SnapshotEntry(std::string_view bytes, uint32_t* len) {
  if (bytes.size() < 12 || bytes.substr(0, 8) != std::string_view(kSnapshotMagic, 8)) {
    return absl::InvalidArgumentError("ERR snapshot: bad magic or truncated");
  }
  *len = 0;
  for (int i = 0; i < 4; ++i) *len |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  if (*len > bytes.size() - 12) return absl::InvalidArgumentError("ERR snapshot: truncated catalog entry");
  wire::CatalogEntry wentry;
  if (!wentry.ParseFromArray(bytes.data() + 12, static_cast<int>(*len))) {
    return absl::InvalidArgumentError("ERR snapshot: catalog entry does not parse");
  }
  return wentry;
}

// A snapshot or delta value's catalog entry, checked as far as it goes
// without the node's state: it parses, and it is under this cluster's secret.
// `what` names the kind of value in errors.
absl::StatusOr<CatalogEntry> ValueEntry(std::string_view bytes, uint64_t key_id, const char* what,
                                        uint32_t* len) {
  absl::StatusOr<wire::CatalogEntry> wentry = SnapshotEntry(bytes, len);
  if (!wentry.ok()) return wentry.status();
  absl::StatusOr<CatalogEntry> entry = FromWire(*wentry);
  if (!entry.ok()) return absl::InvalidArgumentError(absl::StrCat("ERR ", what, ": ", entry.status().message()));
  if (entry->params.key_id != key_id) {
    return absl::InvalidArgumentError(absl::StrCat("ERR ", what, ": other cluster secret"));
  }
  return entry;
}

// A snapshot value's parts, with everything checked but the checksum: its
// catalog entry (key id included) and its crdt snapshot, parsed in place.
struct ParsedValue {
  CatalogEntry entry;
  size_t snapshot_offset = 0;  // where the crdt snapshot starts in the value
  std::string_view snapshot;
  crdt::ParsedSnapshot parsed;
  uint32_t version = 0;
};

absl::StatusOr<ParsedValue> ParseValue(std::string_view bytes, uint64_t key_id, const crdt::ClusterSecret& secret) {
  ParsedValue v;
  uint32_t len = 0;
  absl::StatusOr<CatalogEntry> entry = ValueEntry(bytes, key_id, "snapshot", &len);
  if (!entry.ok()) return entry.status();
  v.entry = *std::move(entry);
  v.snapshot_offset = 12 + len;
  v.snapshot = bytes.substr(v.snapshot_offset);
  absl::StatusOr<crdt::ParsedSnapshot> parsed =
      crdt::ParseSnapshotUnverified(v.snapshot, secret, &v.entry.params, &v.version);
  if (!parsed.ok()) return parsed.status();
  v.parsed = *std::move(parsed);
  return v;
}

}  // namespace

std::string Node::SnapshotValue(std::string_view catalog_entry, std::string_view crdt_snapshot) {
  std::string bytes(kSnapshotMagic, 8);
  const uint32_t len = static_cast<uint32_t>(catalog_entry.size());
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  bytes.append(catalog_entry);
  bytes.append(crdt_snapshot);
  return bytes;
}

absl::Status Node::ExportWords(std::string_view filter, uint64_t slot, uint64_t first,
                               std::span<uint64_t> out) const {
  std::shared_ptr<const FilterState> state = impl_->Lookup(filter);
  if (state == nullptr) return absl::NotFoundError("ERR not found");
  std::shared_ptr<const crdt::SubFilter> gen = state->set->Sub(slot);
  if (gen == nullptr) return absl::NotFoundError("ERR sub-filter not live");
  const uint64_t words = gen->filter->word_count();
  if (first > words || out.size() > words - first) return absl::OutOfRangeError("ERR words out of range");
  for (size_t i = 0; i < out.size(); ++i) out[i] = gen->filter->LoadWord(first + i);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Node::SnapshotFilterName(std::string_view bytes) {
  uint32_t len = 0;
  absl::StatusOr<wire::CatalogEntry> wentry = SnapshotEntry(bytes, &len);
  if (!wentry.ok()) return wentry.status();
  absl::StatusOr<CatalogEntry> entry = FromWire(*wentry);
  if (!entry.ok()) return absl::InvalidArgumentError(absl::StrCat("ERR snapshot: ", entry.status().message()));
  return entry->config.name;
}

absl::Status Node::ImportDelta(std::string_view bytes) {
  Impl& impl = *impl_;
  uint32_t len = 0;
  absl::StatusOr<CatalogEntry> entry = ValueEntry(bytes, impl.key_id, "delta", &len);
  if (!entry.ok()) return entry.status();
  if (impl.IsDeleted(*entry)) return absl::AbortedError("ERR delta: the filter was deleted after it was taken");
  std::shared_ptr<const FilterState> local = impl.DriverLookup(entry->config.name);
  if (local == nullptr) return absl::NotFoundError("ERR delta: no such filter");
  // The parameters decide whether bits are compatible (the stamp may have
  // changed to a winning entry of the same parameters, keeping the bits).
  if (!(local->entry.params == entry->params)) {
    return absl::FailedPreconditionError("ERR delta: the filter has other parameters");
  }
  // Merged batch by batch once all of it is validated. The new bits are not
  // buffered for dissemination (as a snapshot's): peers get what a
  // restarted node holds by anti-entropy.
  std::vector<crdt::WordBits> changed;
  return crdt::VisitDelta(bytes.substr(12 + len), *local->set, [&](uint64_t slot, std::span<const crdt::WordBits> words) {
    impl.MergeWords(*local, slot, words, &changed);
    changed.clear();
  });
}

void Node::ClearDirtyMarks() {
  for (const auto& [name, state] : impl_->filters) {
    for (uint64_t slot : state->set->slots()) {
      if (auto sub = state->set->Sub(slot)) sub->filter->ClearDirty();
    }
  }
}

// Every restore goes through here, off the driver thread: the checksum and
// the build touch every byte of the filter (at 1 GiB, seconds of first
// touches of fresh memory on this VM), which on the driver would delay its
// membership probes.
struct Node::PreparedRestore {
  CatalogEntry entry;
  std::unique_ptr<crdt::GenerationSet> set;
};

absl::StatusOr<std::shared_ptr<Node::PreparedRestore>> Node::PrepareRestore(std::string_view bytes) const {
  const Impl& impl = *impl_;
  absl::StatusOr<ParsedValue> v = ParseValue(bytes, impl.key_id, impl.config.secret);
  if (!v.ok()) return v.status();
  if (absl::Status s = crdt::VerifySnapshotChecksum(v->snapshot); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<crdt::GenerationSet>> set = crdt::BuildSnapshot(v->parsed, impl.config.secret);
  if (!set.ok()) return set.status();
  auto restore = std::make_shared<PreparedRestore>();
  restore->entry = std::move(v->entry);
  restore->set = *std::move(set);
  return restore;
}

absl::Status Node::CommitRestore(std::shared_ptr<PreparedRestore> restore, Time now) {
  assert(restore != nullptr && restore->set != nullptr);
  Impl& impl = *impl_;
  CatalogEntry& entry = restore->entry;
  impl.now = now;
  entry.stamp = impl.FreshStamp(entry.config.name);  // a new filter, made here and now
  entry.creator = impl.config.name;
  if (impl.IsDeleted(entry)) return absl::FailedPreconditionError("ERR snapshot: filter name deleted for good");
  if (impl.DriverLookup(entry.config.name) != nullptr) return absl::AlreadyExistsError("ERR the filter exists");
  if (impl.filters.size() >= kMaxFilters) return absl::ResourceExhaustedError("ERR too many filters");
  if (absl::Status budget = impl.CheckBudget(entry, nullptr); !budget.ok()) return budget;
  impl.Unrefuse(entry.config.name);
  auto state = std::make_shared<FilterState>();
  state->uid = impl.next_uid++;
  state->entry = entry;
  state->set = std::shared_ptr<crdt::GenerationSet>(std::move(restore->set));
  const std::string name = entry.config.name;
  impl.Install(std::move(state), true);
  impl.ReleaseHeld(name);
  return absl::OkStatus();
}

absl::Status Node::ImportSnapshot(std::string_view bytes, const std::function<void(size_t)>& consumed) {
  Impl& impl = *impl_;
  // Validated whole (checksum, structure, parameters) before anything
  // changes, except on recovery's fast path below, which checks the checksum
  // as it loads and undoes the load if it fails.
  absl::StatusOr<ParsedValue> value = ParseValue(bytes, impl.key_id, impl.config.secret);
  if (!value.ok()) return value.status();
  CatalogEntry* entry = &value->entry;
  const crdt::ParsedSnapshot* parsed = &value->parsed;
  const std::string_view snapshot = value->snapshot;
  const uint32_t version = value->version;
  const bool into_empty = version >= 3 && impl.EmptyConfigTarget(*entry, *parsed);
  if (!into_empty) {
    if (absl::Status s = crdt::VerifySnapshotChecksum(snapshot); !s.ok()) return s;
  }
  if (impl.IsDeleted(*entry)) return absl::AbortedError("ERR snapshot: the filter was deleted after it was taken");
  std::shared_ptr<const FilterState> local = impl.DriverLookup(entry->config.name);
  if (local == nullptr || (!(local->entry.params == entry->params) && Precedes(*entry, local->entry))) {
    if (local == nullptr && impl.filters.size() >= kMaxFilters) return absl::ResourceExhaustedError("ERR too many filters");
    // Recovery is not held to the memory budget (restores are, in
    // CommitRestore): its files were written by this node, and refusing them
    // would lose them.
    absl::StatusOr<std::unique_ptr<crdt::GenerationSet>> set = crdt::BuildSnapshot(*parsed, impl.config.secret);
    if (!set.ok()) return set.status();
    impl.Unrefuse(entry->config.name);
    auto state = std::make_shared<FilterState>();
    state->uid = impl.next_uid++;
    state->entry = *entry;
    state->set = std::shared_ptr<crdt::GenerationSet>(std::move(*set));
    const std::string name = entry->config.name;
    if (local == nullptr) {
      impl.Install(std::move(state), true);
    } else {
      impl.Replace(*local, std::move(state), "replaced by snapshot");
    }
    impl.ReleaseHeld(name);
    return absl::OkStatus();
  }
  if (!(local->entry.params == entry->params)) {
    return absl::FailedPreconditionError("ERR snapshot: filter exists with other parameters");
  }
  // Same filter (a config filter at start): move to the snapshot's epoch,
  // open its layers, and OR its words in, in place. No second filter and no
  // vector of its words: at 1 GiB those took a restart to a 5.1 GiB peak.
  // The bits are not buffered for dissemination: peers get them by
  // anti-entropy, as everything a restarted node holds.
  impl.LearnEpoch(entry->config.name, parsed->newest);
  for (const auto& [epoch, count] : parsed->layers) impl.LearnLayers(*local, epoch, count);
  std::map<uint64_t, uint64_t> set_bits;
  const size_t snapshot_offset = value->snapshot_offset;
  std::function<void(size_t)> consumed_in_bytes;
  if (consumed) consumed_in_bytes = [&consumed, snapshot_offset](size_t n) { consumed(snapshot_offset + n); };
  if (absl::Status s = into_empty ? crdt::OrSnapshotIntoEmpty(snapshot, *parsed, *local->set, &set_bits, consumed_in_bytes)
                                  : crdt::OrSnapshotInto(*parsed, *local->set, &set_bits);
      !s.ok()) {
    return s;
  }
  local->changes->fetch_add(1, std::memory_order_release);
  impl.summary_cache.Forget(local->uid);
  FilterClock& clock = impl.clocks[entry->config.name];
  for (const auto& [slot, bits] : set_bits) clock.set_bits[slot] = bits;
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
  if (impl.IsDeleted(*entry)) return absl::OkStatus();  // a deleted filter's entry: dead, as the rule says
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
