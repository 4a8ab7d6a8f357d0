#include "node/runtime/resp/command_stats.h"

#include <cassert>

namespace pollen::resp {

CommandStats::CommandStats() : shards_(new Shard[kShards]) {}

size_t CommandStats::BucketOf(uint64_t nanos) {
  // Linear: almost every command ends in one of the first few buckets.
  size_t b = 0;
  while (b < kBoundsNs.size() && nanos > kBoundsNs[b]) ++b;
  return b;
}

void CommandStats::Record(size_t shard, size_t slot, uint64_t nanos, Outcome outcome) {
  assert(slot < kMaxCommands);
  Counters& c = shards_[shard % kShards].commands[slot];
  c.buckets[BucketOf(nanos)].fetch_add(1, std::memory_order_relaxed);
  c.nanos.fetch_add(nanos, std::memory_order_relaxed);
  if (outcome == Outcome::kFailed) c.failed.fetch_add(1, std::memory_order_relaxed);
  if (outcome == Outcome::kRejected) c.rejected.fetch_add(1, std::memory_order_relaxed);
}

CommandStats::Totals CommandStats::Read(size_t slot) const {
  assert(slot < kMaxCommands);
  Totals t;
  for (size_t s = 0; s < kShards; ++s) {
    const Counters& c = shards_[s].commands[slot];
    for (size_t b = 0; b < kBuckets; ++b) t.buckets[b] += c.buckets[b].load(std::memory_order_relaxed);
    t.nanos += c.nanos.load(std::memory_order_relaxed);
    t.failed += c.failed.load(std::memory_order_relaxed);
    t.rejected += c.rejected.load(std::memory_order_relaxed);
  }
  for (uint64_t n : t.buckets) t.calls += n;
  return t;
}

}  // namespace pollen::resp
