// The add-log file format and its decoder (bytes from disk: validated fully).
//
// A segment file is
//   magic "PLNALOG1" (8 bytes)
//   records: payload_len u32 LE | crc32c(payload) u32 LE | payload
//   payload = filter_len u8 | filter (filter_len bytes, >= 1) | key (the rest)
// A record is written with one write(); a crash can leave the last record
// short (a torn tail), which the reader drops. Any other inconsistency (bad
// magic, length out of range, checksum mismatch, empty filter name) is
// corruption: the reader keeps the records before it and reports the offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pollen::runtime {

inline constexpr std::string_view kAddLogMagic = "PLNALOG1";
inline constexpr size_t kAddLogRecordHeaderBytes = 8;
inline constexpr size_t kMaxLoggedFilterBytes = 255;
inline constexpr size_t kMaxLoggedKeyBytes = 16u << 20;  // the RESP server's bulk limit
inline constexpr size_t kMaxAddLogPayloadBytes = 1 + kMaxLoggedFilterBytes + kMaxLoggedKeyBytes;

// Appends one record for (filter, key) to *out. Requires
// 1 <= filter.size() <= kMaxLoggedFilterBytes and key.size() <= kMaxLoggedKeyBytes.
void AppendAddRecord(std::string_view filter, std::string_view key, std::string* out);

struct AddRecordView {
  std::string_view filter;
  std::string_view key;
};

enum class DecodeStatus : uint8_t {
  kRecord,    // *record and *consumed are set
  kNeedMore,  // buf holds an incomplete record (a torn tail at end of file)
  kCorrupt,   // *error says why; nothing after this point can be trusted
};

// Decodes the record at the start of `buf` (after the magic). Never reads
// past buf, never allocates.
DecodeStatus DecodeAddRecord(std::string_view buf, AddRecordView* record, size_t* consumed, std::string* error);

}  // namespace pollen::runtime
