// Driver shutdown never leaves a RunOnDriver caller waiting: callers that race
// Shutdown (an HTTP /metrics scrape calls Collect, which is a RunOnDriver) get
// either their answer or Unavailable, never the 30 s DeadlineExceeded, and
// calls after Shutdown are refused at once. Many start/shutdown cycles with
// several hammering threads, in-process on loopback (port 0). No timing
// assertions: the outcome (status codes) is what is checked.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "node/runtime/config.h"
#include "node/runtime/driver.h"

namespace pollen::runtime {
namespace {

// Gossip on an ephemeral loopback port (no peers; advertise is only a name).
DaemonConfig TestConfig() {
  const char* argv[] = {"pollend", "--gossip-bind", "127.0.0.1:0", "--advertise", "127.0.0.1:1",
                        "--node-name", "drv", "--log-level", "warn"};
  auto cl = ParseCommandLine(9, argv, [](const char*) -> const char* { return nullptr; });
  EXPECT_TRUE(cl.ok()) << cl.status();
  return cl->config;
}

std::unique_ptr<node::Node> MakeNode(const DaemonConfig& c) {
  node::NodeConfig nc;
  nc.name = c.node_name;
  nc.advertise = c.gossip_bind;
  nc.secret.bytes.fill(9);
  auto n = node::Node::Create(nc);
  EXPECT_TRUE(n.ok()) << n.status();
  return std::move(*n);
}

TEST(DriverShutdownTest, CallsRacingShutdownAreAnsweredOrRefusedNeverTimedOut) {
  constexpr int kCycles = 60, kThreads = 3;
  std::map<absl::StatusCode, int> outcomes;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    const DaemonConfig config = TestConfig();
    auto node = MakeNode(config);
    Driver driver(*node, config, nullptr);
    ASSERT_TRUE(driver.Bind().ok());
    driver.Start();
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    std::vector<std::map<absl::StatusCode, int>> seen(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        // Until refused: every call either answers or is Unavailable.
        for (int i = 0; i < 1'000'000; ++i) {
          const absl::Status s = t == 0 ? driver.Collect().status()
                                        : driver.RunOnDriver([](node::Time) { return absl::OkStatus(); });
          ++seen[t][s.code()];
          if (!s.ok()) break;
        }
      });
    }
    go.store(true);
    // Let the callers get going, then stop under them.
    for (int i = 0; i < 3 + cycle % 5; ++i) ASSERT_TRUE(driver.Collect().ok());
    driver.Shutdown(std::chrono::milliseconds(0));
    for (auto& th : threads) th.join();
    for (const auto& m : seen) {
      for (const auto& [code, n] : m) outcomes[code] += n;
    }
    // After Shutdown: refused at once.
    EXPECT_EQ(driver.RunOnDriver([](node::Time) { return absl::OkStatus(); }).code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(driver.Collect().status().code(), absl::StatusCode::kUnavailable);
  }
  // Every thread's loop ended with Unavailable; nothing else but OK occurred.
  for (const auto& [code, n] : outcomes) {
    EXPECT_TRUE(code == absl::StatusCode::kOk || code == absl::StatusCode::kUnavailable)
        << absl::StatusCodeToString(code) << " x" << n;
  }
  EXPECT_GT(outcomes[absl::StatusCode::kOk], 0);
  EXPECT_GT(outcomes[absl::StatusCode::kUnavailable], 0);
}

}  // namespace
}  // namespace pollen::runtime
