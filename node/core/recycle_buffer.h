// RecycleBuffer: empties a scratch vector for its next use, keeping its
// allocation only while that pays.
#ifndef POLLEN_NODE_CORE_RECYCLE_BUFFER_H_
#define POLLEN_NODE_CORE_RECYCLE_BUFFER_H_

#include <cstddef>
#include <vector>

namespace pollen::node {

// Clears `buffer`. Its capacity stays while it is small (at most
// kKeptBytes) or while this use filled at least a quarter of it, so a steady
// flow of big batches reuses one allocation, and a burst's buffer is freed
// at the first round after the burst: memory at rest stays what rest needs.
//
// Why: the daemon has glibc map every allocation of 1 MiB and more on its
// own (memory_trim.h), so a vector rebuilt from empty each round costs an
// mmap, a fault per fresh 4 KiB page and an munmap. During a 256 MiB bulk
// load (three nodes, 2x10^7 keys) the buffers of client adds and gossip
// rounds rebuilt that way took the kernel's share of a node's CPU from 10%
// to 18% (perf; docs/web-scale.md, "Recycled buffers").
template <typename T>
void RecycleBuffer(std::vector<T>& buffer) {
  constexpr size_t kKeptBytes = size_t{256} << 10;
  if (buffer.capacity() * sizeof(T) > kKeptBytes && buffer.size() < buffer.capacity() / 4) {
    std::vector<T>().swap(buffer);
  } else {
    buffer.clear();
  }
}

}  // namespace pollen::node

#endif  // POLLEN_NODE_CORE_RECYCLE_BUFFER_H_
