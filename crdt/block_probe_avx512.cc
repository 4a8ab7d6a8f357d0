// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which its
// -Wmaybe-uninitialized reports as a use of an uninitialized value (a false
// positive: every lane is written before use).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

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
constexpr uint32_t kPasses = (kMaxK + 7) / 8;
struct LaneTables {
  alignas(64) uint64_t seed[kPasses][8];
  alignas(64) uint64_t shift[kPasses][8];
};

constexpr LaneTables MakeLaneTables() {
  LaneTables t{};
  for (uint32_t q = 0; q < kPasses; ++q) {
    for (uint32_t lane = 0; lane < 8; ++lane) {
      const uint32_t probe = 8 * q + lane;
      t.seed[q][lane] = probe / kFieldsPerSeed < kMaxSeeds ? probe / kFieldsPerSeed : 0;
      t.shift[q][lane] = kFieldBits * (probe % kFieldsPerSeed);
    }
  }
  return t;
}
constexpr LaneTables kLanes = MakeLaneTables();

}  // namespace

bool VectorProbeAvailable() {
  if constexpr (!kVectorAllowed) return false;
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

// One pass tests 8 probes: broadcast the seeds to the lanes, shift each lane's
// field down, mask to 9 bits, pick each lane's word of the block with a lane
// permute (the block is one zmm register), shift the bit down and test it.
// About 10 instructions for 8 probes against ~7 per probe in the scalar form.
__attribute__((target("avx512f"))) bool BlockHasAllVector(const uint64_t* block, uint64_t hash, uint32_t k) {
  assert(k >= 1 && k <= kMaxK);
  // Seed j goes to lane j, built in registers: a vector load of seeds just
  // stored one by one would stall on store forwarding (~7 ns measured).
  uint64_t seed = FirstSeed(hash);
  __m512i seed_vector = _mm512_set1_epi64(static_cast<long long>(seed));
  for (uint32_t j = 1; j * kFieldsPerSeed < k; ++j) {
    seed = NextSeed(seed);
    seed_vector = _mm512_mask_set1_epi64(seed_vector, static_cast<__mmask8>(1u << j), static_cast<long long>(seed));
  }
  const __m512i words = _mm512_load_si512(block);
  const __m512i field_mask = _mm512_set1_epi64(511);
  const __m512i bit_mask = _mm512_set1_epi64(63);
  const __m512i one = _mm512_set1_epi64(1);
  for (uint32_t q = 0; q * 8 < k; ++q) {
    const __m512i source = _mm512_permutexvar_epi64(_mm512_load_si512(kLanes.seed[q]), seed_vector);
    const __m512i position = _mm512_and_si512(_mm512_srlv_epi64(source, _mm512_load_si512(kLanes.shift[q])), field_mask);
    const __m512i word = _mm512_permutexvar_epi64(_mm512_srli_epi64(position, 6), words);
    const __m512i bit = _mm512_srlv_epi64(word, _mm512_and_si512(position, bit_mask));
    const uint32_t lanes = k - 8 * q >= 8 ? 0xFF : (1u << (k - 8 * q)) - 1;
    const __mmask8 set = _mm512_test_epi64_mask(bit, one);
    if ((set & lanes) != lanes) return false;
  }
  return true;
}

}  // namespace pollen::crdt::probe
