// MemoryTrimmer: free allocator memory goes back to the kernel (the
// process's anonymous RSS drops), and an allocator that does not change is
// trimmed once, not every period.
#include "node/runtime/memory_trim.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace pollen::runtime {
namespace {

uint64_t RssAnonKib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8));
  }
  return 0;
}

// 64 MiB in 1 KiB blocks (under the allocator's mmap threshold, so they come
// from an arena), all freed but the last, which pins the heap's top: free()
// alone cannot give the rest back.
std::unique_ptr<char[]> LeaveFreeMemory() {
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int i = 0; i < 64 * 1024; ++i) {
    blocks.push_back(std::make_unique<char[]>(1024));
    blocks.back()[0] = 1;
    for (int j = 0; j < 1024; j += 256) blocks.back()[j] = static_cast<char>(i);
  }
  std::unique_ptr<char[]> pin = std::make_unique<char[]>(1024);
  pin[0] = 1;
  return pin;
}

TEST(MemoryTrim, FreeMemoryGoesBackAndAnIdleAllocatorIsTrimmedOnce) {
  std::unique_ptr<char[]> pin = LeaveFreeMemory();
  if (AllocatorFreeBytes() < MemoryTrimmer::kThresholdBytes) {
    // Sanitizer builds replace malloc: no glibc arenas to trim or count.
    GTEST_SKIP() << "the allocator is not glibc's (free bytes " << AllocatorFreeBytes() << ")";
  }
  const uint64_t before = RssAnonKib();
  boost::asio::io_context io;
  MemoryTrimmer trimmer(io, std::chrono::milliseconds(10));
  trimmer.Start();
  io.run_for(std::chrono::milliseconds(300));  // ~30 periods
  EXPECT_EQ(trimmer.trims(), 1u);
  const uint64_t after = RssAnonKib();
  EXPECT_LT(after + 32 * 1024, before) << "RssAnon " << before << " kB -> " << after << " kB";
}

}  // namespace
}  // namespace pollen::runtime
