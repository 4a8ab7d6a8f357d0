// Multi-process hostile input: forged, replayed, truncated and oversized
// datagrams and TCP frames sent to a node's gossip port, and garbage sent to
// its RESP port, change no filter state, are counted by reason in /metrics,
// and the node keeps serving and replicating. Also: /metrics passes
// `promtool check metrics`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <regex>

#include "tests/runtime/cluster_fixture.h"

namespace pollen::testing {
namespace {

class UdpSocket {
 public:
  UdpSocket() {
    fd_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    timeval tv{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~UdpSocket() { ::close(fd_); }
  uint16_t port() const { return port_; }
  void SendTo(uint16_t port, const std::string& bytes) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  std::string Receive() {
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// Opens a TCP connection to the gossip port, sends bytes, and closes.
void SendTcp(uint16_t port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    char c;
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::recv(fd, &c, 1, 0);  // wait for the node to close it (or time out)
  }
  ::close(fd);
}

std::string LengthPrefixed(uint32_t len, const std::string& body) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
  return s + body;
}

double Rejected(const std::string& metrics, const std::string& reason) {
  return MetricValue(metrics, "pollen_frames_rejected_total", "reason=\"" + reason + "\"").value_or(-1);
}

TEST_F(ClusterTest, HostileGossipInputChangesNoStateAndIsCounted) {
  // A fake seed captures genuine sealed datagrams from node A.
  UdpSocket fake;
  Pollend& a = AddNode(-1, {"--seeds", "127.0.0.1:" + std::to_string(fake.port())});
  ASSERT_TRUE(a.Start());
  std::string genuine;
  ASSERT_TRUE(WaitFor(
      [&] {
        genuine = fake.Receive();
        return !genuine.empty();
      },
      kReadyTimeout))
      << "node A never sent to its seed";
  Pollend& b = AddNode(-1);
  StartAndWaitReady(b);
  const uint16_t port = b.ports().gossip;
  std::mt19937_64 rng(7);
  auto random_bytes = [&](size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };

  const std::string before = b.Metrics();
  // Datagrams: replayed (the same genuine frame several times), truncated,
  // forged (random bytes after a plausible version byte), bit-flipped, oversized.
  for (int i = 0; i < 5; ++i) fake.SendTo(port, genuine);
  fake.SendTo(port, genuine.substr(0, genuine.size() / 2));
  fake.SendTo(port, genuine.substr(0, 10));
  for (int i = 0; i < 5; ++i) fake.SendTo(port, std::string(1, genuine[0]) + random_bytes(200));
  std::string flipped = genuine;
  flipped[flipped.size() - 3] ^= 0x40;
  fake.SendTo(port, flipped);
  fake.SendTo(port, std::string(1, genuine[0]) + random_bytes(5000));
  fake.SendTo(port, "");
  // Stream frames: absurd length, zero length, garbage body, replayed datagram.
  SendTcp(port, LengthPrefixed(0xffffffffu, "x"));
  SendTcp(port, LengthPrefixed(0, ""));
  SendTcp(port, LengthPrefixed(300, std::string(1, genuine[0]) + random_bytes(299)));
  SendTcp(port, LengthPrefixed(static_cast<uint32_t>(genuine.size()), genuine));
  SendTcp(port, LengthPrefixed(1000, random_bytes(10)));  // truncated: connection closes mid-frame

  std::string after;
  ASSERT_TRUE(WaitFor(
      [&] {
        after = b.Metrics();
        return Rejected(after, "replay") >= 1 && Rejected(after, "oversize") >= 2 &&
               Rejected(after, "malformed") + Rejected(after, "auth") + Rejected(after, "unknown_key") +
                       Rejected(after, "version") >= 8;
      },
      std::chrono::seconds(60)))
      << after;
  EXPECT_GE(Rejected(after, "oversize"), Rejected(before, "oversize") + 2);

  // No filter state changed: keys nobody added are absent; B still serves and
  // still replicates genuine traffic.
  RespClient c = b.Client();
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(c.Command({"PING"}).str, "PONG");
  for (int i = 0; i < 20; ++i) {
    RespReply r = c.Command({"BF.EXISTS", "crawl:seen", "never-added-" + std::to_string(i)});
    ASSERT_EQ(r.type, RespReply::kInteger);
    EXPECT_EQ(r.integer, 0);
  }
  auto set_bits = MetricValue(after, "pollen_filter_set_bit_positions", "filter=\"crawl:seen\",generation=\"0\",layer=\"0\"");
  EXPECT_EQ(set_bits.value_or(-1), 0);
  Pollend& c3 = AddNode(1);
  StartAndWaitReady(c3);
  const auto keys = Keys("after-attack", 20);
  AddAll(c3, "crawl:seen", keys);
  EXPECT_TRUE(WaitFor([&] { return AllPresent(b, "crawl:seen", keys); }, kConvergeTimeout));
  EXPECT_TRUE(b.running());
}

TEST_F(ClusterTest, GarbageOnTheRespPortDoesNotKillTheNode) {
  Pollend& n = AddNode(-1);
  StartAndWaitReady(n);
  std::mt19937_64 rng(11);
  for (int conn = 0; conn < 20; ++conn) {
    RespClient c;
    ASSERT_TRUE(c.Connect(n.ports().resp));
    std::string junk(static_cast<size_t>(rng() % 20000), '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    if (conn % 4 == 0) junk = "*99999999999\r\n$99999999999\r\n" + junk;
    if (conn % 4 == 1) junk = "*2\r\n$-5\r\n" + junk;
    c.SendRaw(junk);
  }
  RespClient c = n.Client();
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(c.Command({"PING"}).str, "PONG");
  RespReply add = c.Command({"BF.ADD", "crawl:seen", "still-works"});
  ASSERT_EQ(add.type, RespReply::kInteger);
  EXPECT_EQ(c.Command({"BF.EXISTS", "crawl:seen", "still-works"}).integer, 1);
  EXPECT_TRUE(n.running());
}

TEST_F(ClusterTest, MetricsPassPromtoolAndHealthEndpointsAnswer) {
  Pollend& n1 = AddNode(-1, {"--data-dir", MakeTempDir("metrics")});
  StartAndWaitReady(n1);
  Pollend& n2 = AddNode(0);
  StartAndWaitReady(n2);
  AddAll(n1, "crawl:seen", Keys("m", 10));
  EXPECT_TRUE(WaitFor([&] { return AllPresent(n2, "crawl:seen", Keys("m", 10)); }, kConvergeTimeout));
  EXPECT_EQ(HttpGet(n1.ports().http, "/healthz").status, 200);
  EXPECT_EQ(HttpGet(n1.ports().http, "/readyz").status, 200);
  EXPECT_EQ(HttpGet(n1.ports().http, "/nope").status, 404);
  // Per-peer families: n2 received n1's deltas, and each probes the other.
  const std::string rtt = "pollen_probe_rtt_seconds", lag = "pollen_replication_lag_seconds";
  std::string m2;
  EXPECT_TRUE(WaitFor(
      [&] {
        m2 = n2.Metrics();
        return MetricValue(m2, rtt, "peer=\"n1\"").has_value() && MetricValue(m2, lag, "peer=\"n1\"").has_value();
      },
      kConvergeTimeout));
  EXPECT_GE(MetricValue(m2, rtt, "peer=\"n1\"").value_or(-1), 0);
  EXPECT_GE(MetricValue(m2, lag, "peer=\"n1\"").value_or(-1), 0);
  EXPECT_FALSE(MetricValue(m2, rtt, "peer=\"n2\"").has_value());  // never self
  EXPECT_FALSE(MetricValue(m2, lag, "peer=\"n2\"").has_value());
  EXPECT_TRUE(MetricValue(m2, "pollen_replication_never_synced_peers").has_value());
  EXPECT_TRUE(WaitFor([&] { return MetricValue(n1.Metrics(), rtt, "peer=\"n2\"").has_value(); }, kConvergeTimeout));
  const std::string metrics = n1.Metrics();
  for (const char* name : {"pollen_adds_total", "pollen_queries_total", "pollen_gossip_sent_bytes_total",
                           "pollen_anti_entropy_runs_total", "pollen_resp_commands_total", "pollen_snapshots_total"}) {
    EXPECT_TRUE(MetricValue(metrics, name).has_value()) << name;
  }
  EXPECT_EQ(MetricValue(metrics, "pollen_adds_total").value_or(0), 10);
  EXPECT_TRUE(MetricValue(metrics, "pollen_filter_fill_ratio", "filter=\"crawl:seen\",generation=\"0\",layer=\"0\"").has_value());
  // The BF.ADD above was timed: its histogram counts it, in some bucket.
  EXPECT_GE(MetricValue(metrics, "pollen_resp_command_duration_seconds_count", "command=\"bf.add\"").value_or(0), 1);
  EXPECT_GE(MetricValue(metrics, "pollen_resp_command_duration_seconds_bucket", "command=\"bf.add\",le=\"+Inf\"")
                .value_or(0),
            1);
  // Every metric the shipped alert rules and the Grafana dashboard use exists
  // (a rename would silently disable an alert or empty a panel).
  size_t named = 0;
  for (const char* shipped : {"/ops/prometheus/pollen-alerts.yml", "/ops/grafana/pollen.json"}) {
    std::ifstream file(std::string(POLLEN_SOURCE_DIR) + shipped);
    ASSERT_TRUE(file.good()) << shipped;
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const std::regex metric_name("pollen_[a-z_]+");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), metric_name); it != std::sregex_iterator(); ++it) {
      std::string name = it->str();
      // A histogram's series are typed under the family's name.
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (name.ends_with(suffix) && metrics.find("\n# TYPE " + name + " ") == std::string::npos) {
          name.resize(name.size() - std::string_view(suffix).size());
        }
      }
      EXPECT_NE(metrics.find("\n# TYPE " + name + " "), std::string::npos) << name << " (" << shipped << ")";
      ++named;
    }
  }
  EXPECT_GE(named, 30u);
  const std::string path = dir_ + "/metrics.txt";
  std::ofstream(path) << metrics;
  const std::string cmd = "promtool check metrics < '" + path + "' > '" + dir_ + "/promtool.out' 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << TailFile(dir_ + "/promtool.out") << "\n" << metrics.substr(0, 2000);
}

}  // namespace
}  // namespace pollen::testing
