// Mix64: SplitMix64's finalizer (Steele, Lea, Flood 2014). A bijection on 64
// bits in which every input bit flips each output bit with probability about
// 1/2: scores, remixed hashes, folds and PRNG outputs that must depend on
// every bit of their inputs use it. Not a keyed hash: never for anything an
// attacker could choose inputs against where that matters (SipHash is).
#pragma once

#include <cstdint>

namespace pollen::crdt {

inline constexpr uint64_t kMix64Mul1 = 0xbf58476d1ce4e5b9ULL;
inline constexpr uint64_t kMix64Mul2 = 0x94d049bb133111ebULL;

constexpr uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * kMix64Mul1;
  x = (x ^ (x >> 27)) * kMix64Mul2;
  return x ^ (x >> 31);
}

// The Weyl-sequence increment SplitMix64 adds before each Mix64 (2^64 / phi).
inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

}  // namespace pollen::crdt
