// Sizing math for the blocked Bloom filter.
//
// (Below, one part per key. A shape with `parts` > 1 splits each key's k bits
// evenly over `parts` blocks, each chosen by its own hash: a block then holds
// J ~ Poisson(parts * n / B) key-parts of k / parts bits each, and a non-member
// passes with probability E[f(J)]^parts. Spreading a key's bits averages the
// block loads, which is what makes a blocked filter need more bits than a
// classic one; docs/crdt.md, "Layouts".)
//
// A blocked filter with B blocks of 512 bits and k probes per key puts each key
// in one block chosen uniformly at random, so the number of keys in a block is
// Binomial(n, 1/B) ~ Poisson(lambda = n / B). A block holding j keys answers a
// non-member with probability f(j) = (1 - (1 - 1/512)^(j k))^k (k independent
// positions, drawn with replacement). The filter's false-positive rate is the
// expectation E[f(J)], J ~ Poisson(lambda). This is noticeably worse than the
// classic (1 - e^{-kn/m})^k at the same bits per key, because loaded blocks
// hurt more than light ones help; sizing with the classic formula under-provisions.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace pollen::crdt {

inline constexpr uint32_t kBlockBits = 512;
inline constexpr uint32_t kWordsPerBlock = 8;
inline constexpr uint32_t kMinK = 1;
inline constexpr uint32_t kMaxK = 24;
inline constexpr uint32_t kMaxParts = 6;
inline constexpr uint32_t kMaxBitsPerPart = 6;  // k / parts, for parts > 1 (AddResult packs them)
// 2^27 blocks = 8 GiB. Larger filters are refused rather than clamped.
inline constexpr uint64_t kMaxBlocks = uint64_t{1} << 27;

struct FilterShape {
  uint64_t blocks = 0;
  uint32_t k = 0;
  uint32_t parts = 1;  // blocks per key, each holding k / parts of its bits
  uint64_t bits() const { return blocks * kBlockBits; }
  uint64_t bytes() const { return blocks * 64; }
  friend bool operator==(const FilterShape&, const FilterShape&) = default;
};

// Checks that blocks, k and parts are within the limits above, that parts
// divides k, and that a shape of several parts has at most kMaxBitsPerPart
// bits in each.
absl::Status ValidateShape(FilterShape shape);

// How the k bits of a key are laid out, as a function of k (so that a shape
// needs no field on the wire beyond blocks and k: the filter's hash scheme
// names the layout, crdt/generations.h).
//   kOneBlock: every k in one block (hash scheme 2).
//   kSplit: k <= 11 in one block, 12..17 over 4 blocks, 18..24 over 6 (k a
//     multiple of the parts; hash scheme 3). Low rates need large k, where one
//     block costs most: at 1e-7 one block needs 49.4 bits per key, six need
//     33.8, against the classic 33.5 (tables in docs/crdt.md, "Layouts").
enum class Layout { kOneBlock, kSplit };
uint32_t PartsFor(Layout layout, uint32_t k);

// The model's false-positive rate for n keys in `shape`.
double ExpectedFpr(FilterShape shape, double n);

// The smallest filter (fewest blocks, then the best k for it) of `layout`
// whose model FPR at `capacity` keys is at most `fpr`. Errors: capacity 0,
// fpr outside (0, 1), or a result larger than kMaxBlocks.
absl::StatusOr<FilterShape> ChooseShape(uint64_t capacity, double fpr, Layout layout = Layout::kOneBlock);

// ChooseShape, memoized: it is a pure function but costs milliseconds (it
// sums the blocked model over many candidate sizes), and validating a
// scaling filter's parameters (every peer's reference) needs it. A bounded,
// mutex-guarded cache, so it changes no result. Any thread.
absl::StatusOr<FilterShape> ChooseShapeCached(uint64_t capacity, double fpr, Layout layout = Layout::kOneBlock);

// Estimated number of distinct keys added, from the number of set bits.
// Inverts the expected fill E[set bits](n) of the blocked model by bisection.
double EstimateCardinality(FilterShape shape, uint64_t set_bits);

// An estimate as an item count: negative -> 0, infinite (every bit set) or
// past 2^63 -> 2^63 (a cast of either would be undefined).
inline uint64_t ItemsFromEstimate(double items) {
  if (!(items > 0)) return 0;
  return items >= 9.2e18 ? uint64_t{1} << 63 : static_cast<uint64_t>(items);
}

// Estimated current FPR from the number of set bits (via EstimateCardinality).
double EstimateFpr(FilterShape shape, uint64_t set_bits);

// Expected number of set bits after n distinct keys, under the blocked model.
double ExpectedSetBits(FilterShape shape, double n);

// EstimateCardinality and EstimateFpr of one fill, memoized process-wide:
// both are pure, but each costs a bisection over the model (~10 us), and
// every node of a cluster asks for the same fills as the same keys reach it
// (pollen-sim N=1000: a per-node cache left this at 5-10% of the CPU). A
// bounded, mutex-guarded cache, so it changes no result. Any thread.
struct FillEstimate {
  double items = 0;
  double fpr = 0;
};
FillEstimate EstimateFillCached(FilterShape shape, uint64_t set_bits);

}  // namespace pollen::crdt
