#include "simulation/sim_options.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pollen::sim {
namespace {

TEST(SimOptions, ParsesFlagsBothForms) {
  auto o = ParseFlags({"--seed=7", "--nodes", "12", "--loss=0.25", "--partition", "--crash", "--fanout=4",
                       "--gossip-interval-ms", "100", "--duration=12.5", "--warm-start"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->seed, 7u);
  EXPECT_EQ(o->nodes, 12u);
  EXPECT_TRUE(o->nodes_set);
  EXPECT_DOUBLE_EQ(o->faults.loss, 0.25);
  EXPECT_TRUE(o->faults.partition);
  EXPECT_TRUE(o->faults.crash);
  EXPECT_EQ(o->fanout, 4u);
  EXPECT_EQ(o->gossip_interval, std::chrono::milliseconds(100));
  EXPECT_EQ(o->duration, std::chrono::milliseconds(12500));
  EXPECT_TRUE(o->warm_start);
  EXPECT_FALSE(o->huge_pages);  // the default
  EXPECT_EQ(o->threads, 1u);    // likewise
  EXPECT_NE(std::find(o->replay_args.begin(), o->replay_args.end(), "--warm-start"), o->replay_args.end());
  // Replay flags omit the seed.
  for (const auto& a : o->replay_args) EXPECT_EQ(a.find("--seed"), std::string::npos);
  EXPECT_EQ(o->faults.Describe(), "loss=0.25,partition,crash(keep=0.50)");
}

TEST(SimOptions, RejectsBadFlags) {
  EXPECT_FALSE(ParseFlags({"--bogus"}).ok());
  EXPECT_FALSE(ParseFlags({"--loss=1.5"}).ok());
  EXPECT_FALSE(ParseFlags({"--nodes"}).ok());
  EXPECT_FALSE(ParseFlags({"--nodes=abc"}).ok());
  EXPECT_FALSE(ParseFlags({"--scenario=nope"}).ok());
  EXPECT_FALSE(ParseFlags({"--swarm", "--scenario=none"}).ok());
  EXPECT_FALSE(ParseFlags({"stray"}).ok());
  EXPECT_EQ(ParseFlags({"--bogus"}).status().message().substr(0, 4), "ERR ");
  EXPECT_FALSE(ParseFlags({"--warmup=10", "--join-bound=11"}).ok());  // past the warmup
  EXPECT_FALSE(ParseFlags({"--warmup=10", "--join-bound=5", "--warm-start"}).ok());
  EXPECT_FALSE(ParseFlags({"--warmup=0.05", "--join-bound=0.05"}).ok());  // below the poll period: never judged
  EXPECT_FALSE(ParseFlags({"--huge-pages=maybe"}).ok());
  EXPECT_FALSE(ParseFlags({"--huge-pages"}).ok());
  auto on = ParseFlags({"--huge-pages=on"});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->huge_pages);
  EXPECT_FALSE(ParseFlags({"--implicit-sender=maybe"}).ok());
  auto explicit_sender = ParseFlags({"--implicit-sender=off"});
  ASSERT_TRUE(explicit_sender.ok()) << explicit_sender.status();
  EXPECT_FALSE(explicit_sender->implicit_sender);
  EXPECT_TRUE(on->implicit_sender);  // the default
  EXPECT_FALSE(ParseFlags({"--filter-aliases=maybe"}).ok());
  auto no_aliases = ParseFlags({"--filter-aliases=off"});
  ASSERT_TRUE(no_aliases.ok()) << no_aliases.status();
  EXPECT_FALSE(no_aliases->filter_aliases);
  EXPECT_TRUE(on->filter_aliases);  // the default
  EXPECT_FALSE(ParseFlags({"--threads=0"}).ok());
  EXPECT_FALSE(ParseFlags({"--threads=65"}).ok());
  EXPECT_FALSE(ParseFlags({"--threads"}).ok());
  auto two = ParseFlags({"--threads=2"});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->threads, 2u);
  auto o = ParseFlags({"--warmup=10", "--join-bound=9.5"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->join_bound, std::chrono::milliseconds(9500));
}

TEST(SimOptions, EveryScenarioApplies) {
  for (const std::string& name : ScenarioNames()) {
    SimOptions o;
    ASSERT_TRUE(ApplyScenario(name, o).ok()) << name;
    EXPECT_EQ(o.scenario, name);
  }
  SimOptions o;
  ASSERT_TRUE(ApplyScenario("loss30", o).ok());
  EXPECT_DOUBLE_EQ(o.faults.loss, 0.3);
  ASSERT_TRUE(ApplyScenario("partition-heal", o).ok());
  EXPECT_EQ(o.faults.scripted.size(), 2u);
  EXPECT_DOUBLE_EQ(o.faults.loss, 0.0);
}

TEST(SimOptions, SwarmDrawsFromTheSeed) {
  auto draw = [](uint64_t seed) {
    SimOptions o;
    node::Rng rng(seed);
    ApplySwarm(rng, o);
    return std::make_pair(o.faults.Describe(), o.nodes);
  };
  EXPECT_EQ(draw(5), draw(5));
  int distinct = 0;
  auto first = draw(0);
  for (uint64_t s = 1; s < 20; ++s) distinct += draw(s) != first ? 1 : 0;
  EXPECT_GT(distinct, 10);
  // --nodes is kept in swarm mode.
  SimOptions o;
  o.nodes = 42;
  o.nodes_set = true;
  node::Rng rng(1);
  ApplySwarm(rng, o);
  EXPECT_EQ(o.nodes, 42u);
}

}  // namespace
}  // namespace pollen::sim
