// The tombstone file: the deleted filter names a node remembers (catalog.h's
// tombstones), written at every snapshot so they outlive the add-log
// segments the snapshot drops.
//
//   magic "PLNTOMB1" (8 bytes) | count u32 LE |
//   count x ( name_len u32 LE | name | deleted_through u64 LE ) |
//   crc32c of everything after the magic, u32 LE
//
// The decoder checks the magic, every length against what is left, the
// bounds (count <= kMaxTombstoneRecords, names <= 64 KiB, names strictly
// ascending) and the checksum before it returns anything.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pollen::runtime {

inline constexpr std::string_view kTombstoneFileName = "tombstones.pln";
inline constexpr size_t kMaxTombstoneRecords = 1u << 16;

std::string EncodeTombstones(const std::map<std::string, uint64_t>& tombstones);
absl::StatusOr<std::map<std::string, uint64_t>> DecodeTombstones(std::string_view bytes);

}  // namespace pollen::runtime
