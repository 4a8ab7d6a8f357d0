// Multi-process persistence: SIGKILL under appendfsync always keeps every
// acknowledged add and the node then catches up on what it missed; a graceful
// SIGTERM writes a snapshot that the next start loads (with the log deleted);
// a corrupt snapshot and a corrupt log are moved aside and the node starts.
#include <dirent.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include "tests/runtime/cluster_fixture.h"
#include "tests/runtime/dir_util.h"

namespace pollen::testing {
namespace {

bool AnyStartsWith(const std::vector<std::string>& names, const std::string& prefix, const std::string& contains = "") {
  for (const auto& n : names) {
    if (n.compare(0, prefix.size(), prefix) == 0 && n.find(contains) != std::string::npos) return true;
  }
  return false;
}

long long Exists(Pollend& n, const std::string& key) {
  RespClient c = n.Client();
  RespReply r = c.Command({"BF.EXISTS", "crawl:seen", key});
  return r.type == RespReply::kInteger ? r.integer : -1;
}

TEST_F(ClusterTest, SigkillWithAppendfsyncAlwaysKeepsAcknowledgedAddsThenCatchesUp) {
  Pollend& n1 = AddNode(-1);
  StartAndWaitReady(n1);
  Pollend& n2 = AddNode(0);
  StartAndWaitReady(n2);
  const std::string data = MakeTempDir("n3data");
  const std::vector<std::string> persist = {"--data-dir", data, "--appendfsync", "always",
                                            "--snapshot-interval", "1h"};
  std::vector<std::string> flags = {"--seeds", n1.ports().gossip_addr()};
  flags.insert(flags.end(), persist.begin(), persist.end());
  Pollend& n3 = AddNode(-1, flags);
  StartAndWaitReady(n3);

  // Acknowledged at n3, then killed without warning right after the last reply.
  const auto acked = Keys("acked", 300);
  AddAll(n3, "crawl:seen", acked);
  n3.Kill(SIGKILL);
  EXPECT_EQ(n3.WaitExit(std::chrono::seconds(30)), -1);  // killed by a signal

  // What n3 misses while it is down.
  const auto missed = Keys("missed", 100);
  AddAll(n1, "crawl:seen", missed);

  // Restart #1 isolated from the cluster (a different cluster label: peers'
  // frames fail authentication), so every acknowledged key must come from disk.
  std::vector<std::string> isolated = {"--cluster-label", "isolated"};
  isolated.insert(isolated.end(), persist.begin(), persist.end());
  n3.set_extra(isolated);
  StartAndWaitReady(n3);
  EXPECT_TRUE(AllPresent(n3, "crawl:seen", acked));
  n3.Kill(SIGKILL);
  n3.WaitExit(std::chrono::seconds(30));

  // Restart #2 in the cluster: still has its own adds and catches up.
  n3.set_extra(flags);
  StartAndWaitReady(n3);
  EXPECT_TRUE(AllPresent(n3, "crawl:seen", acked));
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n3, "crawl:seen", missed); }, kConvergeTimeout));
  // And the cluster has what n3 acknowledged before it died.
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n2, "crawl:seen", acked); }, kConvergeTimeout));
}

TEST_F(ClusterTest, GracefulSigtermWritesASnapshotTheNextStartLoads) {
  const std::string data = MakeTempDir("graceful");
  Pollend& n = AddNode(-1, {"--data-dir", data, "--appendfsync", "none", "--snapshot-interval", "1h"});
  StartAndWaitReady(n);
  const auto keys = Keys("graceful", 20);
  AddAll(n, "crawl:seen", keys);
  n.Kill(SIGTERM);
  ASSERT_EQ(n.WaitExit(std::chrono::seconds(60)), 0) << TailFile(n.log_path());
  const auto files = ListDir(data);
  ASSERT_TRUE(AnyStartsWith(files, "snap-crawl")) << "no snapshot written";
  // Delete the add log: the snapshot alone must carry the keys.
  for (const auto& f : files) {
    if (f.compare(0, 5, "adds-") == 0) {
      ASSERT_EQ(::unlink((data + "/" + f).c_str()), 0);
    }
  }
  ASSERT_TRUE(n.Start());
  ASSERT_TRUE(n.WaitReady(kReadyTimeout));
  EXPECT_TRUE(AllPresent(n, "crawl:seen", keys));
  EXPECT_EQ(Exists(n, "https://never-added.example/1"), 0);

  // A second daemon on the same data dir is refused (exit 2, names the option).
  Pollend& twin = AddNode(-1, {"--data-dir", data});
  ASSERT_TRUE(twin.Start());
  EXPECT_EQ(twin.WaitExit(std::chrono::seconds(60)), 2);
  EXPECT_NE(TailFile(twin.log_path()).find("data-dir"), std::string::npos);
  EXPECT_TRUE(AllPresent(n, "crawl:seen", keys));
}

TEST_F(ClusterTest, CorruptSnapshotAndLogAreMovedAsideAndTheNodeStarts) {
  const std::string data = MakeTempDir("corrupt");
  Pollend& n = AddNode(-1, {"--data-dir", data, "--appendfsync", "always", "--snapshot-interval", "1h"});
  StartAndWaitReady(n);
  AddAll(n, "crawl:seen", Keys("before", 5));
  n.Kill(SIGTERM);
  ASSERT_EQ(n.WaitExit(std::chrono::seconds(60)), 0);
  ASSERT_TRUE(n.Start());
  ASSERT_TRUE(n.WaitReady(kReadyTimeout));
  const auto logged = Keys("logged", 5);
  AddAll(n, "crawl:seen", logged);
  n.Kill(SIGKILL);
  n.WaitExit(std::chrono::seconds(30));
  // Flip a byte in the middle of the snapshot; append garbage to the log.
  for (const auto& f : ListDir(data)) {
    const std::string path = data + "/" + f;
    if (f.compare(0, 5, "snap-") == 0) {
      std::fstream s(path, std::ios::in | std::ios::out | std::ios::binary);
      s.seekg(0, std::ios::end);
      const auto size = static_cast<long>(s.tellg());
      s.seekp(size / 2);
      s.put('\x5a');
      s.seekp(size / 2 + 1);
      s.put('\xa5');
    } else if (f.compare(0, 5, "adds-") == 0 && f.find("corrupt") == std::string::npos) {
      std::ofstream(path, std::ios::app | std::ios::binary) << std::string("\x20\0\0\0garbage-garbage-garbage-garbage-garbage", 43);
    }
  }
  ASSERT_TRUE(n.Start());
  ASSERT_TRUE(n.WaitReady(kReadyTimeout)) << TailFile(n.log_path());
  const auto files = ListDir(data);
  EXPECT_TRUE(AnyStartsWith(files, "snap-", ".corrupt-"));
  EXPECT_TRUE(AnyStartsWith(files, "adds-", ".corrupt-"));
  // The intact log records before the garbage were replayed.
  EXPECT_TRUE(AllPresent(n, "crawl:seen", logged));
  RespClient c = n.Client();
  EXPECT_EQ(c.Command({"PING"}).str, "PONG");
}

}  // namespace
}  // namespace pollen::testing
