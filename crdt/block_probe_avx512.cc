// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which its
// -Wmaybe-uninitialized reports as a use of an uninitialized value (a false
// positive: every lane is written before use).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cassert>

#include "crdt/block_probe.h"

namespace pollen::crdt::probe {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kVectorAllowed = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kVectorAllowed = false;
#else
constexpr bool kVectorAllowed = true;
#endif
#else
constexpr bool kVectorAllowed = true;
#endif

// Lane i of pass q is probe 8q + i: seed (8q + i) / 7, field (8q + i) % 7.
// `bit_shift` brings the lane's 9-bit field to the bottom; `word_shift` brings
// the field's top 3 bits (the word of the block) to the bottom.
constexpr uint32_t kPasses = (kMaxK + 7) / 8;
struct LaneTables {
  alignas(64) uint64_t seed[kPasses][8];
  alignas(64) uint64_t bit_shift[kPasses][8];
  alignas(64) uint64_t word_shift[kPasses][8];
  alignas(64) uint64_t ones[8];
  uint8_t lanes[kMaxK + 1];  // lanes[k]: the lanes of a single pass with k probes
};

constexpr LaneTables MakeLaneTables() {
  LaneTables t{};
  for (uint32_t q = 0; q < kPasses; ++q) {
    for (uint32_t lane = 0; lane < 8; ++lane) {
      const uint32_t probe = 8 * q + lane;
      t.seed[q][lane] = probe / kFieldsPerSeed < kMaxSeeds ? probe / kFieldsPerSeed : 0;
      t.bit_shift[q][lane] = kFieldBits * (probe % kFieldsPerSeed);
      t.word_shift[q][lane] = kFieldBits * (probe % kFieldsPerSeed) + 6;
    }
  }
  for (uint64_t& one : t.ones) one = 1;
  for (uint32_t k = 0; k <= kMaxK; ++k) t.lanes[k] = static_cast<uint8_t>(k >= 8 ? 0xFF : (1u << k) - 1);
  return t;
}
constexpr LaneTables kLanes = MakeLaneTables();

// Tests the probes of one pass against the block (one zmm register): which of
// the 8 lanes found their bit clear. Per lane, with f the lane's 9-bit field:
//   word = block word f >> 6    permutexvar reads only the index's low 3 bits,
//                               so seed >> (shift + 6) needs no mask;
//   bit  = word rotated right by f & 63, tested at bit 0
//                               rorv takes its count mod 64, so seed >> shift
//                               needs no mask either.
// Five vector instructions for 8 probes. The probe shares the ALU ports with
// the SipHash before it (the pair is port-bound: ~4.7 uops/cycle), so every
// instruction saved here shows: the earlier form (shift, mask, shift, permute,
// mask, variable shift, test: 8 per pass) cost 6.3 ns over SipHash in
// BM_TestMember/0/16, this one 4.1 (21.7 ns against 17.6 for SipHash alone;
// bench/crdt/ratios.py, same run).
__attribute__((target("avx512f"))) inline __mmask8 ClearLanes(__m512i words, __m512i seeds, uint32_t q, __mmask8 lanes) {
  const __m512i word = _mm512_permutexvar_epi64(_mm512_srlv_epi64(seeds, _mm512_load_si512(kLanes.word_shift[q])), words);
  const __m512i bit = _mm512_rorv_epi64(word, _mm512_srlv_epi64(seeds, _mm512_load_si512(kLanes.bit_shift[q])));
  // Constants come from memory (a load port) rather than being built in
  // registers (two ALU uops each), as the ports are the bottleneck.
  return _mm512_mask_testn_epi64_mask(lanes, bit, _mm512_load_si512(kLanes.ones));
}

__mmask8 LanesOfPass(uint32_t k, uint32_t q) { return kLanes.lanes[std::min(k - 8 * q, kMaxK)]; }

}  // namespace

bool VectorProbeAvailable() {
  if constexpr (!kVectorAllowed) return false;
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

__attribute__((target("avx512f"))) bool BlockHasAllVector(const uint64_t* block, uint64_t hash, uint32_t k) {
  assert(k >= 1 && k <= kMaxK);
  const __m512i words = _mm512_load_si512(block);
  uint64_t seed = FirstSeed(hash);
  // k <= 7 (p = 1% gives k = 7): one seed, broadcast to every lane.
  if (k <= kFieldsPerSeed) {
    return ClearLanes(words, _mm512_set1_epi64(static_cast<long long>(seed)), 0, LanesOfPass(k, 0)) == 0;
  }
  // Seed j goes to lane j, built in registers (a vector load of seeds just
  // stored one by one would stall on store forwarding: ~7 ns measured); each
  // pass then permutes every lane's seed into place.
  __m512i seed_vector = _mm512_set1_epi64(static_cast<long long>(seed));
  for (uint32_t j = 1; j * kFieldsPerSeed < k; ++j) {
    seed = NextSeed(seed);
    seed_vector = _mm512_mask_set1_epi64(seed_vector, static_cast<__mmask8>(1u << j), static_cast<long long>(seed));
  }
  for (uint32_t q = 0; q * 8 < k; ++q) {
    const __m512i seeds = _mm512_permutexvar_epi64(_mm512_load_si512(kLanes.seed[q]), seed_vector);
    if (ClearLanes(words, seeds, q, LanesOfPass(k, q)) != 0) return false;
  }
  return true;
}

}  // namespace pollen::crdt::probe
