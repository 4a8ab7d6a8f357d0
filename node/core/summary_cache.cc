#include "node/core/summary_cache.h"

#include <algorithm>
#include <cassert>

#include "crdt/mix64.h"
#include "node/core/anti_entropy.h"

namespace pollen::node {

SummaryCache::Entry& SummaryCache::Find(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter,
                                        bool looks_empty) {
  const Key key(uid, epoch);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxEntries) entries_.clear();
    Entry e;
    e.blocks_per_range = BlocksPerRange(filter.shape().blocks);
    const uint64_t ranges = filter.RangeCount(e.blocks_per_range);
    // Placeholders until each range is first scanned: a mix of this cache's
    // salt and the range matches a real summary, an empty range's or another
    // node's placeholder with probability 2^-64.
    e.summaries.resize(ranges);
    for (uint64_t r = 0; r < ranges; ++r) {
      e.summaries[r] = looks_empty ? filter.EmptyRangeSummary(r, e.blocks_per_range)
                                   : crdt::Mix64(crdt::Mix64(salt_ ^ uid) ^ (r + 1));
    }
    e.is_dirty.assign(ranges, 0);
    if (!looks_empty) MarkAllOf(e);
    it = entries_.emplace(key, std::move(e)).first;
  }
  assert(it->second.summaries.size() == filter.RangeCount(it->second.blocks_per_range));
  return it->second;
}

uint64_t SummaryCache::RefreshEntry(Entry& e, const crdt::BlockedFilter& filter, uint64_t max_words) {
  const uint64_t range_words = e.blocks_per_range * crdt::kWordsPerBlock;
  uint64_t scanned = 0;
  // At least one range per call, so that every dirty range is reached.
  while (e.dirty_head < e.dirty.size() && (scanned == 0 || scanned + range_words <= max_words)) {
    const uint32_t r = e.dirty[e.dirty_head++];
    if (!e.is_dirty[r]) continue;  // cleaned by RefreshRange since it was queued
    Recompute(e, filter, r);
    scanned += range_words;
  }
  if (e.dirty_head == e.dirty.size()) {
    e.dirty.clear();
    e.dirty_head = 0;
  } else if (e.dirty_head > e.dirty.size() / 2) {
    Compact(e);
  }
  return scanned;
}

void SummaryCache::Recompute(Entry& e, const crdt::BlockedFilter& filter, uint64_t range) {
  assert(e.is_dirty[range]);
  e.summaries[range] = filter.RangeSummary(range, e.blocks_per_range);
  e.is_dirty[range] = 0;
  --e.dirty_count;
}

void SummaryCache::Compact(Entry& e) {
  size_t kept = 0;
  for (size_t i = e.dirty_head; i < e.dirty.size(); ++i) {
    if (e.is_dirty[e.dirty[i]]) e.dirty[kept++] = e.dirty[i];
  }
  e.dirty.resize(kept);
  e.dirty_head = 0;
  assert(kept == e.dirty_count);
}

void SummaryCache::RefreshRange(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter, uint64_t range) {
  auto it = entries_.find(Key(uid, epoch));
  if (it == entries_.end()) return;  // computed whole, or from placeholders, by the next Get
  Entry& e = it->second;
  if (range < e.summaries.size() && e.is_dirty[range]) Recompute(e, filter, range);
}

const std::vector<uint64_t>& SummaryCache::Get(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter,
                                               bool looks_empty) {
  Entry& e = Find(uid, epoch, filter, looks_empty);
  RefreshEntry(e, filter, refresh_words_);
  return e.summaries;
}

void SummaryCache::Refresh(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter, uint64_t* budget_words,
                           bool looks_empty) {
  assert(budget_words != nullptr);
  if (*budget_words == 0 || filter.word_count() <= refresh_words_) return;
  Entry& e = Find(uid, epoch, filter, looks_empty);
  if (e.dirty_head == e.dirty.size()) return;
  const uint64_t scanned = RefreshEntry(e, filter, *budget_words);
  *budget_words -= std::min(scanned, *budget_words);
}

bool SummaryCache::KnownEmpty(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter, uint64_t range) const {
  auto it = entries_.find(Key(uid, epoch));
  if (it == entries_.end()) return false;
  const Entry& e = it->second;
  return range < e.summaries.size() && !e.is_dirty[range] &&
         e.summaries[range] == filter.EmptyRangeSummary(range, e.blocks_per_range);
}

size_t SummaryCache::DirtyRanges(uint64_t uid, uint64_t epoch) const {
  auto it = entries_.find(Key(uid, epoch));
  return it == entries_.end() ? 0 : it->second.dirty_count;
}

size_t SummaryCache::DirtyRanges() const {
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += e.dirty_count;
  return n;
}

void SummaryCache::MarkWord(uint64_t uid, uint64_t epoch, uint64_t word_index) {
  const crdt::WordBits word{word_index, 1};
  MarkWords(uid, epoch, std::span<const crdt::WordBits>(&word, 1));
}

void SummaryCache::MarkWords(uint64_t uid, uint64_t epoch, std::span<const crdt::WordBits> words) {
  if (words.empty()) return;
  auto it = entries_.find(Key(uid, epoch));  // once, not per word (2% of a joining node's CPU)
  if (it == entries_.end()) return;  // created with every range dirty by the next Get
  Entry& e = it->second;
  const uint64_t range_words = e.blocks_per_range * crdt::kWordsPerBlock;
  uint64_t range_end = 0;  // the words of the range marked last end here (ascending words: one division a range)
  for (const crdt::WordBits& w : words) {
    if (w.index < range_end && w.index + range_words >= range_end) continue;
    const uint64_t range = w.index / range_words;
    if (range >= e.summaries.size()) {  // never for words the filter accepted
      entries_.erase(it);
      return;
    }
    MarkRange(e, range);
    range_end = (range + 1) * range_words;
  }
}

void SummaryCache::MarkRange(Entry& e, uint64_t range) {
  if (e.is_dirty[range]) return;  // queued already: each dirty range once
  // A range cleaned by RefreshRange and marked again is queued twice (the
  // first entry is skipped): compacting bounds the queue by twice the ranges.
  if (e.dirty.size() >= 2 * e.summaries.size()) Compact(e);
  e.is_dirty[range] = 1;
  ++e.dirty_count;
  e.dirty.push_back(static_cast<uint32_t>(range));
}

void SummaryCache::MarkAllOf(Entry& e) {
  for (uint64_t r = 0; r < e.summaries.size(); ++r) MarkRange(e, r);
}

void SummaryCache::MarkAll(uint64_t uid, uint64_t epoch) {
  auto it = entries_.find(Key(uid, epoch));
  if (it != entries_.end()) MarkAllOf(it->second);
}

void SummaryCache::MarkEverything() {
  for (auto& [key, e] : entries_) MarkAllOf(e);
}

}  // namespace pollen::node
