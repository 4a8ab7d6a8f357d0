// RecycleBuffer: empties a scratch vector for its next use, keeping its
// allocation only while that pays.
#ifndef POLLEN_NODE_CORE_RECYCLE_BUFFER_H_
#define POLLEN_NODE_CORE_RECYCLE_BUFFER_H_

#include <cstddef>
#include <vector>

namespace pollen::node {

// Clears `buffer`. Its capacity stays while it is small (at most
// kSmallBytes), or while it is at most kMaxKeptBytes and this use filled at
// least a quarter of it: a steady flow of batches reuses one allocation, and a
// burst's buffer is freed at the first quiet round, so memory at rest stays
// what rest needs. The cap bounds what a node holds just after a burst (a
// snapshot then must stay within filter + 64 MiB: issue 53).
//
// Why: the daemon has glibc map every allocation of 1 MiB and more on its
// own (memory_trim.h), so a vector rebuilt from empty each round costs an
// mmap, a fault per fresh 4 KiB page and an munmap. During a 256 MiB bulk
// load (three nodes, 2x10^7 keys) the buffers of client adds and gossip
// rounds rebuilt that way took the kernel's share of a node's CPU from 10%
// to 18% (perf; docs/web-scale.md, "Recycled buffers").
inline constexpr size_t kSmallBytes = size_t{256} << 10;
inline constexpr size_t kMaxKeptBytes = size_t{4} << 20;

template <typename T>
void RecycleBuffer(std::vector<T>& buffer) {
  const size_t bytes = buffer.capacity() * sizeof(T);
  const bool keep = bytes <= kSmallBytes || (bytes <= kMaxKeptBytes && buffer.size() >= buffer.capacity() / 4);
  if (keep) {
    buffer.clear();
  } else {
    std::vector<T>().swap(buffer);
  }
}

}  // namespace pollen::node

#endif  // POLLEN_NODE_CORE_RECYCLE_BUFFER_H_
