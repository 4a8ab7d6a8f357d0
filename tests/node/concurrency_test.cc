// Client operations from several threads while the driver thread pumps the
// cluster (run under TSan in CI: label "concurrency").
#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "tests/node/cluster.h"

namespace pollen::node::testing {
namespace {

TEST(NodeConcurrency, ClientAddsRaceTheDriverAndAllReplicate) {
  ClusterOptions o;
  o.nodes = 3;
  FilterConfig f = SharedFilter("crawl", 20'000);
  o.filters = {f};
  Cluster c(o);
  c.StartAll();
  ASSERT_TRUE(c.RunUntil([&] { return c.AllMembersLive(); }, 90s));
  constexpr int kThreads = 3, kPerThread = 1500;
  std::atomic<int> done{0};
  std::atomic<int> errors{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        Node& node = c.node(static_cast<size_t>(t) % 2);  // nodes 0 and 1 take adds
        if (!node.Add("crawl", key).ok()) ++errors;
        // An acknowledged add reads present at once on that node.
        if (!*node.Exists("crawl", key)) ++errors;
        if (i % 100 == 0) {
          (void)node.Info("crawl");
          (void)node.Counters();
          (void)node.Members();
          (void)node.WhoHas({}, key);
          (void)node.Filters();
        }
      }
      ++done;
    });
  }
  // The driver keeps pumping (rotating once, and creating filters, which
  // republishes the filter map the clients look "crawl" up in) while clients add.
  int steps = 0, created = 0;
  while (done.load() < kThreads) {
    c.Step();
    if (++steps == 2) {
      ASSERT_TRUE(c.node(2).Rotate("crawl", c.now()).ok());
    }
    if (steps % 3 == 0 && created < 30) {
      ASSERT_TRUE(c.node(created % 2).Reserve(SharedFilter("extra-" + std::to_string(created), 1'000), c.now()).ok());
      ++created;
    }
    go = true;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_TRUE(c.RunUntil([&] { return c.Converged("crawl"); }, 30s));
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      EXPECT_TRUE(*c.node(2).Exists("crawl", "t" + std::to_string(t) + "-" + std::to_string(i)));
    }
  }
  EXPECT_EQ(c.node(0).Counters().adds + c.node(1).Counters().adds, uint64_t{kThreads} * kPerThread);
}

}  // namespace
}  // namespace pollen::node::testing
