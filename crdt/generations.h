// A filter as users see it: its pinned parameters and its last G generations.
//
// Writes go to the newest generation; reads test all of them (union), so a key
// added inside the window never reads absent because of a rotation. Each
// generation hashes under its own SipHash key (keyed_hash.h). Advancing to a
// higher epoch opens a generation for that epoch and drops those that fall out
// of the window [epoch - G + 1, epoch]; a lower or equal epoch changes nothing
// (epochs are a max-register).
//
// Thread safety: every method may run concurrently with every other. Reads and
// adds take no lock and never wait: the filter words are atomics, and the list
// of generations is an immutable window behind an atomic pointer, read inside a
// GracePeriod section (grace_period.h). Advance publishes a new window and
// frees the old one once no section can still hold it; Advances serialize.
#pragma once

#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/blocked_filter.h"
#include "crdt/grace_period.h"
#include "crdt/keyed_hash.h"

namespace pollen::crdt {

// The hash scheme names how keys become bits: SipHash-2-4 under the derived
// subkeys, then the probe sequence of crdt/block_probe.h. Scheme 1 (one
// multiply per probe) was replaced by 2 (fields of a seed) before any release;
// a snapshot or peer with another scheme is refused, never misread.
inline constexpr uint32_t kHashSchemeSipBlocked2 = 2;
inline constexpr uint32_t kMaxGenerations = 16;
// Filter names are binary-safe, like Redis keys: any bytes, empty included,
// up to this many. (Config files still take printable names only.)
inline constexpr size_t kMaxFilterNameBytes = 64u << 10;

// Parameters that two replicas must share to merge (DESIGN invariant 4),
// plus the generation count. Epochs and contents are state, not parameters.
struct FilterParams {
  std::string name;
  uint64_t filter_id = 0;  // FilterIdForName(name)
  FilterShape shape;
  uint32_t generations = 2;  // G
  uint32_t hash_scheme = kHashSchemeSipBlocked2;
  uint64_t key_id = 0;  // KeyIdForSecret(secret)
  friend bool operator==(const FilterParams&, const FilterParams&) = default;
};

// Checks name (0..kMaxFilterNameBytes bytes, any bytes), id matches name,
// shape, 1 <= generations <= kMaxGenerations, and a known hash scheme.
absl::Status ValidateParams(const FilterParams& params);

// Builds params from user-facing sizing.
absl::StatusOr<FilterParams> MakeParams(std::string_view name, uint64_t capacity, double fpr,
                                        uint32_t generations, const ClusterSecret& secret);

struct Generation {
  uint64_t epoch = 0;
  SipKey key;
  std::unique_ptr<BlockedFilter> filter;
};

// What an Add did: in which epoch, and the bits it newly set there.
struct KeyAdd {
  uint64_t epoch = 0;
  bool was_new = false;  // false: every bit was already set in the newest generation
  AddResult bits;
};

class GenerationSet {
 public:
  // Opens a single generation at `epoch`. Errors: invalid params or allocation.
  static absl::StatusOr<std::unique_ptr<GenerationSet>> Create(const FilterParams& params,
                                                               const ClusterSecret& secret,
                                                               uint64_t epoch);
  ~GenerationSet();
  GenerationSet(const GenerationSet&) = delete;
  GenerationSet& operator=(const GenerationSet&) = delete;
  const FilterParams& params() const { return params_; }

  uint64_t epoch() const;               // newest generation's epoch
  std::vector<uint64_t> epochs() const; // live epochs, ascending

  KeyAdd Add(std::string_view key);
  // Batch forms: keys go in batches of 16; a batch's blocks are prefetched
  // while the next batch is hashed, so SipHash work covers the cache misses.
  void AddMany(std::span<const std::string_view> keys, std::span<KeyAdd> out);
  bool MightContain(std::string_view key) const;
  void MightContainMany(std::span<const std::string_view> keys, std::span<bool> out) const;

  // Moves to `epoch` if it is higher than the current one. Returns true if it
  // moved. Generations older than epoch - G + 1 are dropped.
  absl::StatusOr<bool> Advance(uint64_t epoch);

  // The generation for `epoch`, or nullptr if it is not live. The shared_ptr
  // keeps it alive across a concurrent rotation.
  std::shared_ptr<const Generation> Find(uint64_t epoch) const;
  std::shared_ptr<const Generation> Newest() const;

  // ORs words into the generation of `epoch`. NotFound if that epoch is not
  // live (too old, or newer than ours: the caller advances first).
  absl::Status Merge(uint64_t epoch, std::span<const WordBits> words, std::vector<WordBits>* changed);

  // Replaces one generation's contents (used by snapshot loading): `epoch` must
  // be live and `words` of the right length (else error, nothing changes).
  absl::Status LoadWords(uint64_t epoch, std::span<const uint64_t> words);

 private:
  // Immutable once published; replaced whole by Advance.
  struct Window {
    std::vector<std::shared_ptr<Generation>> gens;  // ascending epochs, newest last
  };
  GenerationSet(FilterParams params, const ClusterSecret& secret);
  absl::StatusOr<std::shared_ptr<Generation>> Open(uint64_t epoch) const;
  // The current window, valid while `section` lives.
  const Window& window(const GracePeriod::Section& section) const;

  FilterParams params_;
  ClusterSecret secret_;  // needed to derive each new generation's key
  // Reads take no lock: they load window_ inside a GracePeriod section, and
  // Advance frees a replaced window only after GracePeriod::Synchronize.
  std::atomic<const Window*> window_{nullptr};  // owned
  mutable GracePeriod grace_;
  std::mutex advance_mu_;  // serializes Advance (writers only)
};

}  // namespace pollen::crdt
