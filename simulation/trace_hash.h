// TraceHash: an order-sensitive 64-bit digest of everything a run did.
//
// The simulator feeds it every delivered frame (from, to, time, channel, a hash
// of the bytes) and every node event, fault and workload result, in the order
// they happen. Promises: the same sequence of Mix calls gives the same value on
// every platform and process (no std::hash, no salted hashing); any change in
// the sequence changes the value with probability about 1 - 2^-64.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace pollen::sim {

// A stable 64-bit hash of a byte string (64-bit words, multiply-xorshift mixing).
inline uint64_t StableHash(std::string_view bytes, uint64_t seed = 0) {
  uint64_t h = seed ^ (0x9e3779b97f4a7c15ULL * (bytes.size() + 1));
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);  // read as little-endian
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  for (size_t j = bytes.size(); j > i; --j) tail = (tail << 8) | static_cast<uint8_t>(bytes[j - 1]);
  h = (h ^ tail) * 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 29;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

class TraceHash {
 public:
  void Mix(uint64_t value) {
    state_ = (state_ ^ value) * 0x100000001b3ULL;
    state_ ^= state_ >> 27;
    state_ *= 0xbf58476d1ce4e5b9ULL;
    state_ ^= state_ >> 31;
    ++count_;
  }
  void Mix(std::string_view bytes) { Mix(StableHash(bytes)); }
  uint64_t value() const { return state_; }
  uint64_t count() const { return count_; }  // Mix calls so far

 private:
  uint64_t state_ = 0x6a09e667f3bcc908ULL;
  uint64_t count_ = 0;
};

}  // namespace pollen::sim
