#include "node/runtime/peer_resolver.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cassert>
#include <cstring>

#include "node/runtime/net_address.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

std::optional<boost::asio::ip::address> GetAddrInfo(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  std::optional<boost::asio::ip::address> result;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return result;
  for (addrinfo* a = res; a != nullptr && !result; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      boost::asio::ip::address_v4::bytes_type b;
      std::memcpy(b.data(), &sin->sin_addr, 4);
      result = boost::asio::ip::address_v4(b);
    } else if (a->ai_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      boost::asio::ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &sin6->sin6_addr, 16);
      result = boost::asio::ip::address_v6(b);
    }
  }
  freeaddrinfo(res);
  return result;
}

}  // namespace

PeerResolver::PeerResolver() : PeerResolver(Options{}) {}

PeerResolver::PeerResolver(Options options) : options_(std::move(options)) {}

PeerResolver::~PeerResolver() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<IpPort> PeerResolver::Resolve(const std::string& address) {
  auto hp = ParseHostPort(address);
  if (!hp.ok()) return std::nullopt;
  if (hp->numeric) {
    boost::system::error_code ec;
    auto ip = boost::asio::ip::make_address(hp->host, ec);
    if (ec) return std::nullopt;
    return IpPort{ip, hp->port};
  }
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  auto it = cache_.find(hp->host);
  if (it == cache_.end() || it->second.expires <= now) QueueLookupLocked(hp->host);
  if (it == cache_.end() || !it->second.ip) return std::nullopt;
  return IpPort{*it->second.ip, hp->port};  // possibly stale while a refresh runs
}

void PeerResolver::QueueLookupLocked(const std::string& host) {
  if (stopping_ || in_flight_.count(host)) return;
  if (queue_.size() >= kMaxQueued) {
    ++lookups_dropped_;
    return;
  }
  in_flight_.insert(host);
  queue_.push_back(host);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_one();
}

void PeerResolver::Loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const std::string host = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::optional<boost::asio::ip::address> ip = options_.lookup ? options_.lookup(host) : GetAddrInfo(host);
    const auto now = std::chrono::steady_clock::now();
    lock.lock();
    if (cache_.size() >= kMaxEntries && !cache_.count(host)) {
      // Drop the half that expires first.
      std::multimap<std::chrono::steady_clock::time_point, std::string> by_expiry;
      for (const auto& [h, e] : cache_) by_expiry.emplace(e.expires, h);
      size_t n = 0;
      for (const auto& [t, h] : by_expiry) {
        if (n++ >= kMaxEntries / 2) break;
        cache_.erase(h);
      }
    }
    Entry& e = cache_[host];
    // A failed refresh keeps serving the last good answer until the next try.
    if (ip || !e.ip) e.ip = ip;
    e.expires = now + (ip ? options_.ttl : options_.negative_ttl);
    in_flight_.erase(host);
    ++lookups_done_;
  }
}

uint64_t PeerResolver::lookups_done() const {
  std::lock_guard lock(mu_);
  return lookups_done_;
}

uint64_t PeerResolver::lookups_dropped() const {
  std::lock_guard lock(mu_);
  return lookups_dropped_;
}

}  // namespace pollen::runtime
