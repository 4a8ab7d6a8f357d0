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

}  // namespace

void AppendAddRecord(std::string_view filter, std::string_view key, std::string* out) {
  assert(!filter.empty() && filter.size() <= kMaxLoggedFilterBytes);
  assert(key.size() <= kMaxLoggedKeyBytes);
  const size_t start = out->size();
  const size_t payload_len = 1 + filter.size() + key.size();
  out->resize(start + kAddLogRecordHeaderBytes);
  out->push_back(static_cast<char>(filter.size()));
  out->append(filter);
  out->append(key);
  const uint32_t crc = Crc32c(std::string_view(out->data() + start + kAddLogRecordHeaderBytes, payload_len));
  PutU32(static_cast<uint32_t>(payload_len), out->data() + start);
  PutU32(crc, out->data() + start + 4);
}

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
  if (filter_len == 0 || 1 + filter_len > payload.size()) {
    *error = Cat("record filter length ", filter_len, " out of range");
    return DecodeStatus::kCorrupt;
  }
  record->filter = payload.substr(1, filter_len);
  record->key = payload.substr(1 + filter_len);
  *consumed = kAddLogRecordHeaderBytes + len;
  return DecodeStatus::kRecord;
}

}  // namespace pollen::runtime
