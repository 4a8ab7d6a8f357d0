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
// As Redis: a command EXEC runs counts under its own name and EXEC counts
// the whole; unknown commands, and commands MULTI queues, are not counted; a
// rejected call (arity, NOAUTH) counts as rejected, without a duration.
//
// A pipelined run of BF.ADD or BF.EXISTS requests (command_run.h) executes
// as one batch: each of its requests counts with the run's time divided by
// its length.
//
// Cost: the connection reads FastNanos() once per command or run (in a
// pipelined batch one command's end is the next one's start) and Record() adds to
// counters only its thread writes. bench/runtime/pollend_ab.sh measured
// the whole against a build without it (figures in docs/metrics.md).
//
// Threading: a shard per RESP thread, written only by that thread (relaxed
// loads and stores, no read-modify-write: two fetch_adds cost 9.5 ns on the
// CI machine, a load and store 0.5 ns). Read from any thread: a concurrent
// Record may be seen in one counter and not yet in another.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace pollen::resp {

class CommandStats {
 public:
  // Command slots: the index of a command in the command table
  // (AllCommands(); command_table.cc asserts it fits).
  static constexpr size_t kMaxCommands = 96;
  // One per RESP thread (resp-threads is at most 64).
  static constexpr size_t kShards = 64;
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

  CommandStats() = default;
  ~CommandStats();
  CommandStats(const CommandStats&) = delete;
  CommandStats& operator=(const CommandStats&) = delete;

  // Counts one call of command `slot` (< kMaxCommands) that took `nanos`
  // (a rejected call counts only as rejected: it did not run, as Redis').
  // Shard `shard` (< kShards) must be written by one thread only (the
  // connection passes its event loop's index).
  void Record(size_t shard, size_t slot, uint64_t nanos, Outcome outcome);

  struct Totals {
    std::array<uint64_t, kBuckets> buckets{};  // per bucket, not cumulative
    uint64_t calls = 0;                        // calls that ran: sum of buckets
    uint64_t nanos = 0;     // of the calls that ran
    uint64_t failed = 0;    // of the calls that ran
    uint64_t rejected = 0;  // not in calls
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
  // Allocated by the shard's first Record (20 KiB each), freed with this.
  std::array<std::atomic<Shard*>, kShards> shards_{};
};

}  // namespace pollen::resp
