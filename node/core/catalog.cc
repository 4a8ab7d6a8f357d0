#include "node/core/catalog.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "crdt/mix64.h"
#include "crdt/sizing.h"

static_assert(pollen::node::kFilterConfigHashScheme == pollen::crdt::kHashSchemeDefault);

namespace pollen::node {
namespace {

// Rotation intervals beyond ~292 years cannot be represented in ns anyway.
constexpr int64_t kMaxIntervalNs = int64_t{1} << 62;

}  // namespace

absl::Status ValidateFilterConfig(const FilterConfig& c) {
  if (c.name.size() > crdt::kMaxFilterNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("ERR filter name must be at most ", crdt::kMaxFilterNameBytes, " bytes"));
  }
  if (c.capacity == 0) return absl::InvalidArgumentError("ERR (capacity should be larger than 0)");
  if (!(c.fpr > 0 && c.fpr < 1)) return absl::InvalidArgumentError("ERR (0 < error rate range < 1)");
  if (c.generations < 1 || c.generations > crdt::kMaxGenerations) {
    return absl::InvalidArgumentError(absl::StrCat("ERR generations must be 1 to ", crdt::kMaxGenerations));
  }
  if (c.scope != Scope::kShared && c.scope != Scope::kDigest) return absl::InvalidArgumentError("ERR unknown scope");
  if (c.scope == Scope::kDigest && c.owner.empty()) return absl::InvalidArgumentError("ERR digest filter needs an owner");
  if (c.scope == Scope::kShared && !c.owner.empty()) return absl::InvalidArgumentError("ERR shared filter has no owner");
  if (c.owner.size() > kMaxOwnerBytes) return absl::InvalidArgumentError("ERR owner name too long");
  if (c.routed && c.scope != Scope::kShared) return absl::InvalidArgumentError("ERR a digest filter is not routed (its owner is its only writer)");
  if (!(c.rotate_fill >= 0 && c.rotate_fill < 1)) return absl::InvalidArgumentError("ERR rotate fill must be in [0, 1)");
  if (c.rotate_interval.count() < 0 || c.rotate_interval.count() > kMaxIntervalNs) {
    return absl::InvalidArgumentError("ERR rotate interval out of range");
  }
  if (c.expansion > crdt::kMaxExpansion) {
    return absl::InvalidArgumentError(absl::StrCat("ERR expansion must be at most ", crdt::kMaxExpansion));
  }
  // Both answer a full filter: rotate-fill by forgetting the oldest
  // generation, expansion by opening a larger layer (docs/crdt.md).
  if (c.expansion > 0 && c.rotate_fill > 0) {
    return absl::InvalidArgumentError("ERR a filter rotates by fill or scales, not both (set expansion 0 or rotate-fill 0)");
  }
  return absl::OkStatus();
}

absl::StatusOr<CatalogEntry> MakeCatalogEntry(const FilterConfig& config, const crdt::ClusterSecret& secret,
                                              uint64_t stamp, std::string creator) {
  if (absl::Status s = ValidateFilterConfig(config); !s.ok()) return s;
  absl::StatusOr<crdt::FilterParams> params =
      crdt::MakeParams(config.name, config.capacity, config.fpr, config.generations, secret, config.expansion,
                       config.hash_scheme);
  if (!params.ok()) return absl::InvalidArgumentError(absl::StrCat("ERR ", params.status().message()));
  CatalogEntry entry;
  entry.config = config;
  entry.params = *std::move(params);
  entry.stamp = stamp;
  entry.creator = std::move(creator);
  return entry;
}

std::string Descriptor(const CatalogEntry& e) {
  const FilterConfig& c = e.config;
  const crdt::FilterParams& p = e.params;
  return absl::StrCat(p.name, "|", p.filter_id, "|", p.shape.blocks, "|", p.shape.k, "|", p.generations, "|",
                      p.hash_scheme, "|", p.key_id, "|", c.capacity, "|", std::bit_cast<uint64_t>(c.fpr), "|",
                      static_cast<int>(c.scope), "|", c.owner, "|", std::bit_cast<uint64_t>(c.rotate_fill), "|",
                      c.rotate_interval.count(), "|", p.expansion, "|", p.capacity, "|",
                      std::bit_cast<uint64_t>(p.fpr), c.routed ? "|routed" : "");
}

bool Precedes(const CatalogEntry& a, const CatalogEntry& b) {
  const std::string da = Descriptor(a), db = Descriptor(b);
  return std::tie(a.stamp, da, a.creator) < std::tie(b.stamp, db, b.creator);
}

void ToWire(const crdt::FilterParams& p, wire::FilterRef* out) {
  out->set_name(p.name);
  out->set_filter_id(p.filter_id);
  out->set_blocks(p.shape.blocks);
  out->set_k(p.shape.k);
  out->set_generations(p.generations);
  out->set_hash_scheme(p.hash_scheme);
  out->set_key_id(p.key_id);
  out->set_expansion(p.expansion);
  out->set_capacity(p.capacity);
  out->set_fpr(p.fpr);
}

crdt::FilterParams Unvalidated(const wire::FilterRef& ref) {
  crdt::FilterParams p;
  p.name = ref.name();
  p.filter_id = ref.filter_id();
  p.shape = crdt::ShapeFor(ref.hash_scheme(), ref.blocks(), ref.k());  // parts: the scheme's, not on the wire
  p.generations = ref.generations();
  p.hash_scheme = ref.hash_scheme();
  p.key_id = ref.key_id();
  p.expansion = ref.expansion();
  p.capacity = ref.capacity();
  p.fpr = ref.fpr();
  return p;
}

absl::StatusOr<crdt::FilterParams> FromWire(const wire::FilterRef& ref) {
  if (ref.name().size() > crdt::kMaxFilterNameBytes) return absl::InvalidArgumentError("filter name too long");
  // A compact reference is resolved against local state (Node's
  // ParamsFromWire), never taken as parameters.
  if (ref.digest() != 0) return absl::InvalidArgumentError("a compact filter reference here");
  // Likewise an alias: only a tree push's receiver knows what it stands for
  // (HandleTree replaces it before decoding).
  if (ref.alias() != 0) return absl::InvalidArgumentError("a filter alias here");
  crdt::FilterParams p = Unvalidated(ref);
  if (absl::Status s = crdt::ValidateParams(p); !s.ok()) return s;
  return p;
}

uint64_t ParamsDigest(const crdt::FilterParams& p) {
  uint64_t h = 0x706c6e7265663031ULL;  // "plnref01"
  for (uint64_t v : {p.filter_id, p.shape.blocks, uint64_t{p.shape.k}, uint64_t{p.generations},
                     uint64_t{p.hash_scheme}, p.key_id, uint64_t{p.expansion}, p.capacity,
                     std::bit_cast<uint64_t>(p.fpr)}) {
    h = crdt::Mix64(h ^ v);
  }
  return h == 0 ? 1 : h;
}

void CompactRef(wire::FilterRef* ref) {
  assert(ref->digest() == 0);
  const uint64_t digest = ParamsDigest(Unvalidated(*ref));
  std::string name = std::move(*ref->mutable_name());
  ref->Clear();
  ref->set_name(std::move(name));
  ref->set_digest(digest);
}

bool IsCompactRef(const wire::FilterRef& ref) {
  return ref.digest() != 0 && ref.filter_id() == 0 && ref.blocks() == 0 && ref.k() == 0 && ref.generations() == 0 &&
         ref.hash_scheme() == 0 && ref.key_id() == 0 && ref.expansion() == 0 && ref.capacity() == 0 && ref.fpr() == 0;
}

void ToWire(const CatalogEntry& e, uint64_t epoch, wire::CatalogEntry* out) {
  ToWire(e.params, out->mutable_filter());
  out->set_capacity(e.config.capacity);
  out->set_fpr(e.config.fpr);
  out->set_scope(static_cast<uint32_t>(e.config.scope));
  out->set_owner(e.config.owner);
  out->set_rotate_fill(e.config.rotate_fill);
  out->set_rotate_interval_ns(static_cast<uint64_t>(e.config.rotate_interval.count()));
  out->set_stamp(e.stamp);
  out->set_creator(e.creator);
  out->set_epoch(epoch);
  out->set_routed(e.config.routed);
}

absl::StatusOr<CatalogEntry> FromWire(const wire::CatalogEntry& w) {
  absl::StatusOr<crdt::FilterParams> params = FromWire(w.filter());
  if (!params.ok()) return params.status();
  if (w.scope() > 1) return absl::InvalidArgumentError("unknown scope");
  if (w.rotate_interval_ns() > static_cast<uint64_t>(kMaxIntervalNs)) {
    return absl::InvalidArgumentError("rotate interval out of range");
  }
  if (w.creator().size() > kMaxOwnerBytes) return absl::InvalidArgumentError("creator name too long");
  CatalogEntry e;
  e.config.name = params->name;
  e.config.capacity = w.capacity();
  e.config.fpr = w.fpr();
  e.config.generations = params->generations;
  e.config.scope = w.scope() == 1 ? Scope::kDigest : Scope::kShared;
  e.config.owner = w.owner();
  e.config.rotate_fill = w.rotate_fill();
  e.config.rotate_interval = Duration(static_cast<int64_t>(w.rotate_interval_ns()));
  e.config.expansion = params->expansion;
  e.config.routed = w.routed();
  e.config.hash_scheme = params->hash_scheme;
  if (params->scaling() && (params->capacity != e.config.capacity || params->fpr != e.config.fpr)) {
    return absl::InvalidArgumentError("scaling parameters differ from the entry's capacity and rate");
  }
  if (absl::Status s = ValidateFilterConfig(e.config); !s.ok()) return s;
  e.params = *std::move(params);
  e.stamp = w.stamp();
  e.creator = w.creator();
  return e;
}

void ToWire(const Tombstone& t, wire::Tombstone* out) {
  out->set_name(t.name);
  out->set_deleted_through(t.deleted_through);
}

absl::StatusOr<Tombstone> FromWire(const wire::Tombstone& w) {
  if (w.name().size() > crdt::kMaxFilterNameBytes) return absl::InvalidArgumentError("tombstone name too long");
  return Tombstone{w.name(), w.deleted_through()};
}

}  // namespace pollen::node
