// Multi-process: SIGTERM while /metrics is scraped in a tight loop. The node
// exits 0 (final snapshot written), every scrape answer is 200, 503 ("shutting
// down") or a refused connection, and no driver call timed out. The wait for
// exit is only a guard against a hang, not a speed assertion.
#include <atomic>
#include <csignal>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "tests/runtime/cluster_fixture.h"
#include "tests/runtime/dir_util.h"

namespace pollen::testing {
namespace {

TEST_F(ClusterTest, SigtermDuringAScrapeLoopExitsCleanly) {
  const std::string data = MakeTempDir("scrape");
  Pollend& n = AddNode(-1, {"--data-dir", data, "--appendfsync", "everysec", "--snapshot-interval", "1h"});
  StartAndWaitReady(n);
  AddAll(n, "crawl:seen", Keys("scrape", 20));

  std::atomic<bool> stop{false};
  std::atomic<int> ok_scrapes{0};
  std::mutex mu;
  std::set<int> statuses;
  std::vector<std::thread> scrapers;
  for (int t = 0; t < 3; ++t) {
    scrapers.emplace_back([&] {
      while (!stop.load()) {
        const HttpResult r = HttpGet(n.ports().http, "/metrics");
        if (r.status == 200) ++ok_scrapes;
        std::lock_guard lock(mu);
        statuses.insert(r.status);
      }
    });
  }
  ASSERT_TRUE(WaitFor([&] { return ok_scrapes.load() >= 10; }, std::chrono::seconds(120)));
  n.Kill(SIGTERM);
  const int exit_status = n.WaitExit(std::chrono::seconds(120));
  stop.store(true);
  for (auto& t : scrapers) t.join();
  EXPECT_EQ(exit_status, 0) << TailFile(n.log_path());
  for (int s : statuses) EXPECT_TRUE(s == 200 || s == 503 || s == 0) << "HTTP status " << s;
  const std::string log = TailFile(n.log_path(), 1 << 20);
  EXPECT_EQ(log.find("did not answer in time"), std::string::npos);
  EXPECT_NE(log.find("stopped"), std::string::npos);
  bool snapshot = false;
  for (const auto& f : ListDir(data)) snapshot |= f.rfind("snap-crawl", 0) == 0;
  EXPECT_TRUE(snapshot) << "no final snapshot";
}

}  // namespace
}  // namespace pollen::testing
