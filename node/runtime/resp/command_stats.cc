#include "node/runtime/resp/command_stats.h"

#include <cassert>

namespace pollen::resp {

CommandStats::~CommandStats() {
  for (auto& shard : shards_) delete shard.load(std::memory_order_acquire);
}

size_t CommandStats::BucketOf(uint64_t nanos) {
  // Linear: almost every command ends in one of the first few buckets.
  size_t b = 0;
  while (b < kBoundsNs.size() && nanos > kBoundsNs[b]) ++b;
  return b;
}

void CommandStats::Record(size_t shard, size_t slot, uint64_t nanos, Outcome outcome) {
  assert(shard < kShards);
  assert(slot < kMaxCommands);
  Shard* s = shards_[shard].load(std::memory_order_relaxed);  // only this thread stores it
  if (s == nullptr) {
    s = new Shard();
    shards_[shard].store(s, std::memory_order_release);  // readers see it zeroed
  }
  // Single writer: a load and a store, no read-modify-write.
  const auto bump = [](std::atomic<uint64_t>& a, uint64_t by) {
    a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  };
  Counters& c = s->commands[slot];
  if (outcome == Outcome::kRejected) return bump(c.rejected, 1);  // it did not run: no duration
  bump(c.buckets[BucketOf(nanos)], 1);
  bump(c.nanos, nanos);
  if (outcome == Outcome::kFailed) bump(c.failed, 1);
}

CommandStats::Totals CommandStats::Read(size_t slot) const {
  assert(slot < kMaxCommands);
  Totals t;
  for (const auto& shard : shards_) {
    const Shard* s = shard.load(std::memory_order_acquire);
    if (s == nullptr) continue;
    const Counters& c = s->commands[slot];
    for (size_t b = 0; b < kBuckets; ++b) t.buckets[b] += c.buckets[b].load(std::memory_order_relaxed);
    t.nanos += c.nanos.load(std::memory_order_relaxed);
    t.failed += c.failed.load(std::memory_order_relaxed);
    t.rejected += c.rejected.load(std::memory_order_relaxed);
  }
  for (uint64_t n : t.buckets) t.calls += n;
  return t;
}

}  // namespace pollen::resp
