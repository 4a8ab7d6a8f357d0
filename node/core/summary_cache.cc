#include "node/core/summary_cache.h"

#include <cassert>

#include "node/core/anti_entropy.h"

namespace pollen::node {

const std::vector<uint64_t>& SummaryCache::Get(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter) {
  const Key key(uid, epoch);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxEntries) entries_.clear();
    Entry e;
    e.blocks_per_range = BlocksPerRange(filter.shape().blocks);
    e.summaries = filter.RangeSummaries(e.blocks_per_range);
    e.is_dirty.assign(e.summaries.size(), 0);
    it = entries_.emplace(key, std::move(e)).first;
    return it->second.summaries;
  }
  Entry& e = it->second;
  assert(e.summaries.size() == filter.RangeCount(e.blocks_per_range));
  for (uint32_t r : e.dirty) {
    if (!e.is_dirty[r]) continue;
    e.summaries[r] = filter.RangeSummary(r, e.blocks_per_range);
    e.is_dirty[r] = 0;
  }
  e.dirty.clear();
  return e.summaries;
}

void SummaryCache::MarkWord(uint64_t uid, uint64_t epoch, uint64_t word_index) {
  auto it = entries_.find(Key(uid, epoch));
  if (it == entries_.end()) return;  // computed afresh on the next Get
  Entry& e = it->second;
  const uint64_t range = word_index / crdt::kWordsPerBlock / e.blocks_per_range;
  if (range >= e.summaries.size()) {  // never for words the filter accepted
    entries_.erase(it);
    return;
  }
  if (e.is_dirty[range]) return;
  e.is_dirty[range] = 1;
  e.dirty.push_back(static_cast<uint32_t>(range));  // at most one per range: bounded
}

void SummaryCache::MarkWords(uint64_t uid, uint64_t epoch, std::span<const crdt::WordBits> words) {
  if (words.empty() || !entries_.count(Key(uid, epoch))) return;
  for (const crdt::WordBits& w : words) MarkWord(uid, epoch, w.index);
}

}  // namespace pollen::node
