// Fuzz target: the tombstone file decoder (bytes from disk). Any bytes: no
// crash; a refusal returns nothing; what is accepted encodes back to the same
// bytes. Half the inputs are a body given a valid magic and checksum, so the
// record checks past the checksum are reached.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "node/runtime/crc32c.h"
#include "node/runtime/tombstone_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::runtime;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size > 0 && (data[0] & 1) == 1) {
    std::string framed = "PLNTOMB1" + bytes.substr(1);
    const uint32_t crc = Crc32c(std::string_view(framed).substr(8));
    for (int i = 0; i < 4; ++i) framed.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
    bytes = std::move(framed);
  }
  auto decoded = DecodeTombstones(bytes);
  if (decoded.ok() && EncodeTombstones(*decoded) != bytes) std::abort();
  return 0;
}
