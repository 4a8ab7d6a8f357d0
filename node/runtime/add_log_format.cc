#include "node/runtime/add_log_format.h"

#include <cassert>

#include "absl/strings/str_cat.h"
#include "node/runtime/crc32c.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

void PutU32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

constexpr char kCreateKind = 0x01;
constexpr char kLongAddKind = 0x02;
constexpr char kLongCreateKind = 0x03;
constexpr char kDeleteKind = 0x04;

// Fills in the header of the record that starts at `start` (its payload is
// everything after the header).
void SealRecord(size_t start, std::string* out) {
  const size_t payload_len = out->size() - start - kAddLogRecordHeaderBytes;
  assert(payload_len <= kMaxAddLogPayloadBytes);
  const uint32_t crc = Crc32c(std::string_view(out->data() + start + kAddLogRecordHeaderBytes, payload_len));
  PutU32(static_cast<uint32_t>(payload_len), out->data() + start);
  PutU32(crc, out->data() + start + 4);
}

bool ShortName(std::string_view filter) { return !filter.empty() && filter.size() <= kMaxShortFilterBytes; }

// 0x00 | kind | filter_len u32 | filter: the long forms' prefix.
void PutLongName(char kind, std::string_view filter, std::string* out) {
  out->push_back('\0');
  out->push_back(kind);
  char len[4];
  PutU32(static_cast<uint32_t>(filter.size()), len);
  out->append(len, 4);
  out->append(filter);
}

}  // namespace

void AppendAddRecord(std::string_view filter, std::string_view key, std::string* out) {
  assert(filter.size() <= kMaxLoggedFilterBytes);
  assert(key.size() <= kMaxLoggedKeyBytes);
  const size_t start = out->size();
  out->resize(start + kAddLogRecordHeaderBytes);
  if (ShortName(filter)) {
    out->push_back(static_cast<char>(filter.size()));
    out->append(filter);
  } else {
    PutLongName(kLongAddKind, filter, out);
  }
  out->append(key);
  SealRecord(start, out);
}

void AppendCreateRecord(std::string_view filter, std::string_view entry, std::string* out) {
  assert(filter.size() <= kMaxLoggedFilterBytes);
  assert(!entry.empty() && entry.size() <= kMaxLoggedEntryBytes);
  const size_t start = out->size();
  out->resize(start + kAddLogRecordHeaderBytes);
  if (ShortName(filter)) {
    out->push_back('\0');
    out->push_back(kCreateKind);
    out->push_back(static_cast<char>(filter.size()));
    out->append(filter);
  } else {
    PutLongName(kLongCreateKind, filter, out);
  }
  out->append(entry);
  SealRecord(start, out);
}

void AppendDeleteRecord(std::string_view filter, uint64_t deleted_through, std::string* out) {
  assert(filter.size() <= kMaxLoggedFilterBytes);
  const size_t start = out->size();
  out->resize(start + kAddLogRecordHeaderBytes);
  PutLongName(kDeleteKind, filter, out);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((deleted_through >> (8 * i)) & 0xff));
  SealRecord(start, out);
}

namespace {

// The payload of an extended record (after its 0x00 marker): kind, filter
// length (u8 or u32), filter, then the key or the entry.
DecodeStatus DecodeExtended(std::string_view rest, AddRecordView* record, std::string* error) {
  if (rest.empty()) {
    *error = "extended record too short";
    return DecodeStatus::kCorrupt;
  }
  const char kind = rest[0];
  if (kind != kCreateKind && kind != kLongAddKind && kind != kLongCreateKind && kind != kDeleteKind) {
    *error = Cat("unknown record kind ", static_cast<unsigned>(static_cast<unsigned char>(kind)));
    return DecodeStatus::kCorrupt;
  }
  const size_t len_bytes = kind == kCreateKind ? 1 : 4;
  if (rest.size() < 1 + len_bytes) {
    *error = "extended record too short";
    return DecodeStatus::kCorrupt;
  }
  const size_t filter_len = kind == kCreateKind ? static_cast<unsigned char>(rest[1]) : GetU32(rest.data() + 1);
  const size_t at = 1 + len_bytes;
  const bool short_ok = kind != kCreateKind || filter_len > 0;
  if (!short_ok || filter_len > kMaxLoggedFilterBytes || filter_len > rest.size() - at) {
    *error = Cat("record filter length ", filter_len, " out of range");
    return DecodeStatus::kCorrupt;
  }
  record->filter = rest.substr(at, filter_len);
  const std::string_view tail = rest.substr(at + filter_len);
  if (kind == kLongAddKind) {
    if (tail.size() > kMaxLoggedKeyBytes) {
      *error = Cat("record key length ", tail.size(), " out of range");
      return DecodeStatus::kCorrupt;
    }
    record->kind = RecordKind::kAdd;
    record->key = tail;
    record->entry = {};
    return DecodeStatus::kRecord;
  }
  if (kind == kDeleteKind) {
    if (tail.size() != 8) {
      *error = Cat("delete record tail length ", tail.size(), " is not 8");
      return DecodeStatus::kCorrupt;
    }
    uint64_t through = 0;
    for (int i = 0; i < 8; ++i) through |= static_cast<uint64_t>(static_cast<unsigned char>(tail[i])) << (8 * i);
    record->kind = RecordKind::kDelete;
    record->key = {};
    record->entry = {};
    record->deleted_through = through;
    return DecodeStatus::kRecord;
  }
  if (tail.empty() || tail.size() > kMaxLoggedEntryBytes) {
    *error = Cat("create record entry length ", tail.size(), " out of range");
    return DecodeStatus::kCorrupt;
  }
  record->kind = RecordKind::kCreate;
  record->key = {};
  record->entry = tail;
  return DecodeStatus::kRecord;
}

}  // namespace

DecodeStatus DecodeAddRecord(std::string_view buf, AddRecordView* record, size_t* consumed, std::string* error) {
  if (buf.size() < kAddLogRecordHeaderBytes) return DecodeStatus::kNeedMore;
  const uint32_t len = GetU32(buf.data());
  const uint32_t crc = GetU32(buf.data() + 4);
  if (len < 2 || len > kMaxAddLogPayloadBytes) {
    *error = Cat("record length ", len, " out of range");
    return DecodeStatus::kCorrupt;
  }
  if (buf.size() - kAddLogRecordHeaderBytes < len) return DecodeStatus::kNeedMore;
  const std::string_view payload = buf.substr(kAddLogRecordHeaderBytes, len);
  if (Crc32c(payload) != crc) {
    *error = "record checksum mismatch";
    return DecodeStatus::kCorrupt;
  }
  const size_t filter_len = static_cast<unsigned char>(payload[0]);
  if (filter_len == 0) {
    const DecodeStatus st = DecodeExtended(payload.substr(1), record, error);
    if (st == DecodeStatus::kRecord) *consumed = kAddLogRecordHeaderBytes + len;
    return st;
  }
  if (1 + filter_len > payload.size() || payload.size() - 1 - filter_len > kMaxLoggedKeyBytes) {
    *error = Cat("record filter length ", filter_len, " out of range");
    return DecodeStatus::kCorrupt;
  }
  record->kind = RecordKind::kAdd;
  record->filter = payload.substr(1, filter_len);
  record->key = payload.substr(1 + filter_len);
  record->entry = {};
  *consumed = kAddLogRecordHeaderBytes + len;
  return DecodeStatus::kRecord;
}

}  // namespace pollen::runtime
