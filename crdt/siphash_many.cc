#include "crdt/siphash_many.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which its
// -W(maybe-)uninitialized reports as a use of an uninitialized value (a false
// positive: every lane is written before use).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cassert>

#include "crdt/cpu_paths.h"

namespace pollen::crdt {
namespace {

constexpr size_t kLanes = 8;

bool VectorHashAvailable() {
  static const bool available = CpuPathsAllowed() && __builtin_cpu_supports("avx512f");
  return available;
}

// One SipRound on 8 states at once. The rotations by 32 are 32-bit lane swaps
// (a shuffle, which runs on another port than the rotates).
struct State8 {
  __m512i v0, v1, v2, v3;

  __attribute__((target("avx512f"), always_inline)) inline void Round() {
    v0 = _mm512_add_epi64(v0, v1);
    v1 = _mm512_rol_epi64(v1, 13);
    v1 = _mm512_xor_si512(v1, v0);
    v0 = _mm512_shuffle_epi32(v0, _MM_PERM_CDAB);
    v2 = _mm512_add_epi64(v2, v3);
    v3 = _mm512_rol_epi64(v3, 16);
    v3 = _mm512_xor_si512(v3, v2);
    v0 = _mm512_add_epi64(v0, v3);
    v3 = _mm512_rol_epi64(v3, 21);
    v3 = _mm512_xor_si512(v3, v0);
    v2 = _mm512_add_epi64(v2, v1);
    v1 = _mm512_rol_epi64(v1, 17);
    v1 = _mm512_xor_si512(v1, v2);
    v2 = _mm512_shuffle_epi32(v2, _MM_PERM_CDAB);
  }
};

// Hashes exactly 8 * G keys, G groups of 8 lanes in lockstep (independent
// chains for the out-of-order core to interleave). Lane i absorbs key i's full
// words, then its last block (LastBlock: tail bytes and length), one message
// block per step; a lane whose key has fewer blocks than the longest keeps its
// state unchanged (the step's results are merged under a mask) until the
// finalization, which all lanes run together. Full words are gathered straight
// from the keys (each lane reads only whole words inside its own key); last
// blocks are built by the scalar code once per key.
template <size_t G>
__attribute__((target("avx512f"))) void HashGroups(const SipHasher& hasher, const std::string_view* keys, uint64_t* out) {
  alignas(64) uint64_t address[G][kLanes];
  alignas(64) uint64_t full_words[G][kLanes];
  alignas(64) uint64_t last[G][kLanes];
  uint64_t most_words = 0;
  for (size_t g = 0; g < G; ++g) {
    for (size_t i = 0; i < kLanes; ++i) {
      const std::string_view key = keys[g * kLanes + i];
      address[g][i] = reinterpret_cast<uint64_t>(key.data());
      full_words[g][i] = key.size() / 8;
      last[g][i] = SipHasher::LastBlock(key);
      most_words = std::max(most_words, full_words[g][i]);
    }
  }
  const __m512i k0 = _mm512_set1_epi64(static_cast<long long>(hasher.k0()));
  const __m512i k1 = _mm512_set1_epi64(static_cast<long long>(hasher.k1()));
  const State8 initial{_mm512_xor_si512(k0, _mm512_set1_epi64(static_cast<long long>(SipHasher::kInit0))),
                       _mm512_xor_si512(k1, _mm512_set1_epi64(static_cast<long long>(SipHasher::kInit1))),
                       _mm512_xor_si512(k0, _mm512_set1_epi64(static_cast<long long>(SipHasher::kInit2))),
                       _mm512_xor_si512(k1, _mm512_set1_epi64(static_cast<long long>(SipHasher::kInit3)))};
  State8 s[G];
  __m512i words_of[G], last_blocks[G], next[G];  // next: address of each lane's next word
  for (size_t g = 0; g < G; ++g) {
    s[g] = initial;
    words_of[g] = _mm512_load_si512(full_words[g]);
    last_blocks[g] = _mm512_load_si512(last[g]);
    next[g] = _mm512_load_si512(address[g]);
  }
  // Step j absorbs word j of lanes with more than j full words and the last
  // block of lanes with exactly j; the bound is the longest key's block count.
  for (uint64_t j = 0; j <= most_words; ++j) {
    const __m512i step = _mm512_set1_epi64(static_cast<long long>(j));
    for (size_t g = 0; g < G; ++g) {
      const __mmask8 word_lanes = _mm512_cmpgt_epu64_mask(words_of[g], step);
      const __mmask8 active = word_lanes | _mm512_cmpeq_epu64_mask(words_of[g], step);
      const __m512i m = _mm512_mask_i64gather_epi64(last_blocks[g], word_lanes, next[g], nullptr, 1);
      next[g] = _mm512_add_epi64(next[g], _mm512_set1_epi64(8));
      State8 t = s[g];
      t.v3 = _mm512_xor_si512(t.v3, m);
      t.Round();
      t.Round();
      t.v0 = _mm512_xor_si512(t.v0, m);
      s[g].v0 = _mm512_mask_mov_epi64(s[g].v0, active, t.v0);
      s[g].v1 = _mm512_mask_mov_epi64(s[g].v1, active, t.v1);
      s[g].v2 = _mm512_mask_mov_epi64(s[g].v2, active, t.v2);
      s[g].v3 = _mm512_mask_mov_epi64(s[g].v3, active, t.v3);
    }
  }
  for (size_t g = 0; g < G; ++g) {
    s[g].v2 = _mm512_xor_si512(s[g].v2, _mm512_set1_epi64(0xff));
    s[g].Round();
    s[g].Round();
    s[g].Round();
    s[g].Round();
    const __m512i h = _mm512_ternarylogic_epi64(_mm512_xor_si512(s[g].v0, s[g].v1), s[g].v2, s[g].v3, 0x96);  // a^b^c
    _mm512_storeu_si512(out + g * kLanes, h);
  }
}

}  // namespace

void SipHashMany(const SipHasher& hasher, std::span<const std::string_view> keys, std::span<uint64_t> out) {
  assert(keys.size() == out.size());
  size_t i = 0;
  if (VectorHashAvailable()) {
    for (; i + 2 * kLanes <= keys.size(); i += 2 * kLanes) HashGroups<2>(hasher, keys.data() + i, out.data() + i);
    for (; i + kLanes <= keys.size(); i += kLanes) HashGroups<1>(hasher, keys.data() + i, out.data() + i);
  }
  for (; i < keys.size(); ++i) out[i] = hasher(keys[i]);
}

}  // namespace pollen::crdt
