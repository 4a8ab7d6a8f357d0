// The fixed scenarios pass at small scale, and each really injects its fault.
#include <gtest/gtest.h>

#include "simulation/simulator.h"

namespace pollen::sim {
namespace {

class Scenario : public ::testing::TestWithParam<std::string> {};

RunResult RunScenario(const std::string& name, uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  o.nodes = 8;
  o.warmup = std::chrono::seconds(3);
  o.workload.crawl_adds_per_sec = 10;
  o.workload.digest_owners = 2;
  EXPECT_TRUE(ApplyScenario(name, o).ok());
  return Simulator(o).Run();
}

TEST_P(Scenario, Passes) {
  const RunResult r = RunScenario(GetParam(), 1);
  EXPECT_TRUE(r.passed) << FormatSummary(r);
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.failure_count, 0u);
  EXPECT_GT(r.acked, 0u);
  EXPECT_GT(r.keys_checked_live, 0u);
  const std::string& name = GetParam();
  if (name == "loss30") {
    EXPECT_GT(r.network.lost, 0u);
  }
  if (name == "partition-heal" || name == "one-way" || name == "rotate-in-partition") {
    EXPECT_EQ(r.partitions, 1u);
    EXPECT_GT(r.network.partition_dropped, 0u);
  }
  if (name == "crash-restart") {
    EXPECT_GE(r.crashes, 2u);
    EXPECT_EQ(r.restarts, r.crashes);
  }
  if (name == "rotate-in-partition") {
    // Both sides proposed epoch 1 while apart: one proposal, so epoch 1 after the heal.
    EXPECT_GE(r.rotations, 2u);
    EXPECT_EQ(r.final_epochs.at("crawl:seen"), 1u);
  }
  if (name == "none") {
    EXPECT_EQ(r.final_epochs.at("crawl:seen"), 0u);
  }
  if (name == "grow") {
    // 30 s at 1000 adds/s, 0.7 of them new: ~21,000 keys from capacity 100
    // need 8 layers (100 * (2^8 - 1) = 25,500), and every node has them all.
    EXPECT_GE(r.final_layers.at("crawl:seen"), 8u);
    EXPECT_GE(r.crashes, 2u);
    EXPECT_EQ(r.partitions, 1u);
  }
  if (name == "none") {
    EXPECT_EQ(r.network.lost + r.network.partition_dropped, 0u);
    EXPECT_EQ(r.samples_reached, r.samples);
  }
}

// The liveness checker fails a run that cannot converge in its bound, and the
// report names the seed and the replay command.
TEST(Liveness, TooShortBoundFails) {
  SimOptions o;
  o.seed = 5;
  o.nodes = 8;
  o.warmup = std::chrono::seconds(3);
  ASSERT_TRUE(ApplyScenario("partition-heal", o).ok());
  o.duration = std::chrono::seconds(10);  // faults stop while partitioned (healed at 15s)
  o.liveness_bound = std::chrono::milliseconds(1);
  o.converge_poll = std::chrono::milliseconds(1);
  o.replay_args = {"--scenario=partition-heal", "--nodes=8"};
  const RunResult r = Simulator(o).Run();
  EXPECT_FALSE(r.passed);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_NE(r.failures[0].find("liveness"), std::string::npos) << r.failures[0];
  EXPECT_EQ(r.replay_command, "pollen-sim --seed=5 --scenario=partition-heal --nodes=8");
  EXPECT_NE(FormatSummary(r).find("replay: pollen-sim --seed=5"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Fixed, Scenario, ::testing::ValuesIn(ScenarioNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace pollen::sim
