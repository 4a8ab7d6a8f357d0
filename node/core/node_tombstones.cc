// Node::Impl: deleting filters (DEL) with tombstones in the replicated
// catalog. The rule is in catalog.h; this file applies it.
#include "node/core/node_impl.h"

namespace pollen::node {

uint64_t Node::Impl::FreshStamp(std::string_view name) const {
  const uint64_t wall = static_cast<uint64_t>(std::max<int64_t>(0, now.count()));
  auto it = tombstones.find(name);
  if (it == tombstones.end()) return wall;
  // deleted_through may be the maximum stamp only if a peer sent it; then no
  // entry can outlive it and the name stays deleted (Reserve reports it).
  return it->second == ~uint64_t{0} ? it->second : std::max(wall, it->second + 1);
}

void Node::Impl::RemoveFilter(const std::string& name, uint64_t deleted_through) {
  std::shared_ptr<const FilterState> state = DriverLookup(name);
  if (state == nullptr) return;
  summary_cache.Forget(state->uid);
  Unpublish(name);
  clocks.erase(name);
  catalog_rounds.erase(name);
  epoch_rounds.erase(name);
  announce_catalog.erase(name);
  announce_epochs.erase(name);
  // Batches in flight for its uid are dropped by the next gossip round, and
  // pending client adds for it by DrainPending (their uid is gone).
  Stats([](NodeCounters& s) { ++s.filters_deleted; });
  Emit(Event::Kind::kFilterDeleted, name, absl::StrCat("deleted through stamp ", deleted_through), deleted_through);
}

bool Node::Impl::ApplyTombstone(const Tombstone& t) {
  assert(t.name.size() <= crdt::kMaxFilterNameBytes);
  auto it = tombstones.find(t.name);
  if (it != tombstones.end() && it->second >= t.deleted_through) return false;
  if (it == tombstones.end() && tombstones.size() >= kMaxTombstones) {
    // Forget the oldest deletion (lowest deleted_through; ties by name), or
    // refuse this one if it is older still. Deterministic on every node.
    auto oldest = tombstones.begin();
    for (auto i = tombstones.begin(); i != tombstones.end(); ++i) {
      if (i->second < oldest->second) oldest = i;
    }
    Stats([](NodeCounters& s) { ++s.tombstones_dropped; });
    if (oldest->second >= t.deleted_through) return false;
    tombstone_rounds.erase(oldest->first);
    announce_tombstones.erase(oldest->first);
    tombstones.erase(oldest);
  }
  tombstones[t.name] = t.deleted_through;
  announce_tombstones.insert(t.name);
  if (const size_t purged = held.Take(t.name).size(); purged > 0) {
    Stats([&](NodeCounters& s) { s.held_deltas_dropped += purged; });  // possibly the deleted filter's bits
  }
  std::shared_ptr<const FilterState> local = DriverLookup(t.name);
  if (local != nullptr && Covers(t, local->entry)) {
    RemoveFilter(t.name, t.deleted_through);
  }
  if (auto r = refused.find(t.name); r != refused.end() && Covers(t, r->second.entry)) Unrefuse(t.name);
  return true;
}

bool Node::Impl::DecodeTombstones(const google::protobuf::RepeatedPtrField<wire::Tombstone>& in,
                                  std::vector<Tombstone>* out) {
  if (static_cast<size_t>(in.size()) > kMaxTombstones) return false;
  out->reserve(static_cast<size_t>(in.size()));
  for (const wire::Tombstone& w : in) {
    absl::StatusOr<Tombstone> t = FromWire(w);
    if (!t.ok()) return false;
    out->push_back(*std::move(t));
  }
  return true;
}

void Node::Impl::SendTombstones(const Address& peer) {
  if (tombstones.empty()) return;
  wire::Envelope env;
  wire::CatalogUpdate* update = env.mutable_catalog();
  size_t bytes = 0;
  for (const auto& [name, through] : tombstones) {
    if (bytes > kSyncChunkBytes) {
      Send(peer, env, true);
      update->Clear();
      bytes = 0;
    }
    ToWire(Tombstone{name, through}, update->add_tombstones());
    bytes += name.size() + 16;
  }
  Send(peer, env, true);
}

absl::StatusOr<bool> Node::Delete(std::string_view filter, Time now) {
  Impl& impl = *impl_;
  impl.now = now;
  std::shared_ptr<const FilterState> local = impl.DriverLookup(std::string(filter));
  if (local == nullptr) return false;
  const bool raised = impl.ApplyTombstone(Tombstone{std::string(filter), local->entry.stamp});
  // A tombstone at least this high was already there and would have removed
  // the filter; so this one raised it, unless the table refused it as older
  // than everything it holds (then the filter stays: report the failure).
  if (!raised) return absl::ResourceExhaustedError("ERR too many deleted filters to remember this deletion");
  assert(impl.DriverLookup(std::string(filter)) == nullptr);
  return true;
}

std::map<std::string, uint64_t> Node::Tombstones() const {
  return std::map<std::string, uint64_t>(impl_->tombstones.begin(), impl_->tombstones.end());
}

absl::Status Node::ImportTombstone(std::string_view filter, uint64_t deleted_through, Time now) {
  if (filter.size() > crdt::kMaxFilterNameBytes) return absl::InvalidArgumentError("ERR tombstone: name too long");
  impl_->now = now;
  impl_->ApplyTombstone(Tombstone{std::string(filter), deleted_through});
  return absl::OkStatus();
}

}  // namespace pollen::node
