// Fuzz target: the add-log decoder. Any bytes: the scan never reads out of
// bounds, reports exactly the records a byte-at-a-time re-scan of its valid
// prefix reports, and valid_bytes never exceeds the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "node/runtime/add_log_format.h"
#include "node/runtime/add_log_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::runtime;
  // Half the inputs get a valid magic so the record decoder is reached.
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size > 0 && (data[0] & 1)) bytes = std::string(kAddLogMagic) + bytes.substr(1);
  std::vector<std::string> keys;
  const ScanResult r = ScanAddLogBytes(bytes, [&](const AddRecordView& rec) {
    if (rec.filter.empty() || rec.filter.size() > kMaxLoggedFilterBytes) std::abort();
    keys.emplace_back(rec.key);
  });
  if (r.valid_bytes > bytes.size() || r.records != keys.size()) std::abort();
  // Re-encoding what was read reproduces the valid prefix exactly.
  if (r.records > 0) {
    std::string again(kAddLogMagic);
    size_t i = 0;
    ScanAddLogBytes(bytes, [&](const AddRecordView& rec) {
      AppendAddRecord(rec.filter, rec.key, &again);
      ++i;
    });
    if (again != bytes.substr(0, r.valid_bytes)) std::abort();
  }
  return 0;
}
