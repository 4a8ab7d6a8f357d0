#include "node/runtime/peer_resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cstring>

#include "node/runtime/net_address.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

std::optional<IpPort> PeerResolver::Resolve(const std::string& address) {
  const auto now = std::chrono::steady_clock::now();
  if (auto it = cache_.find(address); it != cache_.end() && it->second.expires > now) return it->second.value;
  auto hp = ParseHostPort(address);
  if (!hp.ok()) return std::nullopt;
  std::optional<IpPort> result;
  if (hp->numeric) {
    boost::system::error_code ec;
    auto ip = boost::asio::ip::make_address(hp->host, ec);
    if (!ec) result = IpPort{ip, hp->port};
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(hp->host.c_str(), nullptr, &hints, &res) == 0 && res != nullptr) {
      for (addrinfo* a = res; a != nullptr && !result; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
          const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
          boost::asio::ip::address_v4::bytes_type b;
          std::memcpy(b.data(), &sin->sin_addr, 4);
          result = IpPort{boost::asio::ip::address_v4(b), hp->port};
        } else if (a->ai_family == AF_INET6) {
          const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
          boost::asio::ip::address_v6::bytes_type b;
          std::memcpy(b.data(), &sin6->sin6_addr, 16);
          result = IpPort{boost::asio::ip::address_v6(b), hp->port};
        }
      }
      freeaddrinfo(res);
    }
  }
  if (cache_.size() >= kMaxEntries) cache_.clear();
  cache_[address] = Entry{result, now + (result ? std::chrono::seconds(30) : std::chrono::seconds(5))};
  return result;
}

}  // namespace pollen::runtime
