// Node::Impl handlers for deltas, epochs, packed gossip and catalog frames.
#include "node/core/node_impl.h"

namespace pollen::node {

absl::StatusOr<crdt::FilterParams> Node::Impl::ParamsFromWire(const wire::FilterRef& ref,
                                                              std::shared_ptr<const FilterState>* matched) const {
  if (matched != nullptr) matched->reset();
  if (ref.digest() != 0 && !IsCompactRef(ref)) return absl::InvalidArgumentError("digest beside full parameters");
  if (ref.alias() != 0) return absl::InvalidArgumentError("a filter alias outside a tree push");
  auto it = filters.find(ref.name());
  if (IsCompactRef(ref)) {
    if (it == filters.end() || ParamsDigest(it->second->entry.params) != ref.digest()) {
      return absl::NotFoundError("compact filter reference names no filter held here");
    }
    if (matched != nullptr) *matched = it->second;
    return it->second->entry.params;
  }
  if (it != filters.end()) {
    const crdt::FilterParams& p = it->second->entry.params;
    if (p.filter_id == ref.filter_id() && p.shape.blocks == ref.blocks() && p.shape.k == ref.k() &&
        p.generations == ref.generations() && p.hash_scheme == ref.hash_scheme() && p.key_id == ref.key_id() &&
        p.expansion == ref.expansion() && p.capacity == ref.capacity() && p.fpr == ref.fpr()) {
      if (matched != nullptr) *matched = it->second;
      return p;
    }
  }
  return FromWire(ref);
}

bool Node::Impl::DecodeDelta(const wire::Delta& delta, size_t* budget, DecodedDelta* out) const {
  absl::StatusOr<crdt::FilterParams> params = ParamsFromWire(delta.filter(), &out->state);
  out->filters_version = filters_version;
  out->unresolved = absl::IsNotFound(params.status());
  if (!params.ok() || delta.epoch() > kMaxEpoch || delta.layer() >= crdt::kMaxLayers) return false;
  absl::StatusOr<crdt::FilterShape> shape = crdt::LayerShape(*params, delta.layer());
  if (!shape.ok()) return false;
  const uint64_t universe = shape->bits();
  absl::StatusOr<std::vector<crdt::WordBits>> words =
      DecodeWords(delta.positions(), 0, universe, std::min<uint64_t>(universe, *budget), &out->bits);
  if (!words.ok()) return false;
  assert(out->bits == crdt::CountBits(*words));
  *budget -= out->bits;
  out->params = *std::move(params);
  out->slot = crdt::SlotOf(delta.epoch(), delta.layer());
  out->words = *std::move(words);
  return true;
}

void Node::Impl::ApplyDelta(const DecodedDelta& d) {
  const bool unchanged = d.state != nullptr && d.filters_version == filters_version;
  assert(!unchanged || (DriverLookup(d.params.name) == d.state && d.state->entry.params == d.params));
  // A deleted name's bits are not held: they may be the deleted filter's,
  // still on their way, and a re-created one has the same parameters.
  if (!unchanged && !d.words.empty() && DriverLookup(d.params.name) == nullptr && !tombstones.contains(d.params.name)) {
    const bool kept = held.Hold(HeldDeltas::Delta{d.params, d.slot, d.words, now});
    Stats([&](NodeCounters& s) {
      ++s.unknown_filter;
      ++(kept ? s.held_deltas : s.held_deltas_refused);
    });
    return;
  }
  std::shared_ptr<const FilterState> state = unchanged ? d.state : MatchFilter(d.params);
  if (state == nullptr) return;
  assert(d.bits == crdt::CountBits(d.words));
  Stats([&](NodeCounters& s) { s.delta_bits_received += d.bits; });
  // A delta for a newer epoch or layer implies it. LearnEpoch refuses epochs
  // not above the current one, so checking here first only skips its lookup.
  const uint64_t epoch = crdt::EpochOfSlot(d.slot);
  if (epoch > state->set->epoch()) LearnEpoch(d.params.name, epoch);
  if (crdt::LayerOfSlot(d.slot) > 0) LearnLayers(*state, epoch, crdt::LayerOfSlot(d.slot) + 1);
  if (state->set->Sub(d.slot) == nullptr) {
    Stats([](NodeCounters& s) { ++s.stale_deltas; });
    return;
  }
  MergeWords(*state, d.slot, d.words);
}

void Node::Impl::ReleaseHeld(const std::string& name) {
  std::vector<HeldDeltas::Delta> taken = held.Take(name);
  if (taken.empty()) return;
  // Released bits are this node's own news for every link, including the
  // one whose tree push brought the entry: outside any capture.
  DeltaBuffer* const saved_capture = capture;
  capture = nullptr;
  uint64_t released = 0, dropped = 0;
  for (HeldDeltas::Delta& h : taken) {
    std::shared_ptr<const FilterState> state = DriverLookup(name);
    if (state == nullptr || !(h.params == state->entry.params)) {
      if (!held.Hold(std::move(h))) ++dropped;
      continue;
    }
    DecodedDelta d;
    d.params = std::move(h.params);
    d.slot = h.slot;
    d.words = std::move(h.words);
    d.bits = crdt::CountBits(d.words);
    ApplyDelta(d);  // known now: merged, never held again
    ++released;
  }
  capture = saved_capture;
  Stats([&](NodeCounters& s) {
    s.held_deltas_released += released;
    s.held_deltas_dropped += dropped;
  });
}

void Node::Impl::HandleDelta(const Address& from, const wire::Delta& delta) {
  size_t budget = kMaxFramePositions;
  DecodedDelta d;
  if (!DecodeDelta(delta, &budget, &d)) {
    Reject(from, "malformed");
    return;
  }
  ApplyDelta(d);
}

bool Node::Impl::DecodeEpochs(const google::protobuf::RepeatedPtrField<wire::FilterEpoch>& in, DecodedEpochs* out) {
  if (static_cast<size_t>(in.size()) > kMaxFilters) return false;
  for (const wire::FilterEpoch& fe : in) {
    absl::StatusOr<crdt::FilterParams> params = FromWire(fe.filter());
    if (!params.ok() || fe.epoch() > kMaxEpoch || fe.layers() > crdt::kMaxLayers) return false;
    if (fe.layers() > 1 && !params->scaling()) return false;
    out->push_back(DecodedEpoch{*std::move(params), fe.epoch(), std::max<uint32_t>(1, fe.layers())});
  }
  return true;
}

void Node::Impl::ApplyEpochs(const DecodedEpochs& epochs) {
  for (const DecodedEpoch& e : epochs) {
    std::shared_ptr<const FilterState> state = MatchFilter(e.params);
    if (state == nullptr) continue;
    LearnEpoch(e.params.name, e.epoch);
    LearnLayers(*state, e.epoch, e.layers);
  }
}

void Node::Impl::HandleEpochs(const Address& from, const wire::EpochAnnounce& msg) {
  DecodedEpochs decoded;
  if (!DecodeEpochs(msg.epochs(), &decoded)) {
    Reject(from, "malformed");
    return;
  }
  ApplyEpochs(decoded);
}

bool Node::Impl::DecodeGossip(const wire::Gossip& g, DecodedGossip* out) {
  bool ok = static_cast<size_t>(g.deltas_size()) <= kMaxGossipDeltas && DecodeCatalog(g.catalog(), &out->catalog) &&
            DecodeTombstones(g.tombstones(), &out->dead) && DecodeEpochs(g.epochs(), &out->epochs);
  size_t budget = kMaxFramePositions;
  out->deltas.resize(ok ? static_cast<size_t>(g.deltas_size()) : 0);
  for (size_t i = 0; ok && i < out->deltas.size(); ++i) {
    ok = DecodeDelta(g.deltas(static_cast<int>(i)), &budget, &out->deltas[i]);
    out->unresolved_ref = !ok && out->deltas[i].unresolved;
  }
  return ok;
}

void Node::Impl::ApplyGossip(const DecodedGossip& g) {
  ApplyTombstones(g.dead);
  ApplyCatalog(g.catalog);
  ApplyEpochs(g.epochs);
  for (const DecodedDelta& d : g.deltas) ApplyDelta(d);
}

void Node::Impl::HandleGossip(const Address& from, const wire::Gossip& g) {
  DecodedGossip decoded;
  if (!DecodeGossip(g, &decoded)) {
    Reject(from, "malformed");
    return;
  }
  ApplyGossip(decoded);
}

void Node::Impl::HandleCatalog(const Address& from, const wire::CatalogUpdate& msg) {
  std::vector<std::pair<CatalogEntry, uint64_t>> catalog;
  std::vector<Tombstone> dead;
  if (!DecodeCatalog(msg.entries(), &catalog) || !DecodeTombstones(msg.tombstones(), &dead)) {
    Reject(from, "malformed");
    return;
  }
  ApplyTombstones(dead);
  ApplyCatalog(catalog);
}

void Node::Impl::HandleFrame(const Address& from, std::string_view bytes, Time t, Channel channel) {
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
  const uint64_t seal_sender = codec.opened_sender();
  const uint64_t rejects_before = frame_rejects;
  {
    std::lock_guard lock(stats_mu);
    bytes_in_type[BodyIndex(env)] += bytes.size();
  }
  // A bare tree push (kTreeFeatureBarePushes; FrameCodec lets version 0
  // through only for tree bodies without name or address, and only plain
  // pushes are taken here) names no sender: it is the neighbour whose named
  // tree frames came under the same seal sender id. One this node cannot
  // attribute (it restarted, or dropped the link) is dropped, and the frame's
  // source is asked to name itself (Tree.link = 3, at most once a second per
  // source): its next pushes are named, and NACKs bring back what was dropped. Counted, not logged; a
  // sign of trouble for anti-entropy's interval.
  const bool bare = env.version() == 0;
  const std::string* sender = &env.sender_name();
  if (bare) {
    const wire::Tree& t = env.tree();
    if (t.seq() == 0 || t.probe() != 0 || t.link() != 0 || t.has_beacon()) {
      Reject(from, "malformed");
      return;
    }
    auto it = seal_senders.find(seal_sender);
    if (tree == nullptr || it == seal_senders.end() || it->second.channel != channel || it->second.collided) {
      ++frame_rejects;
      Stats([](NodeCounters& s) { ++s.rejected_by_reason["unattributed"]; });
      AskToNameItself(from);
      return;
    }
    sender = &it->second.name;
  }
  // Replies go to where the sender listens (a stream's source port is not
  // it). A tree frame (kTreeFeatureImplicitSender) or a compact membership
  // datagram may leave the address out: the member list has it, or, for a
  // member not listed yet, the datagram came from it.
  Address reply_to = from;
  if (!env.sender_address().empty() && env.sender_address().size() <= Membership::kMaxAddressBytes) {
    reply_to = env.sender_address();
  } else if (env.sender_address().empty() &&
             (env.body_case() == wire::Envelope::kTree || env.body_case() == wire::Envelope::kMembership)) {
    if (const Address* listed = membership->LiveAddressOf(*sender); listed != nullptr) reply_to = *listed;
  }
  switch (env.body_case()) {
    case wire::Envelope::kMembership:
      if (started) {
        if (env.membership().sender().empty() && (channel != Channel::kDatagram || !env.sender_address().empty())) {
          Reject(from, "malformed");  // compact membership frames come by datagram, without an address
          break;
        }
        membership->Handle(reply_to, env.membership().sender().empty() ? *sender : env.membership().sender(),
                           env.membership(), now);
        PumpMembership();
        CopyMembershipStats();
      }
      break;
    case wire::Envelope::kCatalog: HandleCatalog(reply_to, env.catalog()); break;
    case wire::Envelope::kDelta: HandleDelta(reply_to, env.delta()); break;
    case wire::Envelope::kEpochs: HandleEpochs(reply_to, env.epochs()); break;
    case wire::Envelope::kSyncRequest: HandleSyncRequest(reply_to, env.sync_request()); break;
    case wire::Envelope::kSyncRanges: HandleSyncRanges(reply_to, env.sync_ranges()); break;
    case wire::Envelope::kGossip: HandleGossip(reply_to, env.gossip()); break;
    case wire::Envelope::kTree:
      HandleTree(reply_to, *sender, env.tree());
      if (!bare) NoteSealSender(seal_sender, channel, *sender);
      break;
    case wire::Envelope::kRouteAdd: HandleRouteAdd(reply_to, env.sender_name(), env.route_add()); break;
    case wire::Envelope::kRouteReply: HandleRouteReply(reply_to, env.sender_name(), env.route_reply()); break;
    case wire::Envelope::kKeyCheck: HandleKeyCheck(reply_to, env.key_check()); break;
    case wire::Envelope::kKeyCheckReply: HandleKeyCheckReply(reply_to, env.sender_name(), env.key_check_reply()); break;
    default: Reject(from, "malformed"); break;
  }
  if (env.body_case() == wire::Envelope::kDelta || env.body_case() == wire::Envelope::kSyncRequest ||
      env.body_case() == wire::Envelope::kSyncRanges ||
      (env.body_case() == wire::Envelope::kGossip && env.gossip().deltas_size() > 0) ||
      (env.body_case() == wire::Envelope::kTree && env.tree().data().deltas_size() > 0)) {
    if (frame_rejects == rejects_before) NoteData(*sender);
  }
}

void Node::Impl::NoteData(const std::string& sender) {
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

Node::Impl::ScanResult Node::Impl::Scan(const FilterState& state, uint64_t slot, const crdt::BlockedFilter& filter,
                                        InfoParts parts) const {
  const bool counts = HasParts(parts, InfoParts::kCounts);
  const bool digests = HasParts(parts, InfoParts::kDigests);
  const std::pair<uint64_t, uint64_t> key(state.uid, slot);
  const uint64_t changes = state.changes->load(std::memory_order_acquire);
  assert(changes != kNotScanned);
  ScanResult cached;
  {
    std::lock_guard lock(scans_mu);
    auto it = scans.find(key);
    if (it != scans.end()) cached = it->second;
  }
  const bool need_bits = counts && cached.bits_changes != changes;
  const bool need_digest = digests && cached.digest_changes != changes;
  if (need_bits || need_digest) {
    ScanResult fresh;
    if (need_bits) fresh.set_bits = filter.CountSetBits();
    if (need_digest) fresh.digest = GenerationDigest(filter);
    std::lock_guard lock(scans_mu);
    if (scans.size() >= 4096) scans.clear();
    ScanResult& entry = scans[key];  // re-read: another thread may have scanned meanwhile
    if (need_bits) {
      entry.bits_changes = changes;
      entry.set_bits = fresh.set_bits;
    }
    if (need_digest) {
      entry.digest_changes = changes;
      entry.digest = fresh.digest;
    }
    cached = entry;
  }
  ScanResult out;
  if (counts) {
    out.bits_changes = changes;
    out.set_bits = cached.set_bits;
  }
  if (digests) {
    out.digest_changes = changes;
    out.digest = cached.digest;
  }
  return out;
}

FilterInfo Node::Impl::InfoOf(const FilterState& state, InfoParts parts) const {
  FilterInfo info;
  info.config = state.entry.config;
  info.blocks = state.entry.params.shape.blocks;
  info.k = state.entry.params.shape.k;
  info.incarnation = state.uid;
  info.stamp = state.entry.stamp;
  info.creator = state.entry.creator;
  info.epoch = state.set->epoch();
  info.queries = state.tallies->queries.load(std::memory_order_relaxed);
  info.answered_present = state.tallies->answered_present.load(std::memory_order_relaxed);
  info.false_positives = state.tallies->false_positives.load(std::memory_order_relaxed);
  info.saturated = state.tallies->saturated.load(std::memory_order_relaxed);
  for (uint64_t slot : state.set->slots()) {
    std::shared_ptr<const crdt::SubFilter> sub = state.set->Sub(slot);
    if (sub == nullptr) continue;
    const crdt::FilterShape shape = sub->filter->shape();
    GenerationInfo g;
    g.epoch = sub->epoch;
    g.layer = sub->layer;
    g.capacity = state.entry.params.scaling() ? sub->capacity : state.entry.config.capacity;
    g.items = sub->items.load(std::memory_order_relaxed);
    g.merged = sub->merged.load(std::memory_order_relaxed);
    g.blocks = shape.blocks;
    g.k = shape.k;
    if (parts != InfoParts::kEpochsOnly) {
      const ScanResult scan = Scan(state, slot, *sub->filter, parts);
      g.digest = scan.digest;
      if (scan.bits_changes != kNotScanned) {
        g.set_bits = scan.set_bits;
        g.fill_ratio = static_cast<double>(g.set_bits) / static_cast<double>(shape.bits());
        if (HasParts(parts, InfoParts::kEstimates)) {
          const crdt::FillEstimate e = crdt::EstimateFillCached(shape, g.set_bits);
          g.estimated_items = e.items;
          g.estimated_fpr = e.fpr;
        }
      }
    }
    info.memory_bytes += shape.bytes();
    info.generations.push_back(g);
  }
  return info;
}

ObservedFpr ObservedFalsePositiveRate(const FilterInfo& f) {
  const uint64_t present = std::min(f.answered_present, f.queries);
  const uint64_t wrong = std::min(f.false_positives, present);
  const uint64_t negatives = (f.queries - present) + wrong;  // answered absent, plus present but absent
  ObservedFpr r;
  if (wrong == 0) return r;
  r.over_present = static_cast<double>(wrong) / static_cast<double>(present);
  r.over_negatives = static_cast<double>(wrong) / static_cast<double>(negatives);
  return r;
}

}  // namespace pollen::node
