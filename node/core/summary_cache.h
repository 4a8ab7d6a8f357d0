// SummaryCache: the anti-entropy range summaries of live generations, kept
// between runs and recomputed only for the ranges marked dirty since.
//
// The driver marks the words it sees change (merged bits, drained client
// adds); Get() recomputes dirty ranges of one generation, oldest mark first,
// and returns all of its summaries. A summary read while a client add is
// between setting its bits and handing them to the driver may miss those
// bits until they are drained and marked; anti-entropy tolerates that (a
// stale summary only delays a repair to the next run).
//
// Get() scans at most `refresh_words` filter words per call; ranges past that
// keep their last summary (or, never computed, one that matches no replica's)
// and stay dirty for the next call. Why: at 4 GiB, 20,000 adds/s dirty every
// one of the 1,024 ranges between two runs, and recomputing them all is a
// 4 GiB scan on the driver thread (~1.8 s: RangeSummary runs at 4.3x a plain
// sum, bench_scan), during which the node answers no probe; its peers marked
// it suspect (tests/scale/scale.sh 4gb, 2026-12-06). A stale summary is safe
// for the same reason as above: it reflects bits the replica held, a
// difference it hides is found once the range is recomputed, and the oldest
// dirty range is always recomputed first, so each is within
// ceil(words / refresh_words) calls. Ranges that differ only because of
// staleness descend to block hashes, which are read from the live filter.
//
// Bounded: at most kMaxEntries generations are cached; past that the cache
// starts over. Driver thread only.
#pragma once

#include <cassert>
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
  // 64 MiB of filter per Get: ~30 ms of the driver's time. Filters up to
  // this size are recomputed whole on every call, as before the bound.
  static constexpr uint64_t kRefreshWords = uint64_t{8} << 20;

  // `salt` makes the summary of a range never computed here unlike any other
  // node's (give each node its own; equal placeholders on two nodes would
  // hide a difference until both are recomputed).
  explicit SummaryCache(uint64_t salt = 0, uint64_t refresh_words = kRefreshWords)
      : salt_(salt), refresh_words_(refresh_words) {
    assert(refresh_words > 0);
  }

  // Summaries of generation (uid, epoch) whose filter is `filter`, one per
  // range of BlocksPerRange(blocks) blocks, with at most refresh_words words
  // scanned to bring dirty ones up to date. Valid until the next call.
  //
  // `looks_empty`: the caller counts no set bit in the generation (its
  // counts take in every bit merged, loaded or drained from client adds).
  // Ranges never computed then start at the empty summary, clean: they are
  // empty but for client adds not drained yet, which are marked when they
  // are, as anywhere else. Why: a new or wiped node's ranges must look
  // empty for the flat exchange (docs/web-scale.md, "Catch-up"); with
  // placeholders its 4 GiB catch-up went through block hashes, 19-21 s ->
  // 27-31 s (tests/scale/scale.sh 4gb). And clean: dirty, they were
  // scanned (4 GiB of zeros) to compute what was known, and exported to
  // peers' runs before that, stalling the joining node for seconds at a
  // time; its peers suspected it (scale.sh 4gb, 2026-12-07). A wrong hint
  // (bits the counts missed) stays hidden until a mark of that range.
  const std::vector<uint64_t>& Get(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter,
                                   bool looks_empty = false);
  // Between anti-entropy runs (once a gossip round): recomputes dirty
  // ranges of (uid, epoch), oldest first, while *budget_words lasts (lowered
  // by the words scanned), if the generation is bigger than one Get scans.
  // Smaller ones are left to Get, which computes them whole when a run needs
  // them: refreshing those every round would redo ranges that a busy filter
  // marks again before the next run.
  void Refresh(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter, uint64_t* budget_words,
               bool looks_empty = false);
  // Recomputes `range` of (uid, epoch) now if it is dirty, whatever the
  // budget. For a range just merged whole from a peer (a joining node's bulk
  // catch-up), while its words are in the cache: until recomputed, its
  // summary stays the empty one it started at, and the other peers' runs
  // took it for an empty range and exchanged it whole again (perf, 1 GiB:
  // the joiner exported and coded ranges it had just received).
  void RefreshRange(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter, uint64_t range);
  // The cached summary of `range` is the empty one and the range was not
  // marked since: it holds no bit (but client adds not drained yet), and
  // needs no export to be sent.
  bool KnownEmpty(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter, uint64_t range) const;
  // Ranges of (uid, epoch) marked dirty and not recomputed since (0 when
  // the generation is not cached).
  size_t DirtyRanges(uint64_t uid, uint64_t epoch) const;
  // Ranges marked dirty and not recomputed since, over every generation.
  size_t DirtyRanges() const;

  // The words (absolute indices) changed in generation (uid, epoch).
  void MarkWords(uint64_t uid, uint64_t epoch, std::span<const crdt::WordBits> words);
  void MarkWord(uint64_t uid, uint64_t epoch, uint64_t word_index);
  // Some changes to (uid, epoch) were not told: every range is dirty.
  void MarkAll(uint64_t uid, uint64_t epoch);
  // Changes were lost track of everywhere: every range of every generation.
  void MarkEverything();
  // The filter with this uid is gone: free its generations' summaries.
  void Forget(uint64_t uid) {
    entries_.erase(entries_.lower_bound({uid, 0}), entries_.upper_bound({uid, ~uint64_t{0}}));
  }

 private:
  struct Entry {
    uint64_t blocks_per_range = 1;
    std::vector<uint64_t> summaries;
    // Range indices in marking order, each dirty one once; a range that
    // RefreshRange cleaned stays queued, and is skipped when reached.
    std::vector<uint32_t> dirty;
    size_t dirty_head = 0;  // dirty[dirty_head..] are still to recompute
    size_t dirty_count = 0;  // ranges with is_dirty set
    std::vector<uint8_t> is_dirty;
  };
  using Key = std::pair<uint64_t, uint64_t>;  // (filter uid, epoch)
  Entry& Find(uint64_t uid, uint64_t epoch, const crdt::BlockedFilter& filter, bool looks_empty);  // created if absent
  // Recomputes dirty ranges, oldest first, up to `max_words` words (at least
  // one range); returns the words scanned.
  static uint64_t RefreshEntry(Entry& e, const crdt::BlockedFilter& filter, uint64_t max_words);
  static void Recompute(Entry& e, const crdt::BlockedFilter& filter, uint64_t range);  // a dirty range, now clean
  static void MarkRange(Entry& e, uint64_t range);  // queues `range` unless it is dirty
  static void Compact(Entry& e);  // drops the queue's consumed and cleaned entries
  static void MarkAllOf(Entry& e);

  const uint64_t salt_;
  const uint64_t refresh_words_;
  std::map<Key, Entry> entries_;
};

}  // namespace pollen::node
