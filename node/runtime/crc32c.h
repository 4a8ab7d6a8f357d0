// The add log and the tombstone file use the snapshot files' CRC-32C.
#pragma once

#include "crdt/crc32c.h"

namespace pollen::runtime {

using crdt::Crc32c;

}  // namespace pollen::runtime
