#include "node/runtime/add_log_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

constexpr size_t kChunkBytes = 1 << 20;

// Pulls bytes through `read` (returns bytes read, 0 at end, -1 on error),
// `chunk_bytes` at a time.
template <typename ReadFn>
absl::StatusOr<ScanResult> Scan(ReadFn read, const RecordFn& fn, size_t chunk_bytes) {
  ScanResult result;
  std::string buf;
  size_t pos = 0;
  bool eof = false;
  auto fill = [&]() -> absl::Status {
    if (pos > 0) {
      buf.erase(0, pos);
      pos = 0;
    }
    const size_t old = buf.size();
    buf.resize(old + chunk_bytes);
    const long n = read(buf.data() + old, chunk_bytes);
    if (n < 0) return absl::InternalError(Cat("read: ", std::strerror(errno)));
    buf.resize(old + static_cast<size_t>(n));
    if (n == 0) eof = true;
    return absl::OkStatus();
  };
  while (buf.size() < kAddLogMagic.size() && !eof) {
    if (absl::Status s = fill(); !s.ok()) return s;
  }
  if (buf.size() < kAddLogMagic.size()) {
    result.torn_tail = !buf.empty() && kAddLogMagic.substr(0, buf.size()) == buf;
    if (!buf.empty() && !result.torn_tail) {
      result.corrupt = true;
      result.error = "bad magic";
    }
    return result;
  }
  if (std::string_view(buf).substr(0, kAddLogMagic.size()) != kAddLogMagic) {
    result.corrupt = true;
    result.error = "bad magic";
    return result;
  }
  pos = kAddLogMagic.size();
  result.valid_bytes = pos;
  while (true) {
    AddRecordView rec;
    size_t consumed = 0;
    std::string error;
    const DecodeStatus st = DecodeAddRecord(std::string_view(buf).substr(pos), &rec, &consumed, &error);
    if (st == DecodeStatus::kRecord) {
      fn(rec);
      pos += consumed;
      result.valid_bytes += consumed;
      ++result.records;
      continue;
    }
    if (st == DecodeStatus::kCorrupt) {
      result.corrupt = true;
      result.error = Cat(error, " at offset ", result.valid_bytes);
      return result;
    }
    if (eof) {
      result.torn_tail = pos < buf.size();
      return result;
    }
    if (absl::Status s = fill(); !s.ok()) return s;
  }
}

}  // namespace

ScanResult ScanAddLogBytes(std::string_view bytes, const RecordFn& fn, size_t chunk_bytes) {
  size_t offset = 0;
  auto read = [&](char* out, size_t n) -> long {
    const size_t k = std::min(n, bytes.size() - offset);
    std::memcpy(out, bytes.data() + offset, k);
    offset += k;
    return static_cast<long>(k);
  };
  // By default one chunk holds all of it: no 1 MiB zero-filled buffer for a
  // short input (the fuzz target scans thousands of small inputs a second).
  if (chunk_bytes == 0) chunk_bytes = std::min(kChunkBytes, bytes.size() + 1);
  return *Scan(read, fn, chunk_bytes);
}

absl::StatusOr<ScanResult> ScanAddLogFile(const std::string& path, const RecordFn& fn) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(Cat("open ", path, ": ", std::strerror(errno)));
  auto read = [fd](char* out, size_t n) -> long {
    while (true) {
      const ssize_t r = ::read(fd, out, n);
      if (r < 0 && errno == EINTR) continue;
      return static_cast<long>(r);
    }
  };
  auto result = Scan(read, fn, kChunkBytes);
  ::close(fd);
  return result;
}

}  // namespace pollen::runtime
