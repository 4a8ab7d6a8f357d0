// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which its
// -Wmaybe-uninitialized reports as a use of an uninitialized value (a false
// positive: every lane is written before use).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cassert>

#include "crdt/block_probe.h"
#include "crdt/cpu_paths.h"
#include "crdt/mix64.h"

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
  // The batch form also uses AVX512DQ's 64-bit multiply; every AVX-512 CPU
  // but Xeon Phi has it.
  static const bool available =
      CpuPathsAllowed() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return available;
}

namespace {

// All k bits of `hash` set in the block held in `words`? Inline so that the
// batch form below runs with no call per key.
__attribute__((target("avx512f"))) inline bool HasAll(__m512i words, uint64_t hash, uint32_t k) {
  uint64_t seed = FirstSeed(hash);
  // k <= 7 (p = 1% gives k = 7): one seed, broadcast to every lane.
  if (k <= kFieldsPerSeed) {
    return ClearLanes(words, _mm512_set1_epi64(static_cast<long long>(seed)), 0, LanesOfPass(k, 0)) == 0;
  }
  // k > 7: the first seed's 7 probes alone reject a non-member 1 - 2^-7 of
  // the time at fill 1/2, without building the other seeds. bench_scaling's
  // 14-layer stack (k = 10-14 in every layer) spends most of a non-member test
  // here.
  if (ClearLanes(words, _mm512_set1_epi64(static_cast<long long>(seed)), 0, LanesOfPass(kFieldsPerSeed, 0)) != 0) {
    return false;
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

}  // namespace

__attribute__((target("avx512f"))) bool BlockHasAllVector(const uint64_t* block, uint64_t hash, uint32_t k) {
  assert(k >= 1 && k <= kMaxK);
  return HasAll(_mm512_load_si512(block), hash, k);
}

namespace {

// The batch test works on groups of 8 keys: a group's block addresses and
// first seeds are computed 8 lanes at a time, kept in a ring, and its blocks
// prefetched `ahead` groups before they are tested.
constexpr size_t kGroup = 8;
constexpr size_t kRingGroups = 32;  // > the largest `ahead` + 1
constexpr size_t kMaxAheadGroups = kRingGroups - 2;
static_assert(kMaxBlocks < (uint64_t{1} << 32), "MulHi32 needs block counts under 2^32");

// (h * blocks) >> 64 per lane, exactly as BlockOf, for blocks < 2^32: with
// h = hi * 2^32 + lo, h * blocks = hi * blocks * 2^32 + lo * blocks, and
// hi * blocks + (lo * blocks >> 32) < 2^64 cannot overflow.
__attribute__((target("avx512f,avx512dq"))) inline __m512i MulHi32(__m512i h, __m512i blocks) {
  const __m512i high = _mm512_mul_epu32(_mm512_srli_epi64(h, 32), blocks);
  const __m512i low = _mm512_mul_epu32(h, blocks);
  return _mm512_srli_epi64(_mm512_add_epi64(high, _mm512_srli_epi64(low, 32)), 32);
}

struct GroupRing {
  alignas(64) const uint64_t* block[kRingGroups][kGroup];
  alignas(64) uint64_t seed[kRingGroups][kGroup];
};

// Fills ring slot g % kRingGroups with the block addresses and first seeds of
// keys [8g, 8g + 8) of `hashes` (fewer for the last group), and prefetches
// their blocks if asked. (Called directly, never through a lambda: a lambda
// does not inherit the target attribute, and passing a vector between code
// with and without AVX-512 changes the calling convention.)
__attribute__((target("avx512f,avx512dq"))) inline void PrepareGroup(const uint64_t* words, uint64_t blocks,
                                                                       std::span<const uint64_t> hashes, size_t g,
                                                                       bool prefetch, GroupRing& ring) {
  const __m512i block_count = _mm512_set1_epi64(static_cast<long long>(blocks));
  const size_t first = g * kGroup;
  const size_t count = std::min(kGroup, hashes.size() - first);
  const __mmask8 lanes = static_cast<__mmask8>((1u << count) - 1);
  const __m512i h = _mm512_maskz_loadu_epi64(lanes, hashes.data() + first);
  const __m512i offset = _mm512_slli_epi64(MulHi32(h, block_count), 6);  // 64 bytes a block
  const __m512i base = _mm512_set1_epi64(static_cast<long long>(reinterpret_cast<uintptr_t>(words)));
  _mm512_store_si512(ring.block[g % kRingGroups], _mm512_add_epi64(base, offset));
  const __m512i seed = _mm512_mullo_epi64(_mm512_xor_si512(h, _mm512_srli_epi64(h, 29)),
                                          _mm512_set1_epi64(static_cast<long long>(kSeedMix)));
  _mm512_store_si512(ring.seed[g % kRingGroups], seed);
  if (prefetch) {
    // All 8 lanes, whatever `count`: an unused lane's address is `words` (its
    // hash loaded as 0), harmless to prefetch, and no per-lane branch.
    for (size_t i = 0; i < kGroup; ++i) __builtin_prefetch(ring.block[g % kRingGroups][i], 0, 3);
  }
}

}  // namespace

// Per key, the common work (block address, first seed, the first 7 probes)
// is a handful of vector instructions and no call; one branch sends a key
// whose first 7 bits are all set (every member; 1 in 128 non-members at fill
// 1/2) to HasAll's full test, which tests those 7 again (cheaper than a
// second entry point for the rest). bench_scaling, 1024-key batches of ~21-byte
// non-members, same machine: the 14-layer stack 84 us a batch with a
// BlockHasAllVector call per key, 42 us with this form; the single 12 MB
// filter 22.9 us and 9.8 us.
__attribute__((target("avx512f,avx512dq"))) void BlocksHaveAllVector(const uint64_t* words, uint64_t blocks,
                                                                       uint32_t k, std::span<const uint64_t> hashes,
                                                                       std::span<bool> out, size_t prefetch_distance) {
  assert(k >= 1 && k <= kMaxK);
  assert(blocks >= 1 && blocks <= kMaxBlocks);
  assert(hashes.size() == out.size());
  const size_t n = hashes.size();
  const size_t groups = (n + kGroup - 1) / kGroup;
  const size_t ahead = std::min(kMaxAheadGroups, prefetch_distance / kGroup + (prefetch_distance % kGroup != 0));
  GroupRing ring;
  const __mmask8 first_lanes = LanesOfPass(std::min(k, kFieldsPerSeed), 0);
  for (size_t g = 0; g < std::min(ahead, groups); ++g) PrepareGroup(words, blocks, hashes, g, true, ring);
  for (size_t g = 0; g < groups; ++g) {
    if (ahead == 0) {
      PrepareGroup(words, blocks, hashes, g, false, ring);
    } else if (g + ahead < groups) {
      PrepareGroup(words, blocks, hashes, g + ahead, true, ring);
    }
    const size_t first = g * kGroup;
    const size_t count = std::min(kGroup, n - first);
    for (size_t i = 0; i < count; ++i) {
      const __m512i block = _mm512_load_si512(ring.block[g % kRingGroups][i]);
      const __m512i seed = _mm512_set1_epi64(static_cast<long long>(ring.seed[g % kRingGroups][i]));
      bool has = ClearLanes(block, seed, 0, first_lanes) == 0;
      if (k > kFieldsPerSeed && has) has = HasAll(block, hashes[first + i], k);
      out[first + i] = has;
    }
  }
}

namespace {

// Mix64 (crdt/mix64.h) on 8 lanes.
__attribute__((target("avx512f,avx512dq"))) inline __m512i Mix64Lanes(__m512i x) {
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                         _mm512_set1_epi64(static_cast<long long>(kMix64Mul1)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                         _mm512_set1_epi64(static_cast<long long>(kMix64Mul2)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

}  // namespace

__attribute__((target("avx512f,avx512dq"))) void RemixVector(std::span<const uint64_t> hashes, uint64_t salt,
                                                               std::span<uint64_t> out) {
  assert(hashes.size() == out.size());
  const __m512i salts = _mm512_set1_epi64(static_cast<long long>(salt));
  const size_t n = hashes.size();
  for (size_t i = 0; i < n; i += kGroup) {
    const __mmask8 lanes = static_cast<__mmask8>((1u << std::min(kGroup, n - i)) - 1);
    const __m512i h = _mm512_maskz_loadu_epi64(lanes, hashes.data() + i);
    _mm512_mask_storeu_epi64(out.data() + i, lanes, Mix64Lanes(_mm512_xor_si512(h, salts)));
  }
}

}  // namespace pollen::crdt::probe
