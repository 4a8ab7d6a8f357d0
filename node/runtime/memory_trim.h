// Gives memory that the allocator holds free back to the kernel, now and
// then. glibc keeps what a thread frees in that thread's arena and returns
// it only from the top of the heap: after a bulk load, a 4 GiB node held
// ~190 MiB in four arenas beside its filter (campaign, 2026-12-05), most of
// it free (docs/web-scale.md, "Memory at rest"). A no-op where the C library
// is not glibc.
#pragma once

#include <chrono>
#include <cstdint>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace pollen::runtime {

// Fixes glibc's mmap and trim thresholds, once, before the node allocates.
// By default glibc raises both each time it frees a large mmapped block (up
// to 32 and 64 MiB), and malloc_trim never shrinks the top of a thread's
// arena: after a bulk load a 256 MiB node kept 13-18 MiB resident at the
// tops of two thread arenas, free and out of malloc_trim's reach
// (docs/web-scale.md, "Memory at rest"). With fixed thresholds a block of
// kMmapThresholdBytes or more is mapped on its own and unmapped when freed,
// and an arena's top gives back what exceeds kTrimThresholdBytes at each free.
// False where the allocator is not glibc's or refused the values (sanitizer
// builds replace malloc).
bool ConfigureAllocator();
inline constexpr int kMmapThresholdBytes = 1 << 20;
inline constexpr int kTrimThresholdBytes = 1 << 20;

// Bytes the allocator holds free (glibc's mallinfo2 fordblks, all arenas);
// 0 where unknown.
uint64_t AllocatorFreeBytes();
// malloc_trim(0): the free pages of every arena go back to the kernel.
void TrimAllocator();

// Checks every kPeriod on `io`'s thread and trims when more than
// kThresholdBytes are free and that figure moved since the last trim.
// malloc_trim locks each arena while it walks it (milliseconds at these
// sizes), so it runs on a thread that serves no client.
class MemoryTrimmer {
 public:
  static constexpr std::chrono::seconds kPeriod{10};
  static constexpr uint64_t kThresholdBytes = uint64_t{16} << 20;

  explicit MemoryTrimmer(boost::asio::io_context& io, std::chrono::milliseconds period = kPeriod)
      : timer_(io), period_(period) {}
  void Start() { Arm(); }
  uint64_t trims() const { return trims_; }

 private:
  void Arm();
  boost::asio::steady_timer timer_;
  std::chrono::milliseconds period_;
  uint64_t trims_ = 0;
  uint64_t free_at_last_trim_ = 0;
};

}  // namespace pollen::runtime
