// PeerResolver: node::Address ("host:port") -> IP endpoint, with a small cache.
//
// Numeric addresses resolve immediately. Hostnames (Kubernetes seeds) resolve
// with getaddrinfo on the calling thread, cached for 30 s (failures for 5 s),
// at most kMaxEntries cached. Driver thread only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include <boost/asio/ip/address.hpp>

namespace pollen::runtime {

struct IpPort {
  boost::asio::ip::address ip;
  uint16_t port = 0;
};

class PeerResolver {
 public:
  static constexpr size_t kMaxEntries = 4096;
  std::optional<IpPort> Resolve(const std::string& address);

 private:
  struct Entry {
    std::optional<IpPort> value;
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Entry> cache_;
};

}  // namespace pollen::runtime
