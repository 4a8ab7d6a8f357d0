// --threads changes how fast a run is computed, never what it does: every
// fixed scenario and a handful of swarm seeds give the same run, trace hash
// and report with node events on one thread or several (parallel_window.h).
// Labelled "concurrency": CI runs it under TSan too.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "simulation/simulator.h"
#include "simulation/worker_team.h"

namespace pollen::sim {
namespace {

SimOptions Small(uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  o.nodes = 12;
  o.warmup = std::chrono::seconds(3);
  o.duration = std::chrono::seconds(8);
  o.workload.crawl_adds_per_sec = 10;
  o.workload.digest_owners = 2;
  return o;
}

RunResult RunWith(SimOptions o, uint32_t threads) {
  o.threads = threads;
  return Simulator(o).Run();
}

void ExpectSameRun(const RunResult& serial, const RunResult& parallel) {
  EXPECT_EQ(serial.trace_hash, parallel.trace_hash);
  EXPECT_EQ(serial.trace_events, parallel.trace_events);
  EXPECT_EQ(serial.passed, parallel.passed);
  EXPECT_EQ(serial.failure_count, parallel.failure_count);
  EXPECT_EQ(serial.virtual_seconds, parallel.virtual_seconds);
  EXPECT_EQ(serial.convergence_seconds, parallel.convergence_seconds);
  EXPECT_EQ(serial.wire_bytes, parallel.wire_bytes);
  EXPECT_EQ(serial.frames_sent, parallel.frames_sent);
  EXPECT_EQ(serial.frames_delivered, parallel.frames_delivered);
  EXPECT_EQ(serial.network.planned, parallel.network.planned);
  EXPECT_EQ(serial.network.lost, parallel.network.lost);
  EXPECT_EQ(serial.network.partition_dropped, parallel.network.partition_dropped);
  EXPECT_EQ(serial.paused_frames_dropped, parallel.paused_frames_dropped);
  EXPECT_EQ(serial.acked, parallel.acked);
  EXPECT_EQ(serial.new_keys, parallel.new_keys);
  EXPECT_EQ(serial.false_suspect_events, parallel.false_suspect_events);
  EXPECT_EQ(serial.events_by_kind, parallel.events_by_kind);
  EXPECT_EQ(serial.bytes_out_by_type, parallel.bytes_out_by_type);
  EXPECT_EQ(serial.p999_median, parallel.p999_median);
  EXPECT_EQ(serial.routed_new_p99_ms, parallel.routed_new_p99_ms);
  EXPECT_EQ(serial.duplicate_new_keys, parallel.duplicate_new_keys);
}

class ParallelWindows : public ::testing::TestWithParam<std::string> {};

TEST_P(ParallelWindows, ScenarioRunsTheSameOnOneAndTwoThreads) {
  SimOptions o = Small(7);
  ASSERT_TRUE(ApplyScenario(GetParam(), o).ok());
  const RunResult one = RunWith(o, 1);
  const RunResult two = RunWith(o, 2);
  EXPECT_TRUE(one.passed) << FormatSummary(one);
  EXPECT_EQ(one.windows, 0u);  // one thread: the serial loop alone
  EXPECT_GT(two.parallel_windows, 100u) << "the windows really ran on the team";
  ExpectSameRun(one, two);
}

INSTANTIATE_TEST_SUITE_P(AllScenarios, ParallelWindows, ::testing::ValuesIn(ScenarioNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = (c == '-') ? '_' : c;
                           return name;
                         });

TEST(ParallelWindowsThreeThreads, PausesAndSlowNodesRunTheSame) {
  // More lanes than this machine's cores, and the scenario whose nodes hold
  // and delay frames (a node's own events created inside a window).
  SimOptions o = Small(3);
  ASSERT_TRUE(ApplyScenario("pause", o).ok());
  const RunResult one = RunWith(o, 1);
  EXPECT_GT(one.pauses, 0u);
  const RunResult three = RunWith(o, 3);
  EXPECT_GT(three.parallel_windows, 100u);
  ExpectSameRun(one, three);
}

TEST(ParallelWindowsSwarm, SwarmSeedsRunTheSame) {
  SimOptions base = Small(0);
  base.swarm = true;
  for (uint64_t seed = 2000; seed < 2006; ++seed) {
    const SimOptions o = OptionsForSeed(base, seed);
    SCOPED_TRACE(seed);
    ExpectSameRun(RunWith(o, 1), RunWith(o, 2));
  }
}

TEST(ParallelWindowsOwnerRouting, ContendedRoutedAddsRunTheSame) {
  SimOptions o = Small(9);
  o.workload.routed = true;
  o.workload.contended_keys_per_sec = 5;
  const RunResult one = RunWith(o, 1);
  EXPECT_GT(one.contended_keys, 0u);
  EXPECT_GT(one.routed_remote_keys, 0u);
  ExpectSameRun(one, RunWith(o, 2));
}

TEST(ParallelWindowsWait, WaitWorkloadStaysSerial) {
  // WAIT's answers are judged against other nodes at commit: not windowed.
  SimOptions o = Small(5);
  o.workload.wait_every = std::chrono::milliseconds(500);
  const RunResult two = RunWith(o, 2);
  EXPECT_EQ(two.windows, 0u);
  EXPECT_GT(two.waits, 0u);
  ExpectSameRun(RunWith(o, 1), two);
}

TEST(WorkerTeam, EveryMemberRunsEachJobAndItsWritesAreSeen) {
  WorkerTeam team(3);
  ASSERT_EQ(team.size(), 3);
  std::vector<uint64_t> sums(3, 0);  // each member writes only its own slot
  std::atomic<int> calls{0};
  for (uint64_t round = 1; round <= 500; ++round) {
    team.Run([&](int k) {
      sums[static_cast<size_t>(k)] += round * static_cast<uint64_t>(k + 1);
      calls.fetch_add(1, std::memory_order_relaxed);
    });
    // Plain reads after Run: the join made the members' writes visible.
    const uint64_t expected = round * (round + 1) / 2;
    ASSERT_EQ(sums[0], expected);
    ASSERT_EQ(sums[1], 2 * expected);
    ASSERT_EQ(sums[2], 3 * expected);
  }
  EXPECT_EQ(calls.load(), 1500);
}

TEST(WorkerTeam, ATeamOfOneRunsOnTheCaller) {
  WorkerTeam team(1);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran;
  team.Run([&](int k) {
    EXPECT_EQ(k, 0);
    ran = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, caller);
}

}  // namespace
}  // namespace pollen::sim
