// Little-endian integers appended to a byte string: the file formats'
// (crdt/snapshot.h, crdt/snapshot_delta.h) one way of writing them.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace pollen::crdt
