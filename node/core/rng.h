// Rng: a small deterministic PRNG (xoshiro256**, seeded through SplitMix64).
// Everything in node/core and simulation/ that needs randomness takes one of
// these, seeded from a configured seed, so a run replays from its seed.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "crdt/mix64.h"

namespace pollen::node {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : s_) word = SplitMix(seed);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, bound), bound > 0 (multiply-shift; bias < bound / 2^64).
  uint64_t Below(uint64_t bound) {
    assert(bound > 0);
    __extension__ typedef unsigned __int128 Uint128;
    return static_cast<uint64_t>((static_cast<Uint128>(Next()) * bound) >> 64);
  }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // A child stream: independent of this one's future outputs in practice.
  Rng Fork() { return Rng(Next() ^ 0x9e3779b97f4a7c15ULL); }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t& state) {
    return crdt::Mix64(state += crdt::kGoldenGamma);
  }
  uint64_t s_[4];
};

// min(k, n) distinct indices drawn uniformly from [0, n), in draw order.
// For k small against n (gossip fanout out of thousands of members) it draws
// and rejects repeats: O(k) expected work, never O(n). Otherwise a partial
// Fisher-Yates over the n indices. Deterministic for a given rng state.
inline std::vector<size_t> PickDistinct(Rng& rng, size_t n, size_t k) {
  k = std::min(k, n);
  std::vector<size_t> chosen;
  chosen.reserve(k);
  if (k * 4 > n) {
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    for (size_t i = 0; i < k; ++i) std::swap(all[i], all[i + rng.Below(n - i)]);
    chosen.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
    return chosen;
  }
  // At most a quarter of [0, n) is taken, so each draw is new with
  // probability >= 3/4: this loop ends after < 4k/3 draws on average.
  while (chosen.size() < k) {
    const size_t i = rng.Below(n);
    if (std::find(chosen.begin(), chosen.end(), i) == chosen.end()) chosen.push_back(i);
  }
  return chosen;
}

}  // namespace pollen::node
