// PeerResolver: node::Address ("host:port") -> IP endpoint, never blocking
// the caller (the driver thread) on DNS.
//
// Promises:
//   - Numeric addresses resolve immediately, on the calling thread.
//   - Hostnames (Kubernetes seeds and advertise names) are looked up on the
//     resolver's own thread. Resolve answers from the cache only: a name not
//     yet looked up answers nullopt (the caller drops that send and counts it;
//     gossip retries) and queues a lookup; a cached answer older than its TTL
//     (30 s, failures 5 s) is still returned while a fresh lookup runs, so a
//     slow or failing resolver never stalls gossip and a known peer stays
//     reachable through a DNS outage.
//   - Bounded: at most kMaxEntries cached names (the oldest half is dropped
//     when full) and kMaxQueued lookups waiting (further names are not queued
//     until there is room; lookups_dropped counts them). One lookup per name
//     at a time.
//   - Thread-safe. The destructor waits for a lookup in progress (getaddrinfo
//     has its own timeouts) and abandons the queued ones.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <boost/asio/ip/address.hpp>

namespace pollen::runtime {

struct IpPort {
  boost::asio::ip::address ip;
  uint16_t port = 0;
};

class PeerResolver {
 public:
  static constexpr size_t kMaxEntries = 4096;
  static constexpr size_t kMaxQueued = 256;

  // Looks a host name up (blocking); nullopt when it does not resolve.
  using LookupFn = std::function<std::optional<boost::asio::ip::address>(const std::string& host)>;

  struct Options {
    LookupFn lookup;  // empty: getaddrinfo (first IPv4 or IPv6 answer)
    std::chrono::steady_clock::duration ttl = std::chrono::seconds(30);
    std::chrono::steady_clock::duration negative_ttl = std::chrono::seconds(5);
  };

  PeerResolver();
  explicit PeerResolver(Options options);
  ~PeerResolver();
  PeerResolver(const PeerResolver&) = delete;
  PeerResolver& operator=(const PeerResolver&) = delete;

  std::optional<IpPort> Resolve(const std::string& address);

  uint64_t lookups_done() const;
  uint64_t lookups_dropped() const;

 private:
  struct Entry {
    std::optional<boost::asio::ip::address> ip;  // per host name
    std::chrono::steady_clock::time_point expires;
  };
  void QueueLookupLocked(const std::string& host);  // mu_ held
  void Loop();

  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> cache_;  // host -> answer
  std::deque<std::string> queue_;       // hosts waiting for a lookup
  std::set<std::string> in_flight_;     // queued or being looked up
  uint64_t lookups_done_ = 0;
  uint64_t lookups_dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // started on the first hostname
};

}  // namespace pollen::runtime
