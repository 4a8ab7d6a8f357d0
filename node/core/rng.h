// Rng: a small deterministic PRNG (xoshiro256**, seeded through SplitMix64).
// Everything in node/core and simulation/ that needs randomness takes one of
// these, seeded from a configured seed, so a run replays from its seed.
#pragma once

#include <cassert>
#include <cstdint>

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
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace pollen::node
