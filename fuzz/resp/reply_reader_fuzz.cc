// Fuzzes the client-side reply decoder (pollenctl reads server bytes with it).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "node/runtime/resp/reply_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  pollen::resp::ReplyLimits limits;
  limits.max_elements = 1024;
  limits.max_bulk_bytes = 1024;
  while (!in.empty()) {
    pollen::resp::Reply r;
    size_t consumed = 0;
    if (!pollen::resp::ParseReply(in, &r, &consumed, limits).ok() || consumed == 0) break;
    if (consumed > in.size()) std::abort();
    (void)r.DebugString();
    in.remove_prefix(consumed);
  }
  return 0;
}
