// CommandStats: bucket edges, sums over shards, outcomes; and what Dispatch
// tells the caller to count.
#include "node/runtime/resp/command_stats.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/fast_clock.h"
#include "tests/resp/resp_test_util.h"

namespace pollen::resp {
namespace {

TEST(CommandStats, BucketsAreInclusiveUpperBounds) {
  const auto& bounds = CommandStats::kBoundsNs;
  EXPECT_EQ(CommandStats::BucketOf(0), 0u);
  for (size_t b = 0; b < bounds.size(); ++b) {
    EXPECT_EQ(CommandStats::BucketOf(bounds[b]), b) << bounds[b];
    EXPECT_EQ(CommandStats::BucketOf(bounds[b] + 1), b + 1) << bounds[b];
    if (b > 0) {
      EXPECT_LT(bounds[b - 1], bounds[b]);
    }
  }
  EXPECT_EQ(CommandStats::BucketOf(UINT64_MAX), CommandStats::kBuckets - 1);
}

TEST(CommandStats, SumsEveryShardAndCountsOutcomes) {
  CommandStats stats;
  for (size_t shard = 0; shard < CommandStats::kShards; ++shard) {
    stats.Record(shard, 3, 700, CommandStats::Outcome::kOk);
  }
  stats.Record(1, 3, 40'000, CommandStats::Outcome::kFailed);
  stats.Record(2, 3, 100, CommandStats::Outcome::kRejected);  // did not run: no duration
  const CommandStats::Totals t = stats.Read(3);
  EXPECT_EQ(t.calls, CommandStats::kShards + 1);
  EXPECT_EQ(t.nanos, CommandStats::kShards * 700 + 40'000);
  EXPECT_EQ(t.failed, 1u);
  EXPECT_EQ(t.rejected, 1u);
  EXPECT_EQ(t.buckets[CommandStats::BucketOf(700)], CommandStats::kShards);
  EXPECT_EQ(t.buckets[CommandStats::BucketOf(40'000)], 1u);
  EXPECT_EQ(t.buckets[0], 0u);
  EXPECT_EQ(stats.Read(4).calls, 0u);
}

TEST(CommandStats, ReadersSeeConcurrentRecordersAndTheyLoseNothing) {
  CommandStats stats;
  constexpr int kThreads = 4, kEach = 50'000;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&stats, &done, i] {  // a shard per thread, as a RESP thread
      for (int n = 0; n < kEach; ++n) stats.Record(static_cast<size_t>(i), 0, 1, CommandStats::Outcome::kOk);
      done.fetch_add(1);
    });
  }
  uint64_t last = 0;
  while (done.load() < kThreads) {  // a metrics scrape meanwhile: counts only grow
    const uint64_t now = stats.Read(0).calls;
    EXPECT_GE(now, last);
    last = now;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stats.Read(0).calls, uint64_t{kThreads} * kEach);
  EXPECT_EQ(stats.Read(0).nanos, uint64_t{kThreads} * kEach);
}

TEST(FastClock, AgreesWithSteadyClock) {
  CalibrateFastClock();
  const auto steady0 = std::chrono::steady_clock::now();
  const uint64_t fast0 = FastNanos();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const uint64_t fast1 = FastNanos();
  const auto steady1 = std::chrono::steady_clock::now();
  const double steady_ns = static_cast<double>(std::chrono::nanoseconds(steady1 - steady0).count());
  ASSERT_GE(fast1, fast0);
  const double fast_ns = static_cast<double>(fast1 - fast0);
  // The fast interval lies inside the steady one; the rate is measured to
  // 0.1%, 2% (+1 ms for a preemption between the paired reads) is generous.
  EXPECT_LE(fast_ns, steady_ns * 1.02 + 1e6) << (FastClockUsesTsc() ? "tsc" : "steady_clock");
  EXPECT_GE(fast_ns, steady_ns * 0.98 - 1e6) << (FastClockUsesTsc() ? "tsc" : "steady_clock");
  for (int i = 0; i < 1000; ++i) {  // never backwards on a thread
    const uint64_t a = FastNanos();
    EXPECT_GE(FastNanos(), a);
  }
}

class DispatchStatsTest : public ::testing::Test {
 protected:
  void Run(std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string out;
    Dispatch(f_.ctx, session_, views, &out);
  }
  std::string Slot() const { return std::string(CommandSlotName(static_cast<size_t>(session_.stats_slot))); }

  testing::NodeFixture f_;
  Session session_;
};

TEST_F(DispatchStatsTest, TellsTheCallerWhatToCount) {
  Run({"BF.ADD", "f", "a"});
  EXPECT_EQ(Slot(), "bf.add");
  EXPECT_EQ(session_.stats_outcome, CommandStats::Outcome::kOk);
  Run({"bf.exists", "f", "a"});
  EXPECT_EQ(Slot(), "bf.exists");
  Run({"BF.RESERVE", "f", "0.01", "100"});  // "ERR item exists": it ran and failed
  EXPECT_EQ(Slot(), "bf.reserve");
  EXPECT_EQ(session_.stats_outcome, CommandStats::Outcome::kFailed);
  Run({"ECHO"});  // wrong arity: rejected before running
  EXPECT_EQ(Slot(), "echo");
  EXPECT_EQ(session_.stats_outcome, CommandStats::Outcome::kRejected);
  Run({"NOSUCHCOMMAND", "x"});  // unknown: not counted (as Redis)
  EXPECT_EQ(session_.stats_slot, -1);
  Run({"MULTI"});
  EXPECT_EQ(Slot(), "multi");
  Run({"BF.ADD", "f", "b"});  // queued: counted with EXEC
  EXPECT_EQ(session_.stats_slot, -1);
  Run({"EXEC"});
  EXPECT_EQ(Slot(), "exec");
  EXPECT_EQ(session_.stats_outcome, CommandStats::Outcome::kOk);
}

TEST_F(DispatchStatsTest, CountsEachCommandExecRunsAndExecItself) {
  session_.stats_shard = 0;
  const auto calls = [&](std::string_view name) { return f_.ctx.command_stats.Read(testing::StatsSlotOf(name)).calls; };
  Run({"MULTI"});
  Run({"BF.ADD", "f", "a"});
  Run({"BF.ADD", "f", "b"});
  Run({"BF.EXISTS", "f", "a"});
  Run({"EXEC"});
  CountCommand(f_.ctx, session_, 1'000);  // what the connection does for EXEC itself
  EXPECT_EQ(calls("bf.add"), 2u);
  EXPECT_EQ(calls("bf.exists"), 1u);
  EXPECT_EQ(calls("exec"), 1u);
  EXPECT_EQ(calls("multi"), 0u);  // the test counted only EXEC by hand
}

TEST_F(DispatchStatsTest, InfoCommandstatsFollowsRedis) {
  const auto slot_of = testing::StatsSlotOf;
  CommandStats& stats = f_.ctx.command_stats;
  stats.Record(0, slot_of("bf.add"), 3'000, CommandStats::Outcome::kOk);
  stats.Record(1, slot_of("bf.add"), 1'000, CommandStats::Outcome::kFailed);
  stats.Record(0, slot_of("bf.add"), 9'000, CommandStats::Outcome::kRejected);
  std::vector<std::string_view> info = {"INFO", "commandstats"};
  std::string out;
  Dispatch(f_.ctx, session_, info, &out);
  // calls and usec leave the rejected call out (3000 + 1000 ns -> 4 us).
  EXPECT_NE(out.find("# Commandstats\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("cmdstat_bf.add:calls=2,usec=4,usec_per_call=2.00,rejected_calls=1,failed_calls=1\r\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("cmdstat_bf.exists"), std::string::npos) << out;  // never ran
  // Redis: INFO and INFO default leave commandstats out; INFO all has it.
  for (std::vector<std::string_view> args : {std::vector<std::string_view>{"INFO"},
                                             std::vector<std::string_view>{"INFO", "default"}}) {
    out.clear();
    Dispatch(f_.ctx, session_, args, &out);
    EXPECT_EQ(out.find("# Commandstats"), std::string::npos);
    EXPECT_NE(out.find("# Server"), std::string::npos);
  }
  out.clear();
  std::vector<std::string_view> all = {"INFO", "all"};
  Dispatch(f_.ctx, session_, all, &out);
  EXPECT_NE(out.find("# Server"), std::string::npos);
  EXPECT_NE(out.find("cmdstat_bf.add:calls=2"), std::string::npos);
}

}  // namespace
}  // namespace pollen::resp
