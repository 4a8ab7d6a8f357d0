// The add-log file format and its decoder (bytes from disk: validated fully).
//
// A segment file is
//   magic "PLNALOG1" (8 bytes)
//   records: payload_len u32 LE | crc32c(payload) u32 LE | payload
// and a payload is one of these, told apart by its first byte(s):
//   add          filter_len u8 (1..255) | filter | key (the rest, may be empty)
//   create       0x00 | kind u8 = 0x01 | filter_len u8 (1..255) | filter |
//                entry (the rest, 1..kMaxLoggedEntryBytes bytes)
//   long add     0x00 | kind u8 = 0x02 | filter_len u32 LE | filter | key
//   long create  0x00 | kind u8 = 0x03 | filter_len u32 LE | filter | entry
//   delete       0x00 | kind u8 = 0x04 | filter_len u32 LE | filter |
//                deleted_through u64 LE (a tombstone, node/core/catalog.h)
// The long forms carry any filter name (binary-safe names: empty, or up to
// kMaxLoggedFilterBytes); writers use them only for names that the short
// forms cannot hold, so logs of 1..255-byte names are what older readers
// expect.
// A create record carries a filter's whole catalog entry (parameters, policy,
// creation stamp and creator, epoch: node::Node::ExportCatalogEntry bytes). The
// format treats it as opaque; the replay validates it (Node::ImportCatalogEntry).
// Logs written before create records existed hold only add records and still
// decode; a reader that predates them reports a create record as corruption.
// A delete record is written before the deletion is applied (write-ahead), so
// on replay every add logged after it may belong to a later filter of the same
// name and every add before it belongs to a deleted one (Persistence).
//
// A record is written with one write(); a crash can leave the last record
// short (a torn tail), which the reader drops. Any other inconsistency (bad
// magic, length out of range, checksum mismatch, a filter length past the
// record or over the limit, unknown kind, empty or oversized entry) is
// corruption: the reader keeps the records before it and reports the offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "crdt/generations.h"

namespace pollen::runtime {

inline constexpr std::string_view kAddLogMagic = "PLNALOG1";
inline constexpr size_t kAddLogRecordHeaderBytes = 8;
inline constexpr size_t kMaxShortFilterBytes = 255;  // the short forms' u8 length
inline constexpr size_t kMaxLoggedFilterBytes = crdt::kMaxFilterNameBytes;
inline constexpr size_t kMaxLoggedKeyBytes = 16u << 20;  // the RESP server's bulk limit
inline constexpr size_t kMaxLoggedEntryBytes = 128u << 10;  // a catalog entry holds the name, plus ~100 bytes
inline constexpr size_t kMaxAddLogPayloadBytes = 6 + kMaxLoggedFilterBytes + kMaxLoggedKeyBytes;
static_assert(6 + kMaxLoggedFilterBytes + kMaxLoggedEntryBytes <= kMaxAddLogPayloadBytes);

enum class RecordKind : uint8_t { kAdd, kCreate, kDelete };

// Appends one add record for (filter, key) to *out. Requires
// filter.size() <= kMaxLoggedFilterBytes and key.size() <= kMaxLoggedKeyBytes.
void AppendAddRecord(std::string_view filter, std::string_view key, std::string* out);

// Appends one create record for (filter, entry) to *out. Requires
// filter.size() <= kMaxLoggedFilterBytes and
// 1 <= entry.size() <= kMaxLoggedEntryBytes.
void AppendCreateRecord(std::string_view filter, std::string_view entry, std::string* out);

// Appends one delete record for (filter, deleted_through) to *out. Requires
// filter.size() <= kMaxLoggedFilterBytes.
void AppendDeleteRecord(std::string_view filter, uint64_t deleted_through, std::string* out);

struct AddRecordView {
  RecordKind kind = RecordKind::kAdd;
  std::string_view filter;  // every kind: 0..kMaxLoggedFilterBytes bytes
  std::string_view key;     // kAdd only
  std::string_view entry;   // kCreate only: 1..kMaxLoggedEntryBytes bytes
  uint64_t deleted_through = 0;  // kDelete only
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
