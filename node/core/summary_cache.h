// SummaryCache: the anti-entropy range summaries of live generations, kept
// between runs and recomputed only for the ranges marked dirty since.
//
// The driver marks the words it sees change (merged bits, drained client
// adds); Get() recomputes the dirty ranges of one generation and returns all
// of its summaries. A summary read while a client add is between setting its
// bits and handing them to the driver may miss those bits until they are
// drained and marked; anti-entropy tolerates that (a stale summary only delays
// a repair to the next run). Bounded: at most kMaxEntries generations are
// cached; past that the cache starts over. Driver thread only.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "crdt/blocked_filter.h"

namespace pollen::node {

class SummaryCache {
 public:
  static constexpr size_t kMaxEntries = 256;

  // Summaries of generation (uid, epoch) whose filter is `filter`, one per
  // range of BlocksPerRange(blocks) blocks. Valid until the next call.
  const std::vector<uint64_t>& Get(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter);

  // The words (absolute indices) changed in generation (uid, epoch).
  void MarkWords(uint64_t uid, uint64_t epoch, std::span<const crdt::WordBits> words);
  void MarkWord(uint64_t uid, uint64_t epoch, uint64_t word_index);
  // Changes were lost track of: recompute everything on the next Get.
  void InvalidateAll() { entries_.clear(); }
  // The filter with this uid is gone: free its generations' summaries.
  void Forget(uint64_t uid) {
    entries_.erase(entries_.lower_bound({uid, 0}), entries_.upper_bound({uid, ~uint64_t{0}}));
  }

 private:
  struct Entry {
    uint64_t blocks_per_range = 1;
    std::vector<uint64_t> summaries;
    std::vector<uint32_t> dirty;  // range indices, may repeat
    std::vector<uint8_t> is_dirty;
  };
  using Key = std::pair<uint64_t, uint64_t>;  // (filter uid, epoch)
  std::map<Key, Entry> entries_;
};

}  // namespace pollen::node
