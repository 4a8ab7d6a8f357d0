#include "node/core/gossip_packer.h"

#include <cassert>
#include <utility>

#include "google/protobuf/io/coded_stream.h"

namespace pollen::node {
namespace {

// Bytes a repeated message field of `size` bytes adds: tag (1 byte for field
// numbers below 16) + length varint + the message.
size_t FieldBytes(size_t size) {
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(size) + size;
}

}  // namespace

GossipPacker::GossipPacker(size_t budget_bytes) : budget_(budget_bytes) { assert(budget_bytes >= 1); }

void GossipPacker::MakeRoom(size_t part_bytes) {
  if (current_bytes_ > 0 && current_bytes_ + part_bytes > budget_) {
    bodies_.push_back(std::move(current_));
    current_.Clear();
    current_bytes_ = 0;
  }
  current_bytes_ += part_bytes;
}

void GossipPacker::AddDelta(wire::Delta&& delta) {
  MakeRoom(FieldBytes(delta.ByteSizeLong()));
  *current_.add_deltas() = std::move(delta);
}

void GossipPacker::AddEpoch(wire::FilterEpoch&& epoch) {
  MakeRoom(FieldBytes(epoch.ByteSizeLong()));
  *current_.add_epochs() = std::move(epoch);
}

void GossipPacker::AddCatalog(wire::CatalogEntry&& entry) {
  MakeRoom(FieldBytes(entry.ByteSizeLong()));
  *current_.add_catalog() = std::move(entry);
}

void GossipPacker::AddTombstone(wire::Tombstone&& tombstone) {
  MakeRoom(FieldBytes(tombstone.ByteSizeLong()));
  *current_.add_tombstones() = std::move(tombstone);
}

std::vector<wire::Gossip> GossipPacker::Take() {
  if (current_bytes_ > 0) {
    bodies_.push_back(std::move(current_));
    current_.Clear();
    current_bytes_ = 0;
  }
  std::vector<wire::Gossip> out;
  out.swap(bodies_);
  return out;
}

}  // namespace pollen::node
