// CommandStats: how many times each RESP command ran, how it ended and how
// long it took, for /metrics (pollen_resp_command_duration_seconds, a
// Prometheus histogram per command) and INFO commandstats (Redis' cmdstat_
// lines).
//
// What a duration covers: from the moment the connection starts parsing the
// request to the moment its reply is in the connection's output buffer, on
// the RESP thread: parsing and executing, not the time the request waited in
// the socket nor the time its reply takes to send (as Redis' commandstats).
// A deferred reply (WAIT, POLLEN.QEXISTS, a BF.ADD its owners decide) is
// timed until its reply is written, so it includes the wait for the peers.
// Commands inside MULTI ... EXEC count once, as EXEC; unknown commands and
// commands queued by MULTI are not counted (as Redis).
//
// Cost: the connection reads the clock once per command (in a pipelined
// batch one command's end is the next one's start) and Record() is two
// relaxed fetch_adds on its thread's shard. bench/runtime/pollend_ab.sh
// measured the whole against a build without it (docs/metrics.md).
//
// Threading: Record from any thread (a shard per RESP thread keeps their
// cache lines apart; threads beyond kShards share, which stays correct).
// Read from any thread: a concurrent Record may be seen in one counter and
// not yet in another.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace pollen::resp {

class CommandStats {
 public:
  // Command slots: the index of a command in the command table
  // (AllCommands(); command_table.cc asserts it fits).
  static constexpr size_t kMaxCommands = 96;
  static constexpr size_t kShards = 16;
  // Upper bounds of the histogram's buckets, nanoseconds; a last bucket
  // (+Inf) takes the rest. From 250 ns (a BF.EXISTS parses and runs in
  // well under 1 us) to 10 s (a WAIT's or a snapshot's worst).
  static constexpr std::array<uint64_t, 23> kBoundsNs = {
      250,        500,        1'000,       2'500,       5'000,       10'000,        25'000,     50'000,
      100'000,    250'000,    500'000,     1'000'000,   2'500'000,   5'000'000,     10'000'000, 25'000'000,
      50'000'000, 100'000'000, 250'000'000, 500'000'000, 1'000'000'000, 2'500'000'000, 10'000'000'000};
  static constexpr size_t kBuckets = kBoundsNs.size() + 1;

  enum class Outcome : uint8_t {
    kOk,        // executed, answered with a non-error reply
    kFailed,    // executed, answered with an error (Redis' failed_calls)
    kRejected,  // refused before executing: arity, NOAUTH (rejected_calls)
  };

  CommandStats();

  // Counts one call of command `slot` (< kMaxCommands) that took `nanos`.
  void Record(size_t shard, size_t slot, uint64_t nanos, Outcome outcome);

  struct Totals {
    std::array<uint64_t, kBuckets> buckets{};  // per bucket, not cumulative
    uint64_t calls = 0;                        // sum of buckets
    uint64_t nanos = 0;
    uint64_t failed = 0;
    uint64_t rejected = 0;
  };
  // Sums the shards for command `slot`.
  Totals Read(size_t slot) const;

  // The bucket `nanos` falls in.
  static size_t BucketOf(uint64_t nanos);

 private:
  struct Counters {
    std::array<std::atomic<uint64_t>, kBuckets> buckets{};
    std::atomic<uint64_t> nanos{0};
    std::atomic<uint64_t> failed{0};
    std::atomic<uint64_t> rejected{0};
  };
  struct alignas(64) Shard {
    std::array<Counters, kMaxCommands> commands;
  };
  std::unique_ptr<Shard[]> shards_;  // kShards; on the heap (about 330 KiB)
};

}  // namespace pollen::resp
