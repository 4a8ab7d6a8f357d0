// Multi-process: COPY, RENAME and BF.LOADCHUNK under another name make
// filters that keep their source's identity (its hash keys), so every key of
// the source answers present in them, on every node; RENAME deletes the
// source everywhere; the copies are live replicated filters and survive a
// SIGKILL of the node that made them.
#include <csignal>

#include <string>
#include <vector>

#include "tests/runtime/cluster_fixture.h"

namespace pollen::testing {
namespace {

bool Missing(Pollend& n, const std::string& key) { return KeyCount(n, key, 0); }

TEST_F(ClusterTest, CopiesRenamesAndRenamedLoadsKeepTheirKeysEverywhere) {
  std::vector<std::vector<std::string>> flags;
  for (int i = 0; i < 2; ++i) {
    flags.push_back({"--data-dir", MakeTempDir("copy" + std::to_string(i)), "--appendfsync", "always",
                     "--snapshot-interval", "1h"});
  }
  Pollend& n1 = AddNode(-1, flags[0]);
  StartAndWaitReady(n1);
  Pollend& n2 = AddNode(0, flags[1]);
  StartAndWaitReady(n2);
  std::vector<Pollend*> all = {&n1, &n2};

  const auto keys = Keys("k", 200);
  {
    RespClient c = n1.Client();
    ASSERT_EQ(c.Command({"BF.RESERVE", "cp:src", "0.001", "1000", "EXPANSION", "2"}).str, "OK");
  }
  AddAll(n1, "cp:src", keys);  // past the first layer's capacity: two layers
  for (Pollend* n : all) ASSERT_TRUE(WaitFor([&] { return AllPresent(*n, "cp:src", keys); }, kConvergeTimeout));

  {
    RespClient c = n2.Client();
    RespReply r = c.Command({"COPY", "cp:src", "cp:copy"});
    ASSERT_EQ(r.type, RespReply::kInteger) << r.str;
    EXPECT_EQ(r.integer, 1);
    EXPECT_EQ(c.Command({"COPY", "cp:src", "cp:copy"}).integer, 0);  // exists, no REPLACE
    EXPECT_EQ(c.Command({"BF.INFO", "cp:copy", "FILTERS"}).elements.at(0).integer,
              c.Command({"BF.INFO", "cp:src", "FILTERS"}).elements.at(0).integer);
  }
  {
    RespClient c = n1.Client();
    EXPECT_EQ(c.Command({"RENAME", "cp:src", "cp:moved"}).str, "OK");
    EXPECT_EQ(c.Command({"RENAME", "cp:src", "cp:again"}).str, "ERR no such key");
  }
  for (Pollend* n : all) {
    for (const char* f : {"cp:copy", "cp:moved"}) {
      ASSERT_TRUE(WaitFor([&] { return AllPresent(*n, f, keys); }, kConvergeTimeout)) << f << " " << n->log_path();
    }
    ASSERT_TRUE(WaitFor([&] { return Missing(*n, "cp:src"); }, kConvergeTimeout)) << n->log_path();
  }

  // A copy is a filter of its own: an add to it reaches the other node and
  // not the filter it came from.
  {
    RespClient c = n1.Client();
    EXPECT_EQ(c.Command({"BF.ADD", "cp:copy", "only-in-the-copy"}).integer, 1);
  }
  ASSERT_TRUE(WaitFor([&] { return AllPresent(n2, "cp:copy", {"only-in-the-copy"}); }, kConvergeTimeout));
  {
    RespClient c = n2.Client();
    EXPECT_EQ(c.Command({"BF.EXISTS", "cp:moved", "only-in-the-copy"}).integer, 0);
  }

  // A dump taken on one node loads under another name on the other.
  {
    RespClient from = n2.Client();
    RespClient to = n1.Client();
    int64_t it = 0;
    do {
      RespReply chunk = from.Command({"BF.SCANDUMP", "cp:moved", std::to_string(it)});
      ASSERT_EQ(chunk.type, RespReply::kArray);
      it = chunk.elements.at(0).integer;
      if (it == 0) break;
      ASSERT_EQ(to.Command({"BF.LOADCHUNK", "cp:loaded", std::to_string(it), chunk.elements.at(1).str}).str, "OK");
    } while (true);
  }
  for (Pollend* n : all) {
    ASSERT_TRUE(WaitFor([&] { return AllPresent(*n, "cp:loaded", keys); }, kConvergeTimeout)) << n->log_path();
  }

  // n1 made cp:moved and cp:loaded: killed and restarted from its files, it
  // still has them, and cp:src stays deleted.
  n1.Kill(SIGKILL);
  n1.WaitExit(std::chrono::seconds(30));
  StartAndWaitReady(n1);
  for (const char* f : {"cp:copy", "cp:moved", "cp:loaded"}) {
    EXPECT_TRUE(WaitFor([&] { return AllPresent(n1, f, keys); }, kConvergeTimeout)) << f;
  }
  EXPECT_TRUE(Missing(n1, "cp:src"));
}

}  // namespace
}  // namespace pollen::testing
