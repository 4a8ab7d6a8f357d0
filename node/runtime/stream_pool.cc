#include "node/runtime/stream_pool.h"

#include <array>
#include <cassert>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/write.hpp>
#include <netinet/tcp.h>  // TCP_USER_TIMEOUT

#include "node/runtime/net_address.h"
#include "protocol/stream_framer.h"
#include "spdlog/spdlog.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct StreamPool::Conn {
  explicit Conn(asio::io_context& io) : socket(io), connect_deadline(io) {}
  tcp::socket socket;
  asio::steady_timer connect_deadline;  // outbound, until connected
  std::string key;
  bool outbound = false;
  bool connected = false;
  bool writing = false;
  bool dead = false;
  protocol::StreamDeframer deframer;
  struct Queued {
    std::array<char, protocol::kStreamLengthPrefixBytes> prefix;
    std::string sealed;
    size_t bytes() const { return prefix.size() + sealed.size(); }
  };
  std::deque<Queued> queue;
  size_t queued_bytes = 0;
  std::array<char, 65536> read_buf;
  Clock::time_point last_active = Clock::now();
};

StreamPool::StreamPool(asio::io_context& io, RuntimeCounters& counters, PeerResolver& resolver, size_t queue_bytes,
                       std::chrono::milliseconds connect_timeout)
    : io_(io),
      counters_(counters),
      resolver_(resolver),
      queue_bytes_(queue_bytes),
      connect_timeout_(connect_timeout),
      acceptor_(io),
      sweep_timer_(io) {
  assert(connect_timeout_.count() > 0);
}

StreamPool::~StreamPool() { Close(); }

absl::Status StreamPool::Listen(const tcp::endpoint& endpoint) {
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec && endpoint.address().is_v6()) acceptor_.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError("option 'gossip-bind': cannot listen on TCP " + endpoint.address().to_string() +
                                  ":" + std::to_string(endpoint.port()) + ": " + ec.message());
  }
  return absl::OkStatus();
}

uint16_t StreamPool::local_port() const {
  boost::system::error_code ec;
  const tcp::endpoint e = acceptor_.local_endpoint(ec);
  return ec ? 0 : e.port();
}

void StreamPool::Tune(tcp::socket& socket) {
  boost::system::error_code ec;  // best effort: a socket without them still works
  socket.set_option(tcp::no_delay(true), ec);
  socket.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_USER_TIMEOUT>(
                        static_cast<int>(std::chrono::milliseconds(kUnackedTimeout).count())),
                    ec);
}

void StreamPool::Start(FrameFn on_frame) {
  on_frame_ = std::move(on_frame);
  AcceptNext();
  Sweep();
}

void StreamPool::AcceptNext() {
  if (closed_) return;
  auto c = std::make_shared<Conn>(io_);
  acceptor_.async_accept(c->socket, [this, c](boost::system::error_code ec) {
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      boost::system::error_code e2;
      const tcp::endpoint remote = c->socket.remote_endpoint(e2);
      if (e2 || conns_.size() >= kMaxConnections) {
        counters_.tcp_accept_refused.fetch_add(1, std::memory_order_relaxed);
        c->socket.close(e2);
      } else {
        asio::ip::address ip = remote.address();
        if (ip.is_v6() && ip.to_v6().is_v4_mapped()) ip = asio::ip::make_address_v4(asio::ip::v4_mapped, ip.to_v6());
        c->key = FormatHostPort(ip.to_string(), remote.port());
        c->connected = true;
        Tune(c->socket);
        if (auto old = conns_.find(c->key); old != conns_.end()) Drop(old->second, false);
        conns_[c->key] = c;
        counters_.tcp_accepts.fetch_add(1, std::memory_order_relaxed);
        counters_.tcp_connections.store(conns_.size(), std::memory_order_relaxed);
        StartRead(c);
      }
    }
    AcceptNext();
  });
}

void StreamPool::StartRead(const std::shared_ptr<Conn>& c) {
  c->socket.async_read_some(asio::buffer(c->read_buf), [this, c](boost::system::error_code ec, size_t n) {
    if (closed_ || c->dead) return;
    if (ec) {
      Drop(c, false);
      return;
    }
    c->last_active = Clock::now();
    std::vector<std::string> frames;
    const absl::Status s = c->deframer.Feed(std::string_view(c->read_buf.data(), n), &frames);
    for (const std::string& f : frames) {
      counters_.tcp_frames_in.fetch_add(1, std::memory_order_relaxed);
      on_frame_(c->key, f);
      if (c->dead || closed_) return;
    }
    if (!s.ok()) {
      // The framer refuses a zero length (malformed) or one above the maximum (oversize).
      if (s.message().find("length 0 ") != std::string_view::npos) {
        counters_.stream_rejected_malformed.fetch_add(1, std::memory_order_relaxed);
      } else {
        counters_.stream_rejected_oversize.fetch_add(1, std::memory_order_relaxed);
      }
      spdlog::warn("gossip stream from {} refused: {}; closing it", c->key, s.message());
      Drop(c, false);
      return;
    }
    StartRead(c);
  });
}

void StreamPool::Send(const std::string& to, std::string sealed) {
  if (closed_) return;
  if (sealed.empty() || sealed.size() > protocol::kMaxFrameBytes) {
    counters_.tcp_dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::shared_ptr<Conn> c;
  if (auto it = conns_.find(to); it != conns_.end()) {
    c = it->second;
  } else {
    if (auto b = backoff_.find(to); b != backoff_.end() && b->second.until > Clock::now()) {
      counters_.tcp_dropped_backoff.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    auto target = resolver_.Resolve(to);
    if (!target) {
      counters_.unresolved_peer.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (conns_.size() >= kMaxConnections) {
      counters_.tcp_dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    c = std::make_shared<Conn>(io_);
    c->key = to;
    c->outbound = true;
    conns_[to] = c;
    counters_.tcp_connections.store(conns_.size(), std::memory_order_relaxed);
    c->connect_deadline.expires_after(connect_timeout_);
    c->connect_deadline.async_wait([this, c](boost::system::error_code ec) {
      if (ec || closed_ || c->dead || c->connected) return;  // cancelled, or connected in time
      counters_.tcp_connect_timeouts.fetch_add(1, std::memory_order_relaxed);
      Drop(c, true);  // closing the socket aborts the connect; its handler sees c->dead
    });
    c->socket.async_connect(tcp::endpoint(target->ip, target->port), [this, c](boost::system::error_code ec) {
      if (closed_ || c->dead) return;
      c->connect_deadline.cancel();
      if (ec) {
        counters_.tcp_connect_failures.fetch_add(1, std::memory_order_relaxed);
        Drop(c, true);
        return;
      }
      counters_.tcp_connects.fetch_add(1, std::memory_order_relaxed);
      backoff_.erase(c->key);
      Tune(c->socket);
      c->connected = true;
      c->last_active = Clock::now();
      StartRead(c);
      WriteNext(c);
    });
  }
  if (c->queued_bytes + sealed.size() + protocol::kStreamLengthPrefixBytes > queue_bytes_) {
    counters_.tcp_dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  c->queue.push_back({protocol::StreamLengthPrefix(sealed.size()), std::move(sealed)});
  c->queued_bytes += c->queue.back().bytes();
  if (c->connected && !c->writing) WriteNext(c);
}

void StreamPool::WriteNext(const std::shared_ptr<Conn>& c) {
  if (c->dead || c->writing || c->queue.empty()) return;
  c->writing = true;
  // Gather up to 64 queued frames into one write.
  auto batch = std::make_shared<std::vector<Conn::Queued>>();
  std::vector<asio::const_buffer> bufs;
  while (!c->queue.empty() && batch->size() < 64) {
    batch->push_back(std::move(c->queue.front()));
    c->queue.pop_front();
  }
  for (const Conn::Queued& q : *batch) {  // once the batch is whole: its elements do not move again
    bufs.emplace_back(asio::buffer(q.prefix));
    bufs.emplace_back(asio::buffer(q.sealed));
  }
  asio::async_write(c->socket, bufs, [this, c, batch](boost::system::error_code ec, size_t) {
    c->writing = false;
    if (closed_ || c->dead) return;
    for (const Conn::Queued& q : *batch) c->queued_bytes -= q.bytes();
    if (ec) {
      Drop(c, false);
      return;
    }
    counters_.tcp_frames_out.fetch_add(batch->size(), std::memory_order_relaxed);
    c->last_active = Clock::now();
    WriteNext(c);
  });
}

void StreamPool::Drop(const std::shared_ptr<Conn>& c, bool connect_failed) {
  if (c->dead) return;
  c->dead = true;
  boost::system::error_code ec;
  c->socket.close(ec);
  c->connect_deadline.cancel();
  if (auto it = conns_.find(c->key); it != conns_.end() && it->second == c) conns_.erase(it);
  counters_.tcp_connections.store(conns_.size(), std::memory_order_relaxed);
  if (connect_failed) {
    Backoff& b = backoff_[c->key];
    b.delay = b.delay.count() == 0 ? std::chrono::milliseconds(100)
                                   : std::min(b.delay * 2, std::chrono::milliseconds(10000));
    b.until = Clock::now() + b.delay;
    if (backoff_.size() > 4 * kMaxConnections) backoff_.erase(backoff_.begin());
  }
}

void StreamPool::Sweep() {
  if (closed_) return;
  const auto now = Clock::now();
  std::vector<std::shared_ptr<Conn>> idle;
  for (const auto& [key, c] : conns_) {
    if (c->connected && !c->writing && c->queue.empty() && now - c->last_active > kIdleTimeout) idle.push_back(c);
  }
  for (const auto& c : idle) Drop(c, false);
  for (auto it = backoff_.begin(); it != backoff_.end();) {
    it = it->second.until + std::chrono::seconds(60) < now ? backoff_.erase(it) : std::next(it);
  }
  sweep_timer_.expires_after(std::chrono::seconds(10));
  sweep_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) Sweep();
  });
}

void StreamPool::Close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  sweep_timer_.cancel();
  for (auto& [key, c] : conns_) {
    c->dead = true;
    c->socket.close(ec);
    c->connect_deadline.cancel();
  }
  conns_.clear();
}

}  // namespace pollen::runtime
