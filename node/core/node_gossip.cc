// Node::Impl periodic work: draining client adds, gossip rounds, announcements, rotations.
#include "node/core/node_impl.h"

namespace pollen::node {

void Node::Impl::GossipRound() {
  RecycleBuffer(union_scratch);  // every round, pushes or not: a burst's scratch is freed once quiet
  DrainPending();
  if (const size_t expired = held.Expire(now - config.anti_entropy_interval); expired > 0) {
    Stats([&](NodeCounters& s) { s.held_deltas_dropped += expired; });
  }
  if (tree != nullptr) TreeRound();  // takes `deltas`: `inflight` stays empty
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
      catalog_rounds.empty() && announce_tombstones.empty() && tombstone_rounds.empty() && ae_queue.empty()) {
    return;  // the common idle round: no O(N) peer list
  }
  // One part per (filter, sub-filter): the union of its batches still in flight
  // (each batch is canonical, so the union is merged, not sorted).
  std::map<DeltaBuffer::Key, std::vector<crdt::WordBits>> unions;
  std::vector<crdt::WordBits> scratch;
  for (auto& [key, batch] : inflight) {
    std::shared_ptr<const FilterState> state = DriverLookup(key.first);
    if (state == nullptr || state->uid != batch.filter_uid || state->set->Sub(key.second) == nullptr) {
      batch.remaining = 0;
      continue;
    }
    UnionCanonical(unions[key], batch.words, scratch);
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
  for (auto& [key, words] : unions) delta_bits += PackWords(key, 0, words, packer);
  if (!packer.empty()) {
    const std::vector<Address> peers = PickPeers(config.fanout);
    for (const wire::Gossip& body : packer.Take()) {
      if (peers.empty()) break;
      const std::string plain = SerializeBody(wire::Envelope::kGossipFieldNumber, body);
      SendPlainToAll(peers, plain, BodyIndex(wire::Envelope::kGossip), false);
    }
    Stats([&](NodeCounters& s) { s.delta_bits_sent += delta_bits * peers.size(); });
  }
  if (!ae_queue.empty() && now >= ae_busy_until) {
    const std::string member = std::move(ae_queue.front());
    ae_queue.pop_front();
    // Still live? Then sync with the address it has now.
    if (const Address* peer = membership->LiveAddressOf(member); peer != nullptr) StartAntiEntropy(Address(*peer));
  }
}

uint64_t Node::Impl::PackWords(const DeltaBuffer::Key& key, uint64_t filter_uid, std::span<const crdt::WordBits> words,
                               GossipPacker& packer, std::vector<uint64_t>* bits_per_delta) {
  std::shared_ptr<const FilterState> state = DriverLookup(key.first);
  if (state == nullptr || (filter_uid != 0 && state->uid != filter_uid) || state->set->Sub(key.second) == nullptr) return 0;
  const uint64_t universe = LayerBlocks(state->entry.params, key.second) * crdt::kBlockBits;
  uint64_t bits = 0;
  for (size_t start = 0; start < words.size(); start += kMaxDeltaWords) {
    const size_t n = std::min(kMaxDeltaWords, words.size() - start);
    std::span<const crdt::WordBits> chunk = words.subspan(start, n);
    wire::Delta delta;
    ToWire(state->entry.params, delta.mutable_filter());
    delta.set_epoch(crdt::EpochOfSlot(key.second));
    delta.set_layer(crdt::LayerOfSlot(key.second));
    delta.set_positions(EncodeWords(chunk, 0, universe));
    const uint64_t chunk_bits = crdt::CountBits(chunk);
    bits += chunk_bits;
    if (bits_per_delta != nullptr) bits_per_delta->push_back(chunk_bits);
    packer.AddDelta(std::move(delta));
  }
  return bits;
}

void Node::Impl::Announce(uint32_t rounds, GossipPacker& packer) {
  for (const std::string& name : announce_epochs) epoch_rounds[name] = rounds;
  for (const std::string& name : announce_catalog) catalog_rounds[name] = CatalogRounds();
  for (const std::string& name : announce_tombstones) tombstone_rounds[name] = rounds;
  announce_epochs.clear();
  announce_catalog.clear();
  announce_tombstones.clear();
  for (auto it = tombstone_rounds.begin(); it != tombstone_rounds.end();) {
    auto t = tombstones.find(it->first);
    if (t != tombstones.end()) {
      wire::Tombstone w;
      ToWire(Tombstone{t->first, t->second}, &w);
      packer.AddTombstone(std::move(w));
    }
    it = (t == tombstones.end() || --it->second == 0) ? tombstone_rounds.erase(it) : std::next(it);
  }
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
      if (const uint32_t layers = state->set->layers(fe.epoch()); layers > 1) fe.set_layers(layers);
      packer.AddEpoch(std::move(fe));
    }
    it = (state == nullptr || --it->second == 0) ? epoch_rounds.erase(it) : std::next(it);
  }
}

void Node::Impl::CheckRotations() {
  for (const auto& [name, state] : filters) {
    FilterClock& clock = clocks[name];
    if (!clock.epoch_began) clock.epoch_began = now;
    const FilterConfig& fc = state->entry.config;
    if (fc.rotate_fill <= 0 && fc.rotate_interval.count() <= 0) continue;
    const uint64_t epoch = state->set->epoch();
    const std::shared_ptr<const crdt::SubFilter> newest = state->set->NewestSub();
    RotationInput in;
    in.fill_ratio = static_cast<double>(clock.set_bits[newest->slot()]) / static_cast<double>(newest->filter->shape().bits());
    in.now = now;
    in.epoch_began = *clock.epoch_began;
    in.may_propose = fc.scope == Scope::kShared || OwnsDigest(*state);
    if (ShouldRotate(fc, in) && epoch < kMaxEpoch) LearnEpoch(name, epoch + 1);
  }
}

Time Node::Impl::NextRotationDeadline() const {
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

}  // namespace pollen::node
