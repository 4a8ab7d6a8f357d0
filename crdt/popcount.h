// Bit count of a 64-bit word, inline.
//
// The binaries target baseline x86-64 (no -mpopcnt, so they run anywhere),
// where std::popcount is an out-of-line libgcc call (__popcountdi2: 3% of
// pollen-sim N=100 CPU; perf, 2026-11-21). This SWAR count is a handful of
// inline ALU instructions.
#pragma once

#include <cstdint>

namespace pollen::crdt {

inline uint64_t Popcount64(uint64_t v) {
  v = v - ((v >> 1) & 0x5555555555555555ULL);
  v = (v & 0x3333333333333333ULL) + ((v >> 2) & 0x3333333333333333ULL);
  v = (v + (v >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return (v * 0x0101010101010101ULL) >> 56;
}

}  // namespace pollen::crdt
