// Reading add-log segments back at start-up.
//
// The scan keeps every record up to the first problem: a torn tail (the last
// record cut short by a crash) is dropped silently (torn_tail = true); corruption
// stops the scan (corrupt = true, error and offset say where). Memory use is
// bounded by one chunk plus the largest legal record.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "node/runtime/add_log_format.h"

namespace pollen::runtime {

struct ScanResult {
  uint64_t records = 0;
  uint64_t valid_bytes = 0;  // magic + whole good records
  bool torn_tail = false;
  bool corrupt = false;
  std::string error;  // when corrupt
};

using RecordFn = std::function<void(const AddRecordView&)>;

// Scans an in-memory segment (fuzzing and tests), `chunk_bytes` at a time as
// a file is read (0: all at once), so tests reach the refill path with small
// inputs.
ScanResult ScanAddLogBytes(std::string_view bytes, const RecordFn& fn, size_t chunk_bytes = 0);

// Scans a segment file. A Status error only when the file cannot be read.
absl::StatusOr<ScanResult> ScanAddLogFile(const std::string& path, const RecordFn& fn);

}  // namespace pollen::runtime
