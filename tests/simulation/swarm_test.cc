// A small swarm: 20 seeds with randomly chosen faults all pass their checkers.
#include <gtest/gtest.h>

#include "simulation/simulator.h"

namespace pollen::sim {
namespace {

TEST(Swarm, TwentySeedsPass) {
  SimOptions base;
  base.swarm = true;
  base.warmup = std::chrono::seconds(3);
  base.duration = std::chrono::seconds(12);
  base.replay_args = {"--swarm", "--warmup=3", "--duration=12"};
  int faults_seen = 0;
  for (uint64_t seed = 1000; seed < 1020; ++seed) {
    SimOptions o = OptionsForSeed(base, seed);
    RunResult r = Simulator(o).Run();
    EXPECT_TRUE(r.passed) << FormatSummary(r);
    faults_seen += r.faults != "none" ? 1 : 0;
  }
  EXPECT_GT(faults_seen, 10);  // the swarm really switches faults on
}

}  // namespace
}  // namespace pollen::sim
