// Node::Impl: filters, the catalog and epochs (installing, merging, rotating).
#include "node/core/node_impl.h"

namespace pollen::node {

absl::StatusOr<std::shared_ptr<const FilterState>> Node::Impl::NewState(const CatalogEntry& entry, uint64_t epoch) {
  absl::StatusOr<std::unique_ptr<crdt::GenerationSet>> set = crdt::GenerationSet::Create(entry.params, config.secret, epoch);
  if (!set.ok()) return set.status();
  auto state = std::make_shared<FilterState>();
  state->uid = next_uid++;
  state->entry = entry;
  state->set = std::shared_ptr<crdt::GenerationSet>(std::move(*set));
  return std::shared_ptr<const FilterState>(std::move(state));
}

void Node::Impl::CountBits(const std::string& name, const crdt::GenerationSet& set, bool scan) {
  FilterClock& clock = clocks[name];
  clock.set_bits.clear();
  for (uint64_t slot : set.slots()) {
    auto sub = set.Sub(slot);
    clock.set_bits[slot] = (scan && sub) ? sub->filter->CountSetBits() : 0;
  }
}

bool Node::Impl::LearnEpoch(const std::string& name, uint64_t epoch) {
  std::shared_ptr<const FilterState> state = DriverLookup(name);
  if (state == nullptr || epoch > kMaxEpoch || epoch <= state->set->epoch()) return false;
  absl::StatusOr<bool> moved = state->set->Advance(epoch);
  if (!moved.ok() || !*moved) return false;
  FilterClock& clock = clocks[name];
  std::map<uint64_t, uint64_t> bits;
  for (uint64_t slot : state->set->slots()) bits[slot] = clock.set_bits.count(slot) ? clock.set_bits[slot] : 0;
  clock.set_bits = std::move(bits);
  clock.epoch_began = now;
  clock.announced_layers = state->set->layers(state->set->epoch());
  announce_epochs.insert(name);
  Stats([](NodeCounters& s) { ++s.epochs_advanced; });
  Emit(Event::Kind::kEpochAdvanced, name, "", state->set->epoch());
  return true;
}

namespace {

// What a filter's generations take when created: each generation's first layer.
uint64_t EntryBytes(const CatalogEntry& e) {
  return e.params.shape.bytes() * std::max<uint64_t>(e.params.generations, 1);
}

// What a held filter counts against the budget: what it takes now, or what
// its full window of generations will take once it rotates, if more.
uint64_t StateBytes(const FilterState& state) {
  uint64_t bytes = 0;
  for (uint64_t slot : state.set->slots()) {
    if (auto sub = state.set->Sub(slot)) bytes += sub->filter->shape().bytes();
  }
  return std::max(bytes, EntryBytes(state.entry));
}

}  // namespace

uint64_t Node::Impl::HeldBytes(const FilterState* except) const {
  uint64_t held = 0;
  for (const auto& [name, state] : filters) {
    if (state.get() != except) held += StateBytes(*state);
  }
  return held;
}

absl::Status Node::Impl::CheckBudget(const CatalogEntry& e, const FilterState* replacing, std::string* reason) const {
  const uint64_t need = EntryBytes(e);
  if (config.max_filter_bytes > 0 && need > config.max_filter_bytes) {
    if (reason != nullptr) *reason = "max_filter_bytes";
    return absl::ResourceExhaustedError(absl::StrCat("ERR filter would need ", need, " bytes, over max-filter-bytes (",
                                                     config.max_filter_bytes, ")"));
  }
  if (config.max_memory_bytes == 0) return absl::OkStatus();
  const uint64_t held = HeldBytes(replacing);
  if (held + need > config.max_memory_bytes) {
    if (reason != nullptr) *reason = "max_memory";
    return absl::ResourceExhaustedError(absl::StrCat("ERR filter would need ", need, " bytes; this node's filters hold ",
                                                     held, " of max-memory (", config.max_memory_bytes, ")"));
  }
  return absl::OkStatus();
}

void Node::Impl::RefuseEntry(const CatalogEntry& e, const absl::Status& why, const std::string& reason) {
  const std::string& name = e.config.name;
  auto it = refused.find(name);
  if (it != refused.end() && it->second.entry.stamp == e.stamp && it->second.entry.creator == e.creator) return;
  Node::RefusedFilter info{name, reason, std::string(why.message()), EntryBytes(e), e.creator};
  refused[name] = Refusal{e, info};
  {
    std::lock_guard lock(refused_names_mu);
    refused_names.insert(name);
  }
  Stats([&](NodeCounters& s) { ++s.filters_refused[reason]; });
  Emit(Event::Kind::kFilterRefused, name, std::string(why.message()));
}

void Node::Impl::ApplyCatalogEntry(const CatalogEntry& e, uint64_t epoch) {
  const std::string& name = e.config.name;
  if (IsDeleted(e)) {
    Unrefuse(name);
    // A deleted filter's entry (from a node that has not heard of the
    // deletion yet): refuse it and spread the tombstone towards its sender.
    announce_tombstones.insert(name);
    return;
  }
  std::shared_ptr<const FilterState> local = DriverLookup(name);
  if (local == nullptr) {
    if (filters.size() >= kMaxFilters) {
      Stats([](NodeCounters& s) { ++s.rejected_by_reason["catalog_full"]; });
      return;
    }
    std::string reason;
    if (absl::Status budget = CheckBudget(e, nullptr, &reason); !budget.ok()) {
      RefuseEntry(e, budget, reason);
      return;
    }
    Unrefuse(name);
    absl::StatusOr<std::shared_ptr<const FilterState>> state = NewState(e, epoch);
    if (!state.ok()) {
      RefuseMerge(name, std::string(state.status().message()));
      return;
    }
    Install(*std::move(state), false);
    Emit(Event::Kind::kFilterCreated, name, e.creator);
    ReleaseHeld(name);
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
      // The winner's parameters: a new state, if this node can hold it.
      std::string reason;
      if (absl::Status budget = CheckBudget(e, local.get(), &reason); !budget.ok()) {
        RefuseEntry(e, budget, reason);
        return;
      }
      absl::StatusOr<std::shared_ptr<const FilterState>> state = NewState(e, epoch);
      if (!state.ok()) {
        RefuseMerge(name, std::string(state.status().message()));
        return;
      }
      Replace(*local, *std::move(state), absl::StrCat("lost to the entry created by '", e.creator, "'"));
      ReleaseHeld(name);
      return;  // a new incarnation, at the winner's epoch
    }
  } else if (!same_descriptor && e.params != local->entry.params) {
    announce_catalog.insert(name);  // spread the winner towards the loser
    return;
  }
  if (same_descriptor || e.params == local->entry.params) LearnEpoch(name, epoch);
}

std::shared_ptr<const FilterState> Node::Impl::MatchFilter(const crdt::FilterParams& params) {
  std::shared_ptr<const FilterState> state = DriverLookup(params.name);
  if (state == nullptr) {
    Stats([](NodeCounters& s) { ++s.unknown_filter; });
    return nullptr;
  }
  if (!(state->entry.params == params)) {
    RefuseMerge(params.name, "filter parameters differ (identity, blocks, k, generations, hash scheme or key id)");
    return nullptr;
  }
  return state;
}

uint64_t Node::Impl::MergeWords(const FilterState& state, uint64_t slot, std::span<const crdt::WordBits> words,
                                std::vector<crdt::WordBits>* changed_out) {
  std::vector<crdt::WordBits> local;
  std::vector<crdt::WordBits>& changed = changed_out != nullptr ? *changed_out : local;
  const size_t before = changed.size();
  if (!state.set->Merge(slot, words, &changed).ok()) {  // epoch left the window meanwhile
    changed.resize(before);
    return 0;
  }
  const std::span<const crdt::WordBits> fresh = std::span(changed).subspan(before);
  const uint64_t n = crdt::CountBits(fresh);
  if (n == 0) return 0;
  state.changes->fetch_add(1, std::memory_order_release);
  summary_cache.MarkWords(state.uid, slot, fresh);
  clocks[state.entry.config.name].set_bits[slot] += n;
  if (changed_out == nullptr) Buffer(state, slot, fresh);
  return n;
}

bool Node::Impl::LearnLayers(const FilterState& state, uint64_t epoch, uint32_t count) {
  if (count <= 1) return false;
  absl::StatusOr<bool> grew = state.set->Grow(epoch, count);
  if (!grew.ok()) {
    if (!absl::IsNotFound(grew.status())) RefuseMerge(state.entry.config.name, std::string(grew.status().message()));
    return false;
  }
  if (!*grew) return false;
  const std::string& name = state.entry.config.name;
  state.changes->fetch_add(1, std::memory_order_release);
  if (epoch == state.set->epoch()) {
    announce_epochs.insert(name);
    clocks[name].announced_layers = state.set->layers(epoch);
  }
  Stats([](NodeCounters& s) { ++s.layers_opened; });
  Emit(Event::Kind::kFilterGrew, name, "", state.set->layers(epoch));
  return true;
}

void Node::Impl::CheckGrowth() {
  for (const auto& [name, state] : filters) {
    FilterClock& clock = clocks[name];
    const std::shared_ptr<const crdt::SubFilter> newest = state->set->NewestSub();
    const uint64_t bits = clock.set_bits[newest->slot()];
    // Only bits from peers need the estimate: this node counts its own new
    // keys exactly (the estimate of a small layer is off by a few keys, and
    // BF.INFO on a single node answers RedisBloom's exact count).
    if (newest->merged.load(std::memory_order_relaxed) && (newest->slot() != clock.estimated_slot || bits != clock.estimated_bits)) {
      clock.estimated_slot = newest->slot();
      clock.estimated_bits = bits;
      const double items = crdt::EstimateFillCached(newest->filter->shape(), bits).items;
      state->set->RaiseItems(newest->slot(), crdt::ItemsFromEstimate(items));
    }
    CheckSaturation(*state, *newest, bits);
    if (!state->entry.params.scaling()) continue;
    // A layer that only this node's adds filled is followed by the next one
    // at the next new key, as in RedisBloom (a present key opens nothing).
    // A layer that peers fill too grows ahead of time: when this node's
    // count, plus kGrowthLookaheadRounds rounds of its growth in the last
    // round, reaches the capacity. The cluster keeps adding to a layer until
    // the news of the next one has spread (a few rounds), and an overfilled
    // layer answers "present" to new keys for good: when growth waited for a
    // new key to find the layer full, pollen-sim with 20 nodes at 1000 adds/s
    // from capacity 10 stalled at 4 layers. The limits that remain are in
    // docs/crdt.md, "Growth in a cluster".
    const uint32_t layers = state->set->layers(newest->epoch);
    const uint64_t items = newest->items.load(std::memory_order_relaxed);
    const uint64_t last_round = clock.rate_slot == newest->slot() && items > clock.rate_items ? items - clock.rate_items : 0;
    clock.rate_slot = newest->slot();
    clock.rate_items = items;
    const uint64_t ahead = last_round > UINT64_MAX / kGrowthLookaheadRounds ? UINT64_MAX : kGrowthLookaheadRounds * last_round;
    const bool full_soon = items >= newest->capacity || ahead >= newest->capacity - items;
    if (newest->merged.load(std::memory_order_relaxed) && full_soon && newest->layer + 1 < crdt::kMaxLayers &&
        !newest->cannot_grow.load(std::memory_order_relaxed)) {
      LearnLayers(*state, newest->epoch, layers + 1);
    } else if (layers != clock.announced_layers) {
      // Opened by a client add since the last check: tell the others.
      clock.announced_layers = layers;
      announce_epochs.insert(name);
      Stats([](NodeCounters& s) { ++s.layers_opened; });
      Emit(Event::Kind::kFilterGrew, name, "", layers);
    }
  }
}

void Node::Impl::CheckSaturation(const FilterState& state, const crdt::SubFilter& newest, uint64_t set_bits) {
  const FilterConfig& fc = state.entry.config;
  const bool refuses_when_full = !state.entry.params.scaling() && fc.rotate_fill <= 0;
  const uint64_t items = newest.items.load(std::memory_order_relaxed);
  const double fill = static_cast<double>(set_bits) / static_cast<double>(newest.filter->shape().bits());
  std::string why;
  if (refuses_when_full && static_cast<double>(items) >= kSaturatedItemsRatio * static_cast<double>(fc.capacity)) {
    why = absl::StrCat("holds about ", items, " keys of its capacity ", fc.capacity,
                       " (a non-scaling filter refuses new keys once full)");
  } else if (fill > kSaturatedFill) {
    why = absl::StrFormat("sub-filter %u of generation %u is %.2f full (its false-positive rate is above the design rate)",
                          newest.layer, newest.epoch, fill);
  }
  const bool saturated = !why.empty();
  if (state.tallies->saturated.exchange(saturated, std::memory_order_relaxed) == saturated) return;
  if (saturated) {
    Emit(Event::Kind::kFilterSaturated, fc.name, std::move(why));
  } else {
    Emit(Event::Kind::kFilterRelieved, fc.name);
  }
}

void Node::Impl::DrainPending() {
  RecycleBuffer(drained_words);  // before the quiet round's return: a burst's buffer is freed
  PendingAdds::DropReport dropped;
  pending.Drain(&drained_adds, &dropped);
  const std::vector<PendingAdds::Entry>& entries = drained_adds;
  if (entries.empty() && dropped.words == 0) return;  // the common case: a round with no client adds
  // Entries for one filter arrive in runs; look each run's filter up once
  // (a sorted vector: a std::map here cost allocations on every round).
  std::vector<std::pair<uint64_t, const FilterState*>> by_uid;
  by_uid.reserve(filters.size());
  for (const auto& [name, state] : filters) by_uid.emplace_back(state->uid, state.get());
  std::sort(by_uid.begin(), by_uid.end());
  // The filter with `uid` if it still has generation `slot` (not deleted or
  // rotated out since the add), else null.
  auto live = [&by_uid](uint64_t uid, uint64_t slot) -> const FilterState* {
    auto it = std::lower_bound(by_uid.begin(), by_uid.end(), uid,
                               [](const auto& entry, uint64_t u) { return entry.first < u; });
    if (it == by_uid.end() || it->first != uid || it->second->set->Sub(slot) == nullptr) return nullptr;
    return it->second;
  };
  if (dropped.words > 0) {
    Stats([](NodeCounters& s) { ++s.delta_overflows; });
    if (dropped.untracked) {
      for (auto& [name, state] : filters) CountBits(name, *state->set, true);  // recount fills
      summary_cache.MarkEverything();
    }
    for (const PendingAdds::Dropped& d : dropped.by_generation) {
      const FilterState* state = live(d.filter_uid, d.slot);
      if (state == nullptr) continue;
      clocks[state->entry.config.name].set_bits[d.slot] += d.bits;
      summary_cache.MarkAll(d.filter_uid, d.slot);
    }
  }
  // A node with no live peer has no one to send deltas to: it keeps its
  // counts and summaries current but buffers nothing, and anti-entropy
  // (which runs when a member joins or comes back) carries these bits later.
  // Saves the driver's sort-and-encode work on a standalone node (~10% of a
  // core under redis-benchmark, perf).
  const bool alone = membership->live_peer_count() == 0;
  // Each run of entries for one sub-filter (one client add, or one pipelined
  // run of them) resolves its filter, sub-filter and clock once: per entry
  // these cost ~10% of the server's user time under redis-benchmark BF.ADD
  // at pipeline 16 (perf).
  std::vector<crdt::WordBits>& words = drained_words;
  for (size_t i = 0; i < entries.size();) {
    const uint64_t uid = entries[i].filter_uid;
    const uint64_t slot = entries[i].slot;
    words.clear();
    for (; i < entries.size() && entries[i].filter_uid == uid && entries[i].slot == slot; ++i) {
      words.push_back(entries[i].word);
    }
    const FilterState* state = live(uid, slot);
    if (state == nullptr) continue;
    FilterClock& clock = clocks[state->entry.config.name];
    if (!dropped.untracked) {
      uint64_t bits = 0;
      for (const crdt::WordBits& w : words) bits += crdt::Popcount64(w.bits);
      clock.set_bits[slot] += bits;
    }
    summary_cache.MarkWords(uid, slot, words);
    // A group the delta buffer has no room for is refused whole (counted as
    // an overflow, as one word was): anti-entropy repairs what was dropped.
    if (!alone) Buffer(*state, slot, words);
  }
}

}  // namespace pollen::node
