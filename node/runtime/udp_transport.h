// UdpTransport: the gossip datagram socket, driven on the driver io_context.
//
// Promises: one socket bound to the gossip address; received datagrams (at most
// kMaxDatagramBytes, larger ones are truncated by the kernel and then refused
// by the node as malformed) are handed to `on_datagram` with the sender as a
// "host:port" string; sends are asynchronous with at most kMaxInFlight queued
// (more are dropped and counted: gossip tolerates loss). Driver thread only.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>

#include "absl/status/status.h"
#include "node/runtime/peer_resolver.h"
#include "node/runtime/runtime_counters.h"

namespace pollen::runtime {

class UdpTransport {
 public:
  static constexpr size_t kMaxDatagramBytes = 65536;
  static constexpr size_t kMaxInFlight = 4096;
  using DatagramFn = std::function<void(const std::string& from, std::string_view bytes)>;

  UdpTransport(boost::asio::io_context& io, RuntimeCounters& counters, PeerResolver& resolver);
  absl::Status Bind(const boost::asio::ip::udp::endpoint& endpoint);
  void Start(DatagramFn on_datagram);
  void Send(const std::string& to, std::string bytes);
  void Close();
  uint16_t port() const;

 private:
  void ReceiveNext();

  boost::asio::ip::udp::socket socket_;
  RuntimeCounters& counters_;
  PeerResolver& resolver_;
  DatagramFn on_datagram_;
  boost::asio::ip::udp::endpoint sender_;
  std::array<char, kMaxDatagramBytes> buffer_;
  size_t in_flight_ = 0;
  bool closed_ = false;
  bool v6_socket_ = false;
};

}  // namespace pollen::runtime
