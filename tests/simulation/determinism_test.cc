// Same seed and options => same trace hash; a different seed => a different one.
#include <gtest/gtest.h>

#include "simulation/simulator.h"

namespace pollen::sim {
namespace {

SimOptions Small(uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  o.nodes = 6;
  o.warmup = std::chrono::seconds(3);
  o.duration = std::chrono::seconds(10);
  o.liveness_bound = std::chrono::seconds(90);
  o.workload.crawl_adds_per_sec = 10;
  o.workload.digest_owners = 2;
  o.workload.digest_rotate_every = std::chrono::seconds(4);
  return o;
}

SimOptions WithFaults(uint64_t seed) {
  SimOptions o = Small(seed);
  o.faults.loss = 0.2;
  o.faults.duplicate = 0.1;
  o.faults.reorder = 0.2;
  o.faults.partition = true;
  o.faults.partition_gap = std::chrono::seconds(3);
  o.faults.crash = true;
  o.faults.crash_gap = std::chrono::seconds(3);
  o.faults.clock_drift = true;
  o.workload.operator_rotate_every = std::chrono::seconds(4);
  return o;
}

TEST(Determinism, SameSeedSameTrace) {
  RunResult a = Simulator(Small(11)).Run();
  RunResult b = Simulator(Small(11)).Run();
  EXPECT_TRUE(a.passed) << FormatSummary(a);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.trace_events, b.trace_events);
  EXPECT_EQ(a.wire_bytes, b.wire_bytes);
  EXPECT_EQ(a.frames_delivered, b.frames_delivered);
  EXPECT_GT(a.frames_delivered, 100u);  // the trace covers real traffic
}

TEST(Determinism, SameSeedSameTraceUnderFaults) {
  RunResult a = Simulator(WithFaults(23)).Run();
  RunResult b = Simulator(WithFaults(23)).Run();
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.crashes, b.crashes);
  EXPECT_EQ(a.network.lost, b.network.lost);
  EXPECT_GT(a.network.lost, 0u);
  EXPECT_TRUE(a.passed) << FormatSummary(a);
}

TEST(Determinism, DifferentSeedDifferentTrace) {
  RunResult a = Simulator(Small(11)).Run();
  RunResult c = Simulator(Small(12)).Run();
  EXPECT_NE(a.trace_hash, c.trace_hash);
}

}  // namespace
}  // namespace pollen::sim
