// The add-log file format and its decoder (bytes from disk: validated fully).
//
// A segment file is
//   magic "PLNALOG1" (8 bytes)
//   records: payload_len u32 LE | crc32c(payload) u32 LE | payload
// and a payload is one of two kinds, told apart by its first byte:
//   add     filter_len u8 (1..255) | filter | key (the rest, may be empty)
//   create  0x00 | kind u8 = 0x01 | filter_len u8 (1..255) | filter |
//           entry (the rest, 1..kMaxLoggedEntryBytes bytes)
// A create record carries a filter's whole catalog entry (parameters, policy,
// creation stamp and creator, epoch: node::Node::ExportCatalogEntry bytes). The
// format treats it as opaque; the replay validates it (Node::ImportCatalogEntry).
// Logs written before create records existed hold only add records and still
// decode; a reader that predates them reports a create record as corruption.
//
// A record is written with one write(); a crash can leave the last record
// short (a torn tail), which the reader drops. Any other inconsistency (bad
// magic, length out of range, checksum mismatch, empty filter name, unknown
// kind, empty or oversized entry) is corruption: the reader keeps the records
// before it and reports the offset.
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
inline constexpr size_t kMaxLoggedEntryBytes = 64u << 10;  // a catalog entry is ~100 bytes
inline constexpr size_t kMaxAddLogPayloadBytes = 1 + kMaxLoggedFilterBytes + kMaxLoggedKeyBytes;
static_assert(3 + kMaxLoggedFilterBytes + kMaxLoggedEntryBytes <= kMaxAddLogPayloadBytes);

enum class RecordKind : uint8_t { kAdd, kCreate };

// Appends one add record for (filter, key) to *out. Requires
// 1 <= filter.size() <= kMaxLoggedFilterBytes and key.size() <= kMaxLoggedKeyBytes.
void AppendAddRecord(std::string_view filter, std::string_view key, std::string* out);

// Appends one create record for (filter, entry) to *out. Requires
// 1 <= filter.size() <= kMaxLoggedFilterBytes and
// 1 <= entry.size() <= kMaxLoggedEntryBytes.
void AppendCreateRecord(std::string_view filter, std::string_view entry, std::string* out);

struct AddRecordView {
  RecordKind kind = RecordKind::kAdd;
  std::string_view filter;  // both kinds: 1..kMaxLoggedFilterBytes bytes
  std::string_view key;     // kAdd only
  std::string_view entry;   // kCreate only: 1..kMaxLoggedEntryBytes bytes
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
