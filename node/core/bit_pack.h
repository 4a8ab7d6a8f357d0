// One bit per key on the wire (RouteReply, KeyCheckReply): LSB first, the
// unused high bits of the last byte zero.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pollen::node {

inline std::string PackBits(const std::vector<bool>& bits) {
  std::string out((bits.size() + 7) / 8, '\0');
  for (size_t i = 0; i < bits.size(); ++i) {
    if (bits[i]) out[i / 8] = static_cast<char>(static_cast<uint8_t>(out[i / 8]) | (1u << (i % 8)));
  }
  return out;
}

// False unless `bytes` holds exactly `n` bits (the unused high bits zero).
inline bool UnpackBits(const std::string& bytes, size_t n, std::vector<bool>* out) {
  if (bytes.size() != (n + 7) / 8) return false;
  out->assign(n, false);
  for (size_t i = 0; i < bytes.size() * 8; ++i) {
    const bool bit = (static_cast<uint8_t>(bytes[i / 8]) >> (i % 8)) & 1;
    if (i >= n) {
      if (bit) return false;
    } else {
      (*out)[i] = bit;
    }
  }
  return true;
}

}  // namespace pollen::node
