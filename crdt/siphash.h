// SipHash-2-4 (Aumasson and Bernstein, 2012), inlined.
//
// Why not only libsodium's crypto_shorthash: the hash is most of the cost of a
// filter probe, and an out-of-line call that returns its result through memory
// keeps the CPU from overlapping one key's probe with the next key's hash.
// Inlined, a 16-byte key hashes in ~16 ns against ~19 ns for the libsodium call
// on this machine (bench/crdt/filter_bench.cc: BM_SipHash, BM_SipHashSodium).
// tests/crdt/keyed_hash_test.cc checks this function bit for bit against
// libsodium and against the reference vectors.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace pollen::crdt {

class SipHasher {
 public:
  // `key16` is the 128-bit key as 16 bytes, read little-endian as k0 || k1.
  explicit SipHasher(const uint8_t* key16) {
    std::memcpy(&k0_, key16, 8);
    std::memcpy(&k1_, key16 + 8, 8);
    static_assert(std::endian::native == std::endian::little, "Pollen assumes a little-endian host");
  }

  // Always inlined, with its rounds: left to its heuristics GCC 12 sometimes
  // outlines the round into a call (seen in perf inside the batch pipelines),
  // which halves the hash's speed.
  [[gnu::always_inline]] uint64_t operator()(std::string_view data) const {
    uint64_t v0 = k0_ ^ kInit0;
    uint64_t v1 = k1_ ^ kInit1;
    uint64_t v2 = k0_ ^ kInit2;
    uint64_t v3 = k1_ ^ kInit3;
    const auto round = [&] [[gnu::always_inline]] () { Round(v0, v1, v2, v3); };
    const char* p = data.data();
    const size_t full_words = data.size() / 8;
    for (size_t i = 0; i < full_words; ++i, p += 8) {
      uint64_t m;
      std::memcpy(&m, p, 8);
      v3 ^= m;
      round();
      round();
      v0 ^= m;
    }
    // Last block: the 0..7 remaining bytes, with the length's low byte on top.
    const uint64_t last = LastBlock(data);
    v3 ^= last;
    round();
    round();
    v0 ^= last;
    v2 ^= 0xff;
    round();
    round();
    round();
    round();
    return v0 ^ v1 ^ v2 ^ v3;
  }

  // The initial state is the key XOR these ("somepseudorandomlygeneratedbytes").
  static constexpr uint64_t kInit0 = 0x736f6d6570736575ULL;
  static constexpr uint64_t kInit1 = 0x646f72616e646f6dULL;
  static constexpr uint64_t kInit2 = 0x6c7967656e657261ULL;
  static constexpr uint64_t kInit3 = 0x7465646279746573ULL;
  uint64_t k0() const { return k0_; }
  uint64_t k1() const { return k1_; }

  // The final message block: the 0..7 bytes after the last full 8-byte word,
  // little-endian, with the length's low byte on top.
  [[gnu::always_inline]] static uint64_t LastBlock(std::string_view data) {
    const char* p = data.data() + data.size() / 8 * 8;
    uint64_t last = static_cast<uint64_t>(data.size()) << 56;
    const size_t tail = data.size() % 8;
    for (size_t i = 0; i < tail; ++i) last |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
    return last;
  }

 private:
  [[gnu::always_inline]] static uint64_t Rotl(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }
  [[gnu::always_inline]] static void Round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
    v0 += v1; v1 = Rotl(v1, 13); v1 ^= v0; v0 = Rotl(v0, 32);
    v2 += v3; v3 = Rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = Rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = Rotl(v1, 17); v1 ^= v2; v2 = Rotl(v2, 32);
  }
  uint64_t k0_;
  uint64_t k1_;
};

}  // namespace pollen::crdt
