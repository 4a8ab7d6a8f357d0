// MemoryTrimmer: free allocator memory goes back to the kernel (the
// process's anonymous RSS drops), and an allocator that does not change is
// trimmed once, not every period. ConfigureAllocator: a thread's freed heap
// goes back at free(), even after a large block raised glibc's thresholds.
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

// In a thread of its own (so its own arena, as the node's threads): a
// 16 MiB block, mapped on its own and freed (by default that raises glibc's
// trim threshold to 32 MiB), then 24 MiB in 4 KiB blocks, touched and freed.
// Returns how much of the thread's memory stayed resident, in KiB.
uint64_t ResidentAfterThreadFreesItsHeap() {
  uint64_t before = 0, after = 0;
  std::thread worker([&] {
    before = RssAnonKib();
    {
      auto large = std::make_unique<char[]>(16u << 20);
      for (size_t i = 0; i < (16u << 20); i += 4096) large[i] = 1;
    }
    std::vector<std::unique_ptr<char[]>> blocks;
    blocks.reserve(6 * 1024);  // allocated first, so it does not pin the heap's top
    for (int i = 0; i < 6 * 1024; ++i) {
      blocks.push_back(std::make_unique<char[]>(4096));
      blocks.back()[0] = 1;
    }
    while (!blocks.empty()) blocks.pop_back();  // newest first: each merges into the top
    after = RssAnonKib();
  });
  worker.join();
  return after > before ? after - before : 0;
}

TEST(MemoryTrim, ConfiguredThresholdsGiveAThreadsFreedHeapBackAtFree) {
  if (!ConfigureAllocator()) GTEST_SKIP() << "the allocator is not glibc's";
  // 24 MiB went in; at most the 1 MiB trim threshold, the top pad and
  // bookkeeping may stay.
  EXPECT_LT(ResidentAfterThreadFreesItsHeap(), 4u * 1024);
}

}  // namespace
}  // namespace pollen::runtime
