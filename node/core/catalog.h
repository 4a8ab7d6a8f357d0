// Catalog: the replicated set of filters, and the rule that picks one winner
// when two nodes create the same name with different parameters.
//
// An entry is a filter's pinned parameters (crdt::FilterParams), its policy
// (capacity, fpr, scope, owner, rotation) and a creation stamp. Filters declared
// in config carry stamp 0 and creator "", so nodes with the same config hold
// byte-identical entries. Two entries for one name conflict when their
// descriptors (everything but stamp and creator) differ; the winner is the
// smaller (stamp, descriptor, creator), a total order every node evaluates the
// same way, so every node keeps the same winner whatever the arrival order.
//
// Deletion (DEL/UNLINK) adds a tombstone: (name, deleted_through), where
// deleted_through is the stamp of the entry the deleting node held. Every
// entry for that name with stamp <= deleted_through is dead: it is removed
// where it is live and refused wherever it arrives later, so a deleted filter
// never comes back. Tombstones merge as a max-register per name. A creation
// after the delete gets a stamp above deleted_through (Node::Reserve takes
// max(now, deleted_through + 1)), so it is a new filter that the tombstone
// does not touch. A creation concurrent with the delete (on a node that had
// not seen the deleted entry) survives if its stamp is above deleted_through:
// the delete removes what its node saw, not what it never saw. Per name the
// state is therefore (highest tombstone, winner among entries above it), and
// both parts merge order-independently.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "crdt/generations.h"
#include "node/core/types.h"
#include "protocol/wire.pb.h"

namespace pollen::node {

inline constexpr size_t kMaxOwnerBytes = 255;
inline constexpr size_t kMaxFilters = 1024;  // catalog size bound
// Tombstones kept per node. Beyond it the one with the lowest deleted_through
// (the oldest deletion) is forgotten and counted (tombstones_dropped); an
// entry it covered could then come back only from a node that still held it
// after all that time. The bound keeps memory finite under churn of names.
inline constexpr size_t kMaxTombstones = 4096;

struct CatalogEntry {
  FilterConfig config;
  crdt::FilterParams params;
  uint64_t stamp = 0;
  std::string creator;
};

// Checks a user-facing filter declaration: name, capacity, fpr, generations,
// scope and owner, rotation policy.
absl::Status ValidateFilterConfig(const FilterConfig& config);

// Sizes and pins a declaration under `secret`.
absl::StatusOr<CatalogEntry> MakeCatalogEntry(const FilterConfig& config, const crdt::ClusterSecret& secret,
                                              uint64_t stamp, std::string creator);

// Everything but stamp and creator, in a canonical byte form.
std::string Descriptor(const CatalogEntry& entry);

// True if `a` beats `b` (a total order: false for identical entries).
bool Precedes(const CatalogEntry& a, const CatalogEntry& b);

// Wire conversions. The From* forms validate everything (ValidateParams,
// ValidateFilterConfig, consistency of name and params) and never touch state.
void ToWire(const crdt::FilterParams& params, wire::FilterRef* out);
absl::StatusOr<crdt::FilterParams> FromWire(const wire::FilterRef& ref);
// The fields of `ref` as parameters, nothing checked (FromWire checks them).
crdt::FilterParams Unvalidated(const wire::FilterRef& ref);
void ToWire(const CatalogEntry& entry, uint64_t epoch, wire::CatalogEntry* out);
absl::StatusOr<CatalogEntry> FromWire(const wire::CatalogEntry& entry);

// Compact filter references (wire.proto, FilterRef.digest): a tree push names
// a filter its neighbour already holds by its name and a 64-bit digest of the
// other pinned fields: 23 bytes for "crawl:seen" instead of 42 (a fixed-size
// filter) or ~60 (a scaling one), of a one-key push's ~157. ParamsDigest is
// never 0 (0 marks the full form); equal parameters give equal digests,
// different ones collide with probability ~2^-64.
inline constexpr uint32_t kTreeFeatureCompactRefs = 1;  // TreeBeacon.features bit
// Tree frames without the sender's address (NodeConfig::tree_implicit_sender):
// the neighbour finds it in its member list. 17 of a one-key push's ~125
// bytes on loopback addresses, more for longer ones.
inline constexpr uint32_t kTreeFeatureImplicitSender = 2;  // TreeBeacon.features bit
// Link-scoped filter aliases in tree pushes (NodeConfig::tree_filter_aliases,
// filter_aliases.h): 3 bytes instead of a compact reference's ~21.
inline constexpr uint32_t kTreeFeatureFilterAliases = 4;  // TreeBeacon.features bit
// Bare tree pushes (NodeConfig::tree_bare_pushes): no version, sender name
// or address in the envelope; the neighbour attributes the push by its seal's
// sender id, learned from a named frame. 13 bytes of a one-key push of ~90.
inline constexpr uint32_t kTreeFeatureBarePushes = 8;  // TreeBeacon.features bit
// Tree frames sealed with the compact header (NodeConfig::tree_compact_seal,
// protocol/seal.h SealForm::kCompact): 13 bytes of header instead of 25.
inline constexpr uint32_t kTreeFeatureCompactSeal = 16;  // TreeBeacon.features bit
uint64_t ParamsDigest(const crdt::FilterParams& params);
// Rewrites a full reference in place to its compact form.
void CompactRef(wire::FilterRef* ref);
// A compact reference: digest set and nothing but the name beside it. (A
// digest with other fields set is neither form: malformed.)
bool IsCompactRef(const wire::FilterRef& ref);

struct Tombstone {
  std::string name;
  uint64_t deleted_through = 0;
  friend bool operator==(const Tombstone&, const Tombstone&) = default;
};
// True if `entry` is dead under `tombstone` (same name assumed).
inline bool Covers(const Tombstone& tombstone, const CatalogEntry& entry) {
  return entry.stamp <= tombstone.deleted_through;
}
void ToWire(const Tombstone& tombstone, wire::Tombstone* out);
absl::StatusOr<Tombstone> FromWire(const wire::Tombstone& tombstone);

}  // namespace pollen::node
