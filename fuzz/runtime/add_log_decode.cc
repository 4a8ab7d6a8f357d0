// Fuzz target: the add-log decoder. Any bytes: the scan never reads out of
// bounds, every record it reports is well-formed for its kind, a scan in small
// chunks (as a file is read, refilling mid-record) reports exactly what a scan
// of the whole input does, and re-encoding the records decodes to the same
// records (byte for byte when the input was canonical). Half the inputs are cut into payloads that get a correct header
// and checksum, so the payload checks (kinds, filter and entry lengths of
// create records, delete tails) are reached and not only the checksum.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "node/runtime/add_log_format.h"
#include "node/runtime/add_log_reader.h"
#include "node/runtime/crc32c.h"

namespace {

using namespace pollen::runtime;

void PutU32(uint32_t v, std::string* out) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Input: repeated (len u8, payload[len]); each payload framed with a valid
// header and CRC-32C. A final short chunk is copied raw (a torn tail).
std::string Framed(std::string_view in) {
  std::string out(kAddLogMagic);
  while (!in.empty()) {
    const size_t len = static_cast<unsigned char>(in[0]);
    in.remove_prefix(1);
    if (len > in.size()) {
      out.append(in);
      break;
    }
    const std::string_view payload = in.substr(0, len);
    PutU32(static_cast<uint32_t>(len), &out);
    PutU32(Crc32c(payload), &out);
    out.append(payload);
    in.remove_prefix(len);
  }
  return out;
}

// An owning copy of a record, to compare two scans.
struct Record {
  RecordKind kind;
  std::string filter, key, entry;
  uint64_t deleted_through;
  bool operator==(const Record&) const = default;
};

Record Copy(const AddRecordView& rec) {
  return {rec.kind, std::string(rec.filter), std::string(rec.key), std::string(rec.entry), rec.deleted_through};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size > 0 && (data[0] & 3) == 1) bytes = std::string(kAddLogMagic) + bytes.substr(1);
  if (size > 0 && (data[0] & 3) >= 2) bytes = Framed(std::string_view(bytes).substr(1));
  std::vector<Record> first;
  const ScanResult r = ScanAddLogBytes(bytes, [&](const AddRecordView& rec) {
    if (rec.filter.size() > kMaxLoggedFilterBytes) std::abort();
    if (rec.kind == RecordKind::kCreate &&
        (rec.entry.empty() || rec.entry.size() > kMaxLoggedEntryBytes || !rec.key.empty())) {
      std::abort();
    }
    if (rec.kind == RecordKind::kAdd && !rec.entry.empty()) std::abort();
    if (rec.kind == RecordKind::kDelete && (!rec.entry.empty() || !rec.key.empty())) std::abort();
    first.push_back(Copy(rec));
  });
  if (r.valid_bytes > bytes.size() || r.records != first.size()) std::abort();
  if (r.corrupt == r.error.empty()) std::abort();
  // The same input read 1..64 bytes at a time (the file reader's refill path,
  // which a 1 MiB chunk reaches only for files over 1 MiB).
  const size_t chunk = size > 0 ? 1 + data[size - 1] % 64 : 1;
  std::vector<Record> chunked;
  const ScanResult rc = ScanAddLogBytes(bytes, [&](const AddRecordView& rec) { chunked.push_back(Copy(rec)); }, chunk);
  if (chunked != first || rc.records != r.records || rc.valid_bytes != r.valid_bytes || rc.torn_tail != r.torn_tail ||
      rc.corrupt != r.corrupt || rc.error != r.error) {
    std::abort();
  }
  // Re-encoding what was read decodes to the same records. (Not byte for
  // byte: the reader accepts a long form holding a name the short form could
  // hold, which writers never produce; re-encoding picks the short form.)
  if (!first.empty()) {
    std::string again(kAddLogMagic);
    for (const Record& rec : first) {
      if (rec.kind == RecordKind::kAdd) {
        AppendAddRecord(rec.filter, rec.key, &again);
      } else if (rec.kind == RecordKind::kDelete) {
        AppendDeleteRecord(rec.filter, rec.deleted_through, &again);
      } else {
        AppendCreateRecord(rec.filter, rec.entry, &again);
      }
    }
    std::vector<Record> second;
    const ScanResult r2 = ScanAddLogBytes(again, [&](const AddRecordView& rec) { second.push_back(Copy(rec)); });
    if (r2.corrupt || r2.valid_bytes != again.size() || second != first) std::abort();
    // Canonical input (what writers produce) re-encodes byte for byte.
    if (again.size() == r.valid_bytes && again != bytes.substr(0, r.valid_bytes)) std::abort();
  }
  return 0;
}
