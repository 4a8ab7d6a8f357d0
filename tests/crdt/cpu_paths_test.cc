// POLLEN_PORTABLE=1 turns every CPU-specific crdt path off (crdt/cpu_paths.h);
// without it each path follows the CPU. Runs twice: as crdt_cpu_paths_test and
// as crdt_cpu_paths_test_portable (tests/crdt/CMakeLists.txt).
#include "crdt/cpu_paths.h"

#include <cstdlib>
#include <cstring>

#include "crdt/block_probe.h"
#include "crdt/crc32c.h"
#include "gtest/gtest.h"

namespace pollen::crdt {
namespace {

bool PortableAskedFor() {
  const char* portable = std::getenv("POLLEN_PORTABLE");
  return portable != nullptr && std::strcmp(portable, "1") == 0;
}

TEST(CpuPaths, FollowTheEnvironmentAndTheCpu) {
  EXPECT_EQ(CpuPathsAllowed(), !PortableAskedFor());
  if (PortableAskedFor()) {
    EXPECT_FALSE(probe::VectorProbeAvailable());
    EXPECT_FALSE(Crc32cAccelerated());
    return;
  }
#if defined(__x86_64__)
  EXPECT_EQ(Crc32cAccelerated(), static_cast<bool>(__builtin_cpu_supports("sse4.2")));
#endif
}

// The same checksum on either path (crc32c_test compares the paths in one
// process; this pins a known value in both runs).
TEST(CpuPaths, Crc32cOfAKnownStringIsTheSameOnEveryPath) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
}

}  // namespace
}  // namespace pollen::crdt
