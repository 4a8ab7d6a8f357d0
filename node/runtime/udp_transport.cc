#include "node/runtime/udp_transport.h"

#include <memory>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/v6_only.hpp>

#include "node/runtime/net_address.h"
#include "spdlog/spdlog.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace asio = boost::asio;
using asio::ip::udp;

UdpTransport::UdpTransport(asio::io_context& io, RuntimeCounters& counters, PeerResolver& resolver)
    : socket_(io), counters_(counters), resolver_(resolver) {}

absl::Status UdpTransport::Bind(const udp::endpoint& endpoint) {
  boost::system::error_code ec;
  socket_.open(endpoint.protocol(), ec);
  if (!ec && endpoint.address().is_v6()) socket_.set_option(asio::ip::v6_only(false), ec);
  ec.clear();
  if (!ec) socket_.set_option(asio::socket_base::receive_buffer_size(4 << 20), ec);
  ec.clear();  // best effort
  socket_.bind(endpoint, ec);
  v6_socket_ = endpoint.address().is_v6();
  if (ec) {
    return absl::UnavailableError("option 'gossip-bind': cannot bind UDP " + endpoint.address().to_string() + ":" +
                                  std::to_string(endpoint.port()) + ": " + ec.message());
  }
  return absl::OkStatus();
}

uint16_t UdpTransport::port() const {
  boost::system::error_code ec;
  return socket_.local_endpoint(ec).port();
}

void UdpTransport::Start(DatagramFn on_datagram) {
  on_datagram_ = std::move(on_datagram);
  ReceiveNext();
}

void UdpTransport::ReceiveNext() {
  if (closed_) return;
  socket_.async_receive_from(asio::buffer(buffer_), sender_, [this](boost::system::error_code ec, size_t n) {
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) {
      counters_.udp_datagrams_in.fetch_add(1, std::memory_order_relaxed);
      asio::ip::address ip = sender_.address();
      if (ip.is_v6() && ip.to_v6().is_v4_mapped()) ip = asio::ip::make_address_v4(asio::ip::v4_mapped, ip.to_v6());
      on_datagram_(FormatHostPort(ip.to_string(), sender_.port()), std::string_view(buffer_.data(), n));
    }
    ReceiveNext();
  });
}

void UdpTransport::Send(const std::string& to, std::string bytes) {
  if (closed_) return;
  if (in_flight_ >= kMaxInFlight) {
    counters_.udp_dropped_queue_full.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto target = resolver_.Resolve(to);
  if (!target) {
    counters_.unresolved_peer.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  asio::ip::address ip = target->ip;
  // A v6 socket (dual-stack) sends to v4 peers through mapped addresses.
  if (v6_socket_ && ip.is_v4()) {
    ip = asio::ip::make_address_v6(asio::ip::v4_mapped, ip.to_v4());
  }
  const udp::endpoint dest(ip, target->port);
  auto data = std::make_shared<std::string>(std::move(bytes));
  ++in_flight_;
  socket_.async_send_to(asio::buffer(*data), dest, [this, data](boost::system::error_code ec, size_t) {
    --in_flight_;
    if (ec) {
      if (ec != asio::error::operation_aborted) counters_.udp_send_errors.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    counters_.udp_datagrams_out.fetch_add(1, std::memory_order_relaxed);
  });
}

void UdpTransport::Close() {
  closed_ = true;
  boost::system::error_code ec;
  socket_.close(ec);
}

}  // namespace pollen::runtime
