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
void ToWire(const CatalogEntry& entry, uint64_t epoch, wire::CatalogEntry* out);
absl::StatusOr<CatalogEntry> FromWire(const wire::CatalogEntry& entry);

}  // namespace pollen::node
