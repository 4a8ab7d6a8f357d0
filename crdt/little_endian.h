// Little-endian integers appended to a byte string, and read back with
// bounds checks: the file formats' (crdt/snapshot.h, crdt/snapshot_delta.h)
// one way of writing and reading them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pollen::crdt {

inline void PutU16(std::string& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
inline void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// LEB128: 7 bits a byte, low first, the top bit set on all but the last.
inline void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads from the front of a byte string; every read checks the bytes left
// and, failing, returns false and consumes nothing.
class LittleEndianReader {
 public:
  explicit LittleEndianReader(std::string_view bytes) : bytes_(bytes) {}
  bool U8(uint8_t& v) { return Uint(v); }
  bool U16(uint16_t& v) { return Uint(v); }
  bool U32(uint32_t& v) { return Uint(v); }
  bool U64(uint64_t& v) { return Uint(v); }
  bool Bytes(size_t n, std::string_view& v) {
    if (remaining() < n) return false;
    v = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  // LEB128, at most 64 bits.
  bool Varint(uint64_t& v) {
    uint64_t out = 0;
    for (size_t i = 0, shift = 0; shift < 64; ++i, shift += 7) {
      if (i >= remaining()) return false;
      const uint8_t b = static_cast<uint8_t>(bytes_[pos_ + i]);
      if (shift == 63 && b > 1) return false;  // past 64 bits
      out |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) {
        pos_ += i + 1;
        v = out;
        return true;
      }
    }
    return false;
  }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  template <typename T>
  bool Uint(T& v) {
    if (remaining() < sizeof(T)) return false;
    v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    pos_ += sizeof(T);
    return true;
  }
  std::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace pollen::crdt
