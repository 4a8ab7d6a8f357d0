// ChunkedVector: a grow-only sequence whose elements never move.
//
// What it promises:
//  - emplace_back() appends a default element; a reference to any element
//    stays good for the vector's lifetime (elements live in fixed chunks of
//    kChunk, never reallocated).
//  - operator[] is one load of a chunk pointer (from a small, usually cached
//    array) and one of the element.
//
// Why not std::deque, which also keeps elements in place: libstdc++'s deque
// holds 512 bytes per chunk (9 member entries), so its chunk map is large
// and every lookup of a random element missed the cache twice. The member
// tables of pollen-sim's nodes are looked up on every frame; with 10,000
// nodes each holding 10,000 entries, those misses were most of
// MemberTable::Find's 12% of the steady-state CPU (perf, simulation/README.md).
//
// Not thread-safe.
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>
#include <vector>

namespace pollen::node {

template <typename T, size_t kChunk = 128>
class ChunkedVector {
  static_assert(kChunk > 0 && (kChunk & (kChunk - 1)) == 0, "a power of two: index by shift and mask");

 public:
  size_t size() const { return size_; }

  T& emplace_back() {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }

  T& operator[](size_t i) {
    assert(i < size_);
    return chunks_[i / kChunk][i % kChunk];
  }
  const T& operator[](size_t i) const {
    assert(i < size_);
    return chunks_[i / kChunk][i % kChunk];
  }

  // Every element in index order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (size_t i = 0; i < size_; ++i) fn((*this)[i]);
  }
  template <typename Fn>
  void ForEach(Fn&& fn) {
    for (size_t i = 0; i < size_; ++i) fn((*this)[i]);
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace pollen::node
