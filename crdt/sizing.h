// Sizing math for the blocked Bloom filter.
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
// 2^27 blocks = 8 GiB. Larger filters are refused rather than clamped.
inline constexpr uint64_t kMaxBlocks = uint64_t{1} << 27;

struct FilterShape {
  uint64_t blocks = 0;
  uint32_t k = 0;
  uint64_t bits() const { return blocks * kBlockBits; }
  uint64_t bytes() const { return blocks * 64; }
  friend bool operator==(const FilterShape&, const FilterShape&) = default;
};

// Checks that blocks and k are within the limits above.
absl::Status ValidateShape(FilterShape shape);

// The model's false-positive rate for n keys in `shape`.
double ExpectedFpr(FilterShape shape, double n);

// The smallest filter (fewest blocks, then the best k for it) whose model FPR
// at `capacity` keys is at most `fpr`. Errors: capacity 0, fpr outside (0, 1),
// or a result larger than kMaxBlocks.
absl::StatusOr<FilterShape> ChooseShape(uint64_t capacity, double fpr);

// ChooseShape, memoized: it is a pure function but costs milliseconds (it
// sums the blocked model over many candidate sizes), and validating a
// scaling filter's parameters (every peer's reference) needs it. A bounded,
// mutex-guarded cache, so it changes no result. Any thread.
absl::StatusOr<FilterShape> ChooseShapeCached(uint64_t capacity, double fpr);

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
