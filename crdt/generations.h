// A filter as users see it: its pinned parameters and its last G generations,
// each a stack of one or more layers (sub-filters) if the filter scales.
//
// Writes go to the newest layer of the newest generation; reads test all of
// them (union), so a key added inside the window never reads absent because
// of a rotation or a growth. Each
// generation hashes under its own SipHash key (keyed_hash.h). Advancing to a
// higher epoch opens a generation for that epoch and drops those that fall out
// of the window [epoch - G + 1, epoch]; a lower or equal epoch changes nothing
// (epochs are a max-register).
//
// Thread safety: every method may run concurrently with every other. Reads and
// adds take no lock and never wait: the filter words are atomics, and the list
// of generations is an immutable window behind an atomic pointer, read inside a
// GracePeriod section (grace_period.h). Advance and Grow publish a new window
// and free the old one once no section can still hold it; they serialize.
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
// Scheme 3: scheme 2's probe in each part of Layout::kSplit (sizing.h: at low
// rates a key's bits spread over 4 or 6 blocks), and the rate schedule of
// LayerFpr below that gives the first layer most of the rate. Filters made
// from now on use it unless made with scheme 2; a filter keeps its scheme for
// life (catalog entry, snapshots, dumps), and a peer that predates scheme 3
// refuses such a filter rather than misreading it.
inline constexpr uint32_t kHashSchemeSipSplit3 = 3;
inline constexpr uint32_t kHashSchemeDefault = kHashSchemeSipSplit3;
inline constexpr uint32_t kMaxGenerations = 16;
// Filter names are binary-safe, like Redis keys: any bytes, empty included,
// up to this many. (Config files still take printable names only.)
inline constexpr size_t kMaxFilterNameBytes = 64u << 10;

// A filter is a stack per generation when it scales (RedisBloom's scalable
// filter, EXPANSION): each generation starts with one sub-filter ("layer" 0)
// and opens layer L + 1 when layer L holds its capacity. Layer L is sized for
// capacity * expansion^L keys at the rate LayerFpr gives it. The rates of all
// layers sum to less than fpr, so the compound false-positive rate stays
// under the rate asked for however far the filter grows (docs/crdt.md,
// "Scaling"; RedisBloom keeps the same bound with p/2, p/4, ...):
//   scheme 2: layer L at fpr * (1 - r) * r^L, r = kTighteningRatio; the sum
//     is fpr * (1 - r^layers).
//   scheme 3: layer 0 at fpr * a, a = kFirstLayerShare, and layer L >= 1 at
//     fpr * (1 - a) * (1 - r) * r^(L - 1); the sum is fpr * (a + (1 - a) *
//     (1 - r^(layers - 1))).
// r = 0.9 was chosen for memory: with expansion 2 the last few layers hold
// most keys, and a rate r^L falls slowly over the 10-20 layers of a grown
// filter (the sizing model at p = 1%, capacity 1000, expansion 2: 1.83x /
// 3.13x / 2.62x a right-sized filter at 10^6 / 10^7 / 10^8 keys with r =
// 0.9, against 2.82x / 6.26x / 6.29x with RedisBloom's r = 0.5).
// a = 0.65 (scheme 3): a filter reserved at the capacity it ends up holding
// (the common case: RedisBloom's docs say to reserve it) is layer 0 alone,
// sized at 0.65 p where scheme 2 sized it at 0.1 p, 1.4x the bytes. The
// later layers share the other 0.35 p. Model, with Layout::kSplit, bits per
// key against RedisBloom's at p / 2 (docs/crdt.md, "Layouts"): a right-sized
// filter 0.987x / 0.973x / 0.986x / 0.993x at p = 1% / 0.1% / 0.01% / 1e-7,
// and a filter grown from 1000 to 10^7 keys at 1% 0.675x (0.667x before). a =
// 0.6 leaves 1% at 1.004x; a = 0.75 takes the grown filter to 0.70x.
inline constexpr double kFirstLayerShare = 0.65;
inline constexpr double kTighteningRatio = 0.9;
inline constexpr uint32_t kMaxLayers = 32;
inline constexpr uint32_t kMaxExpansion = 1u << 16;
// A sub-filter's slot: (epoch << kLayerBits) | layer. One number per
// sub-filter, for bookkeeping keyed by sub-filter (pending adds, summaries,
// bit counts). Epochs stay below 2^(64 - kLayerBits) (node/core/epochs.h).
inline constexpr uint32_t kLayerBits = 5;
static_assert(kMaxLayers == 1u << kLayerBits);
inline constexpr uint64_t SlotOf(uint64_t epoch, uint32_t layer) { return (epoch << kLayerBits) | layer; }
inline constexpr uint64_t EpochOfSlot(uint64_t slot) { return slot >> kLayerBits; }
inline constexpr uint32_t LayerOfSlot(uint64_t slot) { return static_cast<uint32_t>(slot & (kMaxLayers - 1)); }

// Parameters that two replicas must share to merge (DESIGN invariant 4),
// plus the generation count. Epochs, layers and contents are state, not
// parameters.
struct FilterParams {
  std::string name;
  uint64_t filter_id = 0;  // identity: FilterIdForName of the name it was created under
  FilterShape shape;       // layer 0's
  uint32_t generations = 2;  // G
  uint32_t hash_scheme = kHashSchemeDefault;
  uint64_t key_id = 0;  // KeyIdForSecret(secret)
  // Scaling filters only (expansion > 0): the sizing inputs every layer's
  // shape is derived from. All three are 0 for a fixed-size filter.
  uint32_t expansion = 0;
  uint64_t capacity = 0;
  double fpr = 0;
  bool scaling() const { return expansion > 0; }
  friend bool operator==(const FilterParams&, const FilterParams&) = default;
};

// Checks name (0..kMaxFilterNameBytes bytes, any bytes), id matches name,
// shape, 1 <= generations <= kMaxGenerations, a known hash scheme, the
// shape's parts as the scheme lays out its k (ShapeFor), and for a scaling
// filter expansion <= kMaxExpansion, capacity >= 1, 0 < fpr < 1 and shape ==
// LayerShape(params, 0).
absl::Status ValidateParams(const FilterParams& params);

// The layout a hash scheme uses (kOneBlock for an unknown one: ValidateParams refuses it).
Layout LayoutOf(uint32_t hash_scheme);
// A shape as a decoder meets it (blocks and k on the wire or on disk), with
// the parts its scheme gives k.
FilterShape ShapeFor(uint32_t hash_scheme, uint64_t blocks, uint32_t k);

// Builds params from user-facing sizing; expansion 0: a fixed-size filter.
absl::StatusOr<FilterParams> MakeParams(std::string_view name, uint64_t capacity, double fpr,
                                        uint32_t generations, const ClusterSecret& secret, uint32_t expansion = 0,
                                        uint32_t hash_scheme = kHashSchemeDefault);

// Keys layer `layer` is sized for (saturating); a fixed filter's one layer: 0.
uint64_t LayerCapacity(const FilterParams& params, uint32_t layer);
// The layer's target false-positive rate at its capacity (scaling filters).
double LayerFpr(const FilterParams& params, uint32_t layer);
// The shape of layer `layer`: params.shape for layer 0, else sized from
// LayerCapacity and LayerFpr. Errors: a fixed filter's layer > 0, layer >=
// kMaxLayers, or a layer too large to allocate (kMaxBlocks).
absl::StatusOr<FilterShape> LayerShape(const FilterParams& params, uint32_t layer);

// One Bloom filter of the stack: generation `epoch`, layer `layer`.
struct SubFilter {
  uint64_t epoch = 0;
  uint32_t layer = 0;
  uint64_t capacity = 0;  // LayerCapacity (0: a fixed filter, no limit here)
  // Layer 0 probes with SipHash under `key`; layer L > 0 with
  // RemixForLayer(that hash, salt): one SipHash per key per generation,
  // however many layers (see generations.cc).
  SipKey key;
  uint64_t salt = 0;
  std::unique_ptr<BlockedFilter> filter;
  // Keys this node counts in this layer: new keys added here, raised to the
  // driver's estimate from set bits (RaiseItems). Decides when to grow.
  mutable std::atomic<uint64_t> items{0};
  mutable std::atomic<bool> cannot_grow{false};  // the next layer could not be allocated
  // Set once bits arrive other than by Add (Merge, LoadWords: peers,
  // snapshots, BF.LOADCHUNK). Until then `items` is this node's exact count;
  // after, it needs the estimate from the bits as well.
  mutable std::atomic<bool> merged{false};
  uint64_t slot() const { return SlotOf(epoch, layer); }
};

// What an Add did: in which sub-filter, and the bits it newly set there.
struct KeyAdd {
  uint64_t slot = 0;
  bool was_new = false;  // false: the key tested present in its generation (no bit set)
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

  uint64_t epoch() const;                 // newest generation's epoch
  std::vector<uint64_t> epochs() const;   // live epochs, ascending
  std::vector<uint64_t> slots() const;    // live sub-filters, ascending (epoch, then layer)
  uint32_t layers(uint64_t epoch) const;  // layers of a live generation; 0 if not live

  // Adds to the newest layer of the newest generation. A scaling filter first
  // opens the next layer if the newest holds its capacity, and adds only keys
  // that test absent in the generation's other layers (as RedisBloom).
  KeyAdd Add(std::string_view key);
  // Batch forms: keys go in batches of 16; a batch's blocks are prefetched
  // while the next batch is hashed, so SipHash work covers the cache misses.
  void AddMany(std::span<const std::string_view> keys, std::span<KeyAdd> out);
  bool MightContain(std::string_view key) const;
  void MightContainMany(std::span<const std::string_view> keys, std::span<bool> out) const;

  // Moves to `epoch` if it is higher than the current one. Returns true if it
  // moved. Generations older than epoch - G + 1 are dropped.
  absl::StatusOr<bool> Advance(uint64_t epoch);
  // Opens layers of generation `epoch` until it has `count` (a max-register:
  // fewer changes nothing). Returns true if it opened any. NotFound if the
  // epoch is not live; InvalidArgument if the filter does not scale and
  // count > 1, or count > kMaxLayers; allocation errors leave it unchanged.
  absl::StatusOr<bool> Grow(uint64_t epoch, uint32_t count);

  // The sub-filter in `slot`, or nullptr if it is not live. The shared_ptr
  // keeps it alive across a concurrent rotation.
  std::shared_ptr<const SubFilter> Sub(uint64_t slot) const;
  std::shared_ptr<const SubFilter> NewestSub() const;  // newest layer of the newest generation

  // ORs words into the sub-filter in `slot`. NotFound if it is not live (the
  // epoch is too old, or the caller must Advance or Grow first).
  absl::Status Merge(uint64_t slot, std::span<const WordBits> words, std::vector<WordBits>* changed);

  // Replaces one sub-filter's contents (used by snapshot loading): `slot`
  // must be live and `words` of its length (else error, nothing changes).
  absl::Status LoadWords(uint64_t slot, std::span<const uint64_t> words);

  // Raises the sub-filter's item count to at least `items` (the driver's
  // estimate from its set bits, which counts keys added on other nodes).
  void RaiseItems(uint64_t slot, uint64_t items);

  // Scaling filters: whether `newest` holds its capacity (items) and may be
  // followed by another layer.
  static bool CanGrow(const SubFilter& newest);

 private:
  // Immutable once published; replaced whole by Advance and Grow.
  struct Window {
    std::vector<std::shared_ptr<SubFilter>> subs;  // ascending slots, newest last
  };
  GenerationSet(FilterParams params, const ClusterSecret& secret);
  absl::StatusOr<std::shared_ptr<SubFilter>> Open(uint64_t epoch, uint32_t layer) const;
  // The current window, valid while `section` lives.
  const Window& window(const GracePeriod::Section& section) const;
  // Publishes `next` and frees the current window after a grace period.
  // Caller holds writer_mu_.
  void Replace(std::unique_ptr<Window> next);
  // Scaling filters: opens the next layer of the newest generation if
  // CanGrow(newest). Call it outside any section.
  void GrowIfFull();
  // Scaling AddMany: in runs that fit the newest layer's remaining capacity.
  void AddManyScaling(std::span<const std::string_view> keys, std::span<KeyAdd> out);

  FilterParams params_;
  ClusterSecret secret_;  // needed to derive each new generation's key
  // Reads take no lock: they load window_ inside a GracePeriod section, and
  // a writer frees a replaced window only after GracePeriod::Synchronize.
  std::atomic<const Window*> window_{nullptr};  // owned
  mutable GracePeriod grace_;
  std::mutex writer_mu_;  // serializes Advance and Grow (writers only)
};

}  // namespace pollen::crdt
