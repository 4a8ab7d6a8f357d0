#include "node/runtime/memory_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <spdlog/spdlog.h>

namespace pollen::runtime {

uint64_t AllocatorFreeBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return static_cast<uint64_t>(mallinfo2().fordblks);
#else
  return 0;
#endif
}

bool ConfigureAllocator() {
#if defined(__GLIBC__)
  // mallopt answers 1 on success; both values are within glibc's bounds.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

void TrimAllocator() {
#if defined(__GLIBC__)
  (void)malloc_trim(0);
#endif
}

void MemoryTrimmer::Arm() {
  timer_.expires_after(period_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    // An idle node's allocator does not change: trimmed once, then left.
    if (const uint64_t free_bytes = AllocatorFreeBytes();
        free_bytes > kThresholdBytes && free_bytes != free_at_last_trim_) {
      spdlog::debug("memory: {} MiB free in the allocator; trimming", free_bytes >> 20);
      TrimAllocator();
      free_at_last_trim_ = AllocatorFreeBytes();  // trimming the heap's top lowers it
      ++trims_;
    }
    Arm();
  });
}

}  // namespace pollen::runtime
