// CRC-32C (Castagnoli), table-driven, for add-log record checksums.
#pragma once

#include <cstdint>
#include <string_view>

namespace pollen::runtime {

// CRC-32C of `data`, continuing from `crc` (0 to start).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

}  // namespace pollen::runtime
