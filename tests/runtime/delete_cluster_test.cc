// Multi-process: DEL deletes a filter on every node, memory and files
// included, and the deletion survives a SIGKILL of a node that held the
// filter in a snapshot (its restart must not bring the filter back to
// anyone). A later BF.RESERVE of the name makes a new, empty filter.
#include <csignal>
#include <dirent.h>

#include <algorithm>
#include <thread>
#include <string>
#include <vector>

#include "tests/runtime/cluster_fixture.h"

namespace pollen::testing {
namespace {

bool Exists(Pollend& n, const std::string& key) { return KeyCount(n, key, 1); }
bool Missing(Pollend& n, const std::string& key) { return KeyCount(n, key, 0); }

std::vector<std::string> SnapshotFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("snap-", 0) == 0) out.push_back(n);
    }
    ::closedir(d);
  }
  return out;
}

bool Has(const std::vector<std::string>& files, const std::string& name) {
  return std::find(files.begin(), files.end(), name) != files.end();
}

TEST_F(ClusterTest, DelDeletesEverywhereAndSurvivesARestart) {
  std::vector<std::string> dirs;
  std::vector<std::vector<std::string>> flags;
  for (int i = 0; i < 3; ++i) {
    dirs.push_back(MakeTempDir("del" + std::to_string(i)));
    flags.push_back({"--data-dir", dirs.back(), "--appendfsync", "always", "--snapshot-interval", "1h"});
  }
  Pollend& n1 = AddNode(-1, flags[0]);
  StartAndWaitReady(n1);
  Pollend& n2 = AddNode(0, flags[1]);
  StartAndWaitReady(n2);
  Pollend& n3 = AddNode(0, flags[2]);
  StartAndWaitReady(n3);
  std::vector<Pollend*> all = {&n1, &n2, &n3};

  const auto keys = Keys("old", 50);
  {
    RespClient c = n1.Client();
    ASSERT_EQ(c.Command({"BF.RESERVE", "del:f", "0.01", "20000"}).str, "OK");
  }
  AddAll(n1, "del:f", keys);
  for (Pollend* n : all) ASSERT_TRUE(WaitFor([&] { return AllPresent(*n, "del:f", keys); }, kConvergeTimeout));
  for (Pollend* n : all) {
    RespClient c = n->Client();
    ASSERT_EQ(c.Command({"POLLEN.SNAPSHOT"}).type, RespReply::kBulk);
  }
  for (const std::string& d : dirs) ASSERT_TRUE(Has(SnapshotFiles(d), "snap-del%3Af.pln")) << d;

  // n3 goes down holding the filter on disk; n2 deletes it meanwhile.
  n3.Kill(SIGKILL);
  n3.WaitExit(std::chrono::seconds(30));
  {
    RespClient c = n2.Client();
    RespReply r = c.Command({"DEL", "del:f", "del:nosuch"});
    ASSERT_EQ(r.type, RespReply::kInteger);
    EXPECT_EQ(r.integer, 1);
  }
  EXPECT_TRUE(Missing(n2, "del:f"));
  ASSERT_TRUE(WaitFor([&] { return Missing(n1, "del:f"); }, kConvergeTimeout));

  // n3 restarts from its snapshot, which holds the filter: the cluster's
  // tombstone removes it there, and nobody gets it back.
  StartAndWaitReady(n3);
  ASSERT_TRUE(WaitFor([&] { return Missing(n3, "del:f"); }, kConvergeTimeout));
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a few anti-entropy rounds (1 s)
  for (Pollend* n : all) EXPECT_TRUE(Missing(*n, "del:f")) << n->log_path();

  // Files go with the next snapshot, on every node.
  for (Pollend* n : all) {
    RespClient c = n->Client();
    ASSERT_EQ(c.Command({"POLLEN.SNAPSHOT"}).type, RespReply::kBulk);
  }
  for (const std::string& d : dirs) {
    EXPECT_FALSE(Has(SnapshotFiles(d), "snap-del%3Af.pln")) << d;
  }

  // A later BF.RESERVE makes a new, empty filter everywhere.
  {
    RespClient c = n3.Client();
    ASSERT_EQ(c.Command({"BF.RESERVE", "del:f", "0.01", "1000"}).str, "OK");
    ASSERT_EQ(c.Command({"BF.ADD", "del:f", "new"}).integer, 1);
  }
  for (Pollend* n : all) {
    ASSERT_TRUE(WaitFor([&] { return AllPresent(*n, "del:f", {"new"}); }, kConvergeTimeout));
    RespClient c = n->Client();
    RespReply r = c.Command({"BF.EXISTS", "del:f", keys[0]});
    EXPECT_EQ(r.integer, 0) << n->log_path();
  }

  // And n1, killed and restarted from its log, keeps the new filter only.
  n1.Kill(SIGKILL);
  n1.WaitExit(std::chrono::seconds(30));
  StartAndWaitReady(n1);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n1, "del:f", {"new"}); }, kConvergeTimeout));
  RespClient c = n1.Client();
  EXPECT_EQ(c.Command({"BF.EXISTS", "del:f", keys[0]}).integer, 0);
  EXPECT_TRUE(Exists(n1, "del:f"));
}

}  // namespace
}  // namespace pollen::testing
