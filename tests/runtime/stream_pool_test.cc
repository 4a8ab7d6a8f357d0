// StreamPool's connect deadline: a peer whose listen queue is full drops
// SYNs, so a connect to it neither succeeds nor fails for the kernel's ~2
// minutes of retries. The pool gives up at its connect timeout, counts it,
// backs the peer off and drops its queued frames; a reachable peer connects
// and is not timed out. Real sockets on loopback.
#include "node/runtime/stream_pool.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gtest/gtest.h"
#include "node/runtime/peer_resolver.h"
#include "node/runtime/runtime_counters.h"

namespace pollen::runtime {
namespace {

using std::chrono::milliseconds;

// A loopback listener with a listen queue of `backlog`, never accepting.
struct RawListener {
  int fd = -1;
  uint16_t port = 0;
  explicit RawListener(int backlog) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd, backlog), 0);
    socklen_t len = sizeof a;
    EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
  }
  ~RawListener() { ::close(fd); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

// Non-blocking connects that fill a listener's queue: with a backlog of 0
// the first completes and sits unaccepted; the kernel then drops further
// SYNs. The first is waited for, so the queue is full before the test's own
// connect.
struct QueueFillers {
  std::vector<int> fds;
  explicit QueueFillers(uint16_t port) {
    for (int i = 0; i < 4; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port);
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // EINPROGRESS or done
      fds.push_back(fd);
      if (i == 0) {
        pollfd p{fd, POLLOUT, 0};
        EXPECT_EQ(::poll(&p, 1, 5000), 1);  // connected (or failed: then the test fails below)
      }
    }
  }
  ~QueueFillers() {
    for (int fd : fds) ::close(fd);
  }
};

// Runs the io_context until pred() or ~5 s (a guard against a hang only).
template <typename Pred>
bool RunUntil(boost::asio::io_context& io, Pred pred) {
  for (int i = 0; i < 500 && !pred(); ++i) {
    io.restart();
    io.run_for(milliseconds(10));
  }
  return pred();
}

TEST(StreamPool, ConnectThatHangsIsAbandonedAtTheDeadlineAndBackedOff) {
  RawListener full(/*backlog=*/0);
  QueueFillers fillers(full.port);
  boost::asio::io_context io;
  RuntimeCounters counters;
  PeerResolver resolver;
  StreamPool pool(io, counters, resolver, 1 << 20, /*connect_timeout=*/milliseconds(200));
  pool.Start([](const std::string&, std::string_view) {});
  pool.Send(full.address(), "frame");
  EXPECT_EQ(pool.connection_count(), 1u);
  ASSERT_TRUE(RunUntil(io, [&] { return counters.tcp_connect_timeouts.load() == 1; }));
  const auto timed_out = std::chrono::steady_clock::now();
  EXPECT_EQ(counters.tcp_connects.load(), 0u);
  EXPECT_EQ(pool.connection_count(), 0u);
  // Backed off (100 ms after a first failure): the next frame is dropped at
  // once, not queued behind another connect. Judged only if this thread got
  // here within the backoff (a loaded machine may stall it longer).
  pool.Send(full.address(), "frame");
  if (std::chrono::steady_clock::now() - timed_out < milliseconds(90)) {
    EXPECT_EQ(counters.tcp_dropped_backoff.load(), 1u);
    EXPECT_EQ(pool.connection_count(), 0u);
  }
  pool.Close();
}

TEST(StreamPool, ReachablePeerConnectsAndOutlivesTheDeadline) {
  boost::asio::io_context io;
  RuntimeCounters counters;
  PeerResolver resolver;
  StreamPool receiver(io, counters, resolver, 1 << 20);
  ASSERT_TRUE(receiver.Listen(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)).ok());
  std::vector<std::string> got;
  receiver.Start([&](const std::string&, std::string_view f) { got.emplace_back(f); });
  const uint16_t port = receiver.local_port();
  StreamPool sender(io, counters, resolver, 1 << 20, /*connect_timeout=*/milliseconds(200));
  sender.Start([](const std::string&, std::string_view) {});
  sender.Send("127.0.0.1:" + std::to_string(port), "first");
  ASSERT_TRUE(RunUntil(io, [&] { return got.size() == 1; }));
  // Well past the deadline, the connection is still there and still carries frames.
  io.restart();
  io.run_for(milliseconds(400));
  sender.Send("127.0.0.1:" + std::to_string(port), "second");
  ASSERT_TRUE(RunUntil(io, [&] { return got.size() == 2; }));
  EXPECT_EQ(got, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(counters.tcp_connects.load(), 1u);
  EXPECT_EQ(counters.tcp_connect_timeouts.load(), 0u);
  sender.Close();
  receiver.Close();
}

}  // namespace
}  // namespace pollen::runtime
