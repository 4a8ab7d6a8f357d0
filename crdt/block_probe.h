// The probe sequence: which block and which k bits of it a 64-bit hash names.
// Shared by the scalar probe (blocked_filter.cc) and the AVX-512 one
// (block_probe_avx512.cc), which must name exactly the same bits.
//
// Block: the high half of hash * blocks (multiply-shift: uniform over any block
// count, no division).
//
// Positions (hash scheme 2): a 64-bit seed holds seven 9-bit fields (bits 0-8,
// 9-17, ..., 54-62); probe i takes field i % 7 of seed i / 7. The first seed is
// (h ^ (h >> 29)) * C1: an odd multiply is a bijection, so for a uniform hash
// the seed is uniform and its low fields depend only on hash bits that did not
// choose the block (the block uses the top bits). Later seeds (k > 7) fold the
// high half down before multiplying, so their low fields depend on every bit of
// the previous seed rather than repeating its low fields.
//
// Why fields rather than one multiply per probe (scheme 1): fields are a shift
// and a mask, so the k positions of a key cost 1-4 multiplies instead of k, and
// all of them fit the 8 lanes of one AVX-512 register. Measured on this machine
// (2.3 GHz Xeon, 64 KiB filter, k = 7): the probe alone 6.6 ns scalar, 3.2 ns
// AVX-512, against ~8 ns for scheme 1. FPR: tests/crdt/fpr_test.cc checks it
// against the blocked model's 99.9% interval at p = 1% (k = 7) and p = 0.1%
// (k = 10, two seeds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "crdt/mix64.h"
#include "crdt/sizing.h"

namespace pollen::crdt::probe {

inline constexpr uint32_t kFieldBits = 9;  // log2(512 bits in a block)
inline constexpr uint32_t kFieldsPerSeed = 7;
inline constexpr uint32_t kMaxSeeds = (kMaxK + kFieldsPerSeed - 1) / kFieldsPerSeed;
inline constexpr uint64_t kSeedMix = 0x9E3779B97F4A7C15ULL;   // 2^64 / golden ratio, odd
inline constexpr uint64_t kSeedStep = 0xD6E8FEB86659FD93ULL;  // odd, good spectral test

inline uint64_t BlockOf(uint64_t hash, uint64_t blocks) {
  __extension__ typedef unsigned __int128 Uint128;
  return static_cast<uint64_t>((static_cast<Uint128>(hash) * blocks) >> 64);
}

inline uint64_t FirstSeed(uint64_t hash) { return (hash ^ (hash >> 29)) * kSeedMix; }
inline uint64_t NextSeed(uint64_t seed) { return (seed ^ (seed >> 32)) * kSeedStep; }

// Calls fn(position) for the k in-block bit positions (0..511) of `hash`.
template <class Fn>
inline void ForEachPosition(uint64_t hash, uint32_t k, Fn&& fn) {
  uint64_t seed = FirstSeed(hash);
  uint32_t field = 0;
  for (uint32_t i = 0; i < k; ++i) {
    if (field == kFieldsPerSeed) {
      seed = NextSeed(seed);
      field = 0;
    }
    fn((seed >> (kFieldBits * field)) & 511);
    ++field;
  }
}

// Shapes of several parts (hash scheme 3, sizing.h): part i of a key probes
// with PartHash(hash, i), which picks its block and its k / parts positions
// exactly as above. Part 0 is the hash itself; later parts a bijective remix
// of it, so the parts' blocks are independent for a uniform hash (what the
// sizing model assumes).
inline uint64_t PartHash(uint64_t hash, uint32_t part) {
  return part == 0 ? hash : Mix64(hash + part * kGoldenGamma);
}

// True if this CPU runs the AVX-512 probe (and the build allows it: not under
// ThreadSanitizer, which cannot see that a vector load of a block is per-word
// atomic on x86 and would report the word-level races as data races).
bool VectorProbeAvailable();

// All k bits of `hash` set in the 8-word `block`? The AVX-512 form; call only
// if VectorProbeAvailable(). `block` is 64-byte aligned.
bool BlockHasAllVector(const uint64_t* block, uint64_t hash, uint32_t k);

// out[i] = BlockHasAllVector(block of hashes[i], hashes[i], k) for every i, over
// a filter of `blocks` blocks at `words`, prefetching `prefetch_distance` keys
// ahead (0: none; rounded up to groups of 8, at most 240). Addresses and seeds
// are computed 8 keys per vector instruction and no call is made per key:
// 2-2.3x the throughput of a BlockHasAllVector call per key (measurements in
// block_probe_avx512.cc).
void BlocksHaveAllVector(const uint64_t* words, uint64_t blocks, uint32_t k, std::span<const uint64_t> hashes,
                         std::span<bool> out, size_t prefetch_distance);

// out[i] = Mix64(hashes[i] ^ salt) (crdt/mix64.h), 8 per instruction.
// Written with intrinsics rather than left to the vectorizer, which GCC 12
// does not apply to this loop at -O2. Call only if VectorProbeAvailable().
void RemixVector(std::span<const uint64_t> hashes, uint64_t salt, std::span<uint64_t> out);

}  // namespace pollen::crdt::probe
