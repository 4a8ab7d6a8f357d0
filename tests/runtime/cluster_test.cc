// Multi-process: a 3-node cluster replicates adds to every node; a node that
// joins late converges; the TCP-only mode replicates too; a node with less
// memory refuses a peer's filter over its max-memory and serves the rest.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/runtime/cluster_fixture.h"
#include "tests/runtime/dir_util.h"

namespace pollen::testing {
namespace {

// The harness's own promise: a port taken between PickFreePort and pollend's
// bind (another test under ctest -j) costs a start on other ports, not a
// failed test. Here a UDP socket holds the gossip port.
TEST_F(ClusterTest, AFirstStartWhosePortWasTakenStartsAgainOnOtherPorts) {
  const int held = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(held, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(held, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(held, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const uint16_t taken = ntohs(a.sin_port);

  nodes_.push_back(std::make_unique<Pollend>("n1", NodePorts{taken, PickFreePort(), PickFreePort(), false},
                                             std::vector<std::string>{}, secret_, dir_ + "/n1.log"));
  Pollend& n = *nodes_.back();
  ASSERT_TRUE(n.Start());
  EXPECT_TRUE(n.WaitReady(kReadyTimeout)) << TailFile(n.log_path());
  EXPECT_NE(n.ports().gossip, taken);
  EXPECT_NE(TailFile(n.log_path()).find("Address already in use"), std::string::npos);
  ::close(held);
}

TEST_F(ClusterTest, AddsAtOneNodeReadPresentAtEveryOtherAndLateJoinerConverges) {
  ASSERT_NO_FATAL_FAILURE(StartThree());
  Pollend& n1 = *nodes_[0];
  Pollend& n2 = *nodes_[1];
  Pollend& n3 = *nodes_[2];

  const auto keys = Keys("crawl", 200);
  {
    RespClient c = n1.Client();
    ASSERT_TRUE(c.connected());
    for (const auto& k : keys) {
      RespReply r = c.Command({"BF.ADD", "crawl:seen", k});
      ASSERT_EQ(r.type, RespReply::kInteger);
      EXPECT_EQ(r.integer, 1) << k;  // new at the node that added it
    }
    // Added again: already there.
    RespReply again = c.Command({"BF.ADD", "crawl:seen", keys[0]});
    ASSERT_EQ(again.type, RespReply::kInteger);
    EXPECT_EQ(again.integer, 0);
  }
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n2, "crawl:seen", keys); }, kConvergeTimeout));
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n3, "crawl:seen", keys); }, kConvergeTimeout));

  // Adds at another node flow back to the first.
  const auto more = Keys("second", 50);
  AddAll(n3, "crawl:seen", more);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n1, "crawl:seen", more); }, kConvergeTimeout));

  // A late joiner gets everything by anti-entropy.
  Pollend& n4 = AddNode(1);
  StartAndWaitReady(n4);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n4, "crawl:seen", keys) && AllPresent(n4, "crawl:seen", more); },
                      kConvergeTimeout));
  // And every node sees four alive members.
  EXPECT_TRUE(WaitAlive(n1, 4));
}

// A filter created and filled at once: its first keys race its catalog
// entry to the other nodes. With anti-entropy too slow to matter here, they
// must arrive by dissemination (docs/node-core.md, "A new filter's first
// keys"); before, most of these filters missed some first keys at some node.
TEST_F(ClusterTest, AFilterFilledAsSoonAsCreatedReachesEveryNodeWithoutAntiEntropy) {
  ASSERT_NO_FATAL_FAILURE(StartThree({"--anti-entropy-interval", "600s"}));
  for (auto& n : nodes_) {
    ASSERT_TRUE(WaitAlive(*n, 3));
  }
  for (int f = 0; f < 10; ++f) {
    const std::string filter = "fresh" + std::to_string(f);
    const auto keys = Keys(filter, 20);
    {
      RespClient c = nodes_[static_cast<size_t>(f) % 3]->Client();
      ASSERT_TRUE(c.connected());
      ASSERT_EQ(c.Command({"BF.RESERVE", filter, "0.01", "1000"}).str, "OK");
      std::vector<std::string> madd = {"BF.MADD", filter};
      madd.insert(madd.end(), keys.begin(), keys.end());
      ASSERT_EQ(c.Command(madd).type, RespReply::kArray);
    }
    for (auto& n : nodes_) {
      EXPECT_TRUE(WaitFor([&] { return AllPresent(*n, filter, keys); }, kConvergeTimeout))
          << n->log_path() << " " << filter;
    }
  }
}

// A node started with --max-memory 64mb (and no per-filter limit): a peer's
// 144 MB filter (two generations of a scaling filter's 72 MB first layer) is
// not held there (POLLEN.FILTERS shows it with held 0, the refusal is counted
// and logged once), its own BF.RESERVE over the budget gets an error naming
// max-memory, and the filters it holds still replicate.
TEST_F(ClusterTest, ANodeRefusesAPeersFilterOverItsMaxMemoryAndServesTheRest) {
  Pollend& n1 = AddNode(-1);
  StartAndWaitReady(n1);
  Pollend& n2 = AddNode(0, {"--max-memory", "64mb", "--max-filter-bytes", "0"});
  StartAndWaitReady(n2);
  RespClient c1 = n1.Client();
  RespClient c2 = n2.Client();
  ASSERT_EQ(c1.Command({"BF.RESERVE", "big", "0.01", "40000000"}).str, "OK");
  ASSERT_EQ(c1.Command({"BF.RESERVE", "small", "0.01", "10000"}).str, "OK");
  ASSERT_EQ(c1.Command({"BF.ADD", "small", "x"}).integer, 1);
  ASSERT_TRUE(WaitFor([&] { return AllPresent(n2, "small", {"x"}); }, kConvergeTimeout));
  ASSERT_TRUE(WaitFor([&] { return n2.Metrics().find("pollen_filters_refused_total{reason=\"max_memory\"} 1") !=
                                   std::string::npos; },
                      kConvergeTimeout))
      << n2.Metrics();
  // Not "absent" (0): the cluster holds the filter, this node does not.
  const RespReply read = c2.Command({"BF.EXISTS", "big", "x"});
  EXPECT_EQ(read.type, RespReply::kError);
  EXPECT_NE(read.str.find("not held on this node"), std::string::npos) << read.str;
  const RespReply filters = c2.Command({"POLLEN.FILTERS"});
  bool listed = false;
  for (const RespReply& f : filters.elements) {
    if (f.elements.size() >= 4 && f.elements[1].str == "big") {
      listed = f.elements[2].str == "held" && f.elements[3].integer == 0;
    }
  }
  EXPECT_TRUE(listed) << "POLLEN.FILTERS on n2 lists big as not held";
  const RespReply own = c2.Command({"BF.RESERVE", "big2", "0.01", "40000000"});
  EXPECT_EQ(own.type, RespReply::kError);
  EXPECT_NE(own.str.find("max-memory"), std::string::npos) << own.str;
  ASSERT_EQ(c1.Command({"BF.ADD", "small", "y"}).integer, 1);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n2, "small", {"y"}); }, kConvergeTimeout));
  EXPECT_EQ(c1.Command({"BF.EXISTS", "big", "x"}).integer, 0);  // n1 holds and serves it
  const std::string log = ReadFile(n2.log_path());
  size_t lines = 0;
  for (size_t at = log.find("not held on this node"); at != std::string::npos; at = log.find("not held on this node", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << TailFile(n2.log_path());
}

TEST_F(ClusterTest, TcpOnlyModeReplicates) {
  Pollend& n1 = AddNode(-1, {"--tcp-only"});
  StartAndWaitReady(n1);
  Pollend& n2 = AddNode(0, {"--tcp-only"});
  StartAndWaitReady(n2);
  const auto keys = Keys("tcp", 50);
  AddAll(n1, "crawl:seen", keys);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n2, "crawl:seen", keys); }, kConvergeTimeout));
  const std::string m = n2.Metrics();
  EXPECT_GT(MetricValue(m, "pollen_tcp_received_frames_total").value_or(0), 0);
  EXPECT_EQ(MetricValue(m, "pollen_udp_sent_datagrams_total").value_or(-1), 0);
}

TEST_F(ClusterTest, Ipv6GossipReplicates) {
  Pollend& n1 = AddNode(-1, {}, /*ipv6=*/true);
  StartAndWaitReady(n1);
  Pollend& n2 = AddNode(0, {}, /*ipv6=*/true);
  StartAndWaitReady(n2);
  const auto keys = Keys("v6", 50);
  AddAll(n2, "crawl:seen", keys);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n1, "crawl:seen", keys); }, kConvergeTimeout));
  EXPECT_TRUE(WaitAlive(n1, 2));
}

}  // namespace
}  // namespace pollen::testing
