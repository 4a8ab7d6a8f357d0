// Multi-process: a 3-node cluster replicates adds to every node; a node that
// joins late converges; the TCP-only mode replicates too.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/runtime/cluster_fixture.h"

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
