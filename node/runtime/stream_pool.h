// StreamPool: TCP gossip streams (protocol/stream_framer.h framing), driven on
// the driver io_context. Driver thread only.
//
// Promises:
//   - Listens on the gossip address; each accepted connection is known by its
//     remote "ip:port", so a reply addressed to that string goes back on it.
//   - Send(to, sealed) uses the open connection keyed `to`, else opens one
//     (resolving `to`), queueing frames while it connects. Each connection's
//     queue is bounded (queue_bytes); beyond it frames are dropped and counted.
//   - A connect that fails, or has not completed within connect_timeout
//     (default kConnectTimeout; a black-holed peer would otherwise hold its
//     frames for the kernel's ~2 minutes of SYN retries, then deliver them
//     stale), puts the address in backoff (100 ms doubling to 10 s, reset by
//     a success); its queued frames are dropped, and new ones meanwhile
//     (anti-entropy repairs what a lost frame carried).
//   - Received frames go to `on_frame(from, frame)`. A bad length prefix is
//     counted (oversize or malformed) and closes the connection.
//   - At most kMaxConnections connections; idle ones close after kIdleTimeout.
//   - The kernel closes a connection whose sent data has waited kUnackedTimeout
//     for an ack (TCP_USER_TIMEOUT); the next frame to that peer opens a new one.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/status/status.h"
#include "node/runtime/peer_resolver.h"
#include "node/runtime/runtime_counters.h"

namespace pollen::runtime {

class StreamPool {
 public:
  static constexpr size_t kMaxConnections = 1024;
  static constexpr std::chrono::seconds kIdleTimeout{120};
  // Twice the default probe interval: a stream ping (membership's reliable
  // fallback) is worthless later, and a reachable peer connects in
  // milliseconds on a LAN, a few hundred across the internet.
  static constexpr std::chrono::milliseconds kConnectTimeout{2000};
  // A partition black-holes a connection's unacked data, and TCP's
  // retransmissions back off exponentially: after a 60 s partition the next
  // one came up to ~40 s after the heal, and every frame queued behind it
  // (anti-entropy, tree pushes) waited as long (jepsen heal-under-load: no
  // repair between two sides for 22 s after the heal, 0 reconnects). Ten
  // seconds is far above any queueing delay (jepsen's slow links hold
  // packets up to 500 ms); a black-holed connection retried ~5 times by then.
  static constexpr std::chrono::seconds kUnackedTimeout{10};
  using FrameFn = std::function<void(const std::string& from, std::string_view frame)>;

  StreamPool(boost::asio::io_context& io, RuntimeCounters& counters, PeerResolver& resolver, size_t queue_bytes,
             std::chrono::milliseconds connect_timeout = kConnectTimeout);
  ~StreamPool();
  absl::Status Listen(const boost::asio::ip::tcp::endpoint& endpoint);
  void Start(FrameFn on_frame);
  // Takes the frame: it is queued as it is, its length prefix beside it.
  void Send(const std::string& to, std::string sealed);
  void Close();
  size_t connection_count() const { return conns_.size(); }
  uint16_t local_port() const;  // the listening port; 0 when not listening

 private:
  struct Conn;
  static void Tune(boost::asio::ip::tcp::socket& socket);  // no delay; kUnackedTimeout
  void AcceptNext();
  void StartRead(const std::shared_ptr<Conn>& c);
  void WriteNext(const std::shared_ptr<Conn>& c);
  void Drop(const std::shared_ptr<Conn>& c, bool connect_failed);
  void Sweep();

  boost::asio::io_context& io_;
  RuntimeCounters& counters_;
  PeerResolver& resolver_;
  const size_t queue_bytes_;
  const std::chrono::milliseconds connect_timeout_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer sweep_timer_;
  FrameFn on_frame_;
  std::map<std::string, std::shared_ptr<Conn>> conns_;
  struct Backoff {
    std::chrono::steady_clock::time_point until;
    std::chrono::milliseconds delay{0};
  };
  std::map<std::string, Backoff> backoff_;
  bool closed_ = false;
};

}  // namespace pollen::runtime
