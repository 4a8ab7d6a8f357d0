#include "node/runtime/tombstone_file.h"

#include <cassert>

#include "crdt/generations.h"
#include "node/runtime/crc32c.h"

namespace pollen::runtime {
namespace {

constexpr std::string_view kMagic = "PLNTOMB1";

void PutLE(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads `bytes` little-endian bytes at *at; false if fewer are left.
bool GetLE(std::string_view in, size_t* at, int bytes, uint64_t* v) {
  if (in.size() - *at < static_cast<size_t>(bytes)) return false;
  *v = 0;
  for (int i = 0; i < bytes; ++i) *v |= static_cast<uint64_t>(static_cast<unsigned char>(in[*at + i])) << (8 * i);
  *at += static_cast<size_t>(bytes);
  return true;
}

}  // namespace

std::string EncodeTombstones(const std::map<std::string, uint64_t>& tombstones) {
  assert(tombstones.size() <= kMaxTombstoneRecords);
  std::string out(kMagic);
  PutLE(tombstones.size(), 4, &out);
  for (const auto& [name, through] : tombstones) {
    assert(name.size() <= crdt::kMaxFilterNameBytes);
    PutLE(name.size(), 4, &out);
    out.append(name);
    PutLE(through, 8, &out);
  }
  PutLE(Crc32c(std::string_view(out).substr(kMagic.size())), 4, &out);
  return out;
}

absl::StatusOr<std::map<std::string, uint64_t>> DecodeTombstones(std::string_view bytes) {
  if (bytes.size() < kMagic.size() + 8 || bytes.substr(0, kMagic.size()) != kMagic) {
    return absl::InvalidArgumentError("tombstone file: bad magic or truncated");
  }
  const std::string_view body = bytes.substr(kMagic.size(), bytes.size() - kMagic.size() - 4);
  size_t crc_at = bytes.size() - 4;
  uint64_t crc = 0;
  GetLE(bytes, &crc_at, 4, &crc);
  if (Crc32c(body) != crc) return absl::InvalidArgumentError("tombstone file: checksum mismatch");
  size_t at = 0;
  uint64_t count = 0;
  GetLE(body, &at, 4, &count);
  if (count > kMaxTombstoneRecords) return absl::InvalidArgumentError("tombstone file: too many records");
  std::map<std::string, uint64_t> out;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t len = 0, through = 0;
    if (!GetLE(body, &at, 4, &len) || len > crdt::kMaxFilterNameBytes || len > body.size() - at) {
      return absl::InvalidArgumentError("tombstone file: name length out of range");
    }
    std::string name(body.substr(at, len));
    at += len;
    if (!GetLE(body, &at, 8, &through)) return absl::InvalidArgumentError("tombstone file: truncated record");
    if (!out.empty() && !(out.rbegin()->first < name)) {
      return absl::InvalidArgumentError("tombstone file: names not in ascending order");
    }
    out.emplace_hint(out.end(), std::move(name), through);
  }
  if (at != body.size()) return absl::InvalidArgumentError("tombstone file: trailing bytes");
  return out;
}

}  // namespace pollen::runtime
