// GossipPacker: one gossip round's dissemination parts (deltas, epoch
// announcements, catalog entries, tombstones) packed into as few wire::Gossip bodies as
// fit a byte budget, so a busy node sends one frame per peer per round rather
// than one per (filter, generation) and announcement kind.
//
// Promises:
//  - Every part added appears in exactly one body returned by Take(), in the
//    order added within its kind.
//  - A body's serialized size stays within the budget, except a body holding a
//    single part that alone exceeds it (the caller sends that as a stream frame).
//  - Deterministic: the same parts in the same order give the same bodies.
#pragma once

#include <cstddef>
#include <vector>

#include "protocol/wire.pb.h"

namespace pollen::node {

class GossipPacker {
 public:
  // `budget_bytes`: the most a body may serialize to (at least 1).
  explicit GossipPacker(size_t budget_bytes);

  void AddDelta(wire::Delta&& delta);
  void AddEpoch(wire::FilterEpoch&& epoch);
  void AddCatalog(wire::CatalogEntry&& entry);
  void AddTombstone(wire::Tombstone&& tombstone);

  bool empty() const { return bodies_.empty() && current_bytes_ == 0; }
  // The packed bodies; leaves the packer empty.
  std::vector<wire::Gossip> Take();

 private:
  // Starts a new body if `part_bytes` more would not fit the current one.
  void MakeRoom(size_t part_bytes);

  size_t budget_;
  std::vector<wire::Gossip> bodies_;  // full bodies
  wire::Gossip current_;
  size_t current_bytes_ = 0;  // serialized size of current_
};

}  // namespace pollen::node
