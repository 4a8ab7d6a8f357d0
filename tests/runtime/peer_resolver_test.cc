// PeerResolver never blocks its caller on a name lookup: a lookup that hangs
// (held on a latch here) leaves Resolve answering at once from the cache;
// lookups are deduplicated and bounded; a stale or failed refresh keeps the
// last good answer; numeric addresses need no lookup; and "localhost" resolves
// to a loopback address through the real getaddrinfo.
#include "node/runtime/peer_resolver.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace pollen::runtime {
namespace {

namespace ip = boost::asio::ip;

// Polls every 10 ms; the bound is only a guard against a hang.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 3000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A lookup function that blocks until Release(), counting calls.
struct GatedLookup {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> calls{0}, entered{0};
  std::atomic<bool> fail{false};
  PeerResolver::LookupFn Fn() {
    return [this](const std::string& host) -> std::optional<ip::address> {
      ++calls;
      ++entered;
      std::unique_lock lock(mu);
      cv.wait(lock, [this] { return open; });
      if (fail.load() || host == "nx.example") return std::nullopt;
      return ip::make_address("10.0.0.1");
    };
  }
  // Declared after the resolver: opens the gate before the resolver's
  // destructor joins its thread, even when an assertion returned early.
  struct ReleaseOnExit {
    GatedLookup& gate;
    ~ReleaseOnExit() { gate.Release(); }
  };
  void Release() {
    {
      std::lock_guard lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

TEST(PeerResolverTest, NumericAddressesNeedNoLookup) {
  std::atomic<int> calls{0};
  PeerResolver::Options o;
  o.lookup = [&](const std::string&) -> std::optional<ip::address> {
    ++calls;
    return std::nullopt;
  };
  PeerResolver r(o);
  auto v4 = r.Resolve("127.0.0.1:7946");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->ip, ip::make_address("127.0.0.1"));
  EXPECT_EQ(v4->port, 7946);
  auto v6 = r.Resolve("[::1]:80");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->ip, ip::make_address("::1"));
  EXPECT_FALSE(r.Resolve("no-port").has_value());
  EXPECT_FALSE(r.Resolve("").has_value());
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(r.lookups_done(), 0u);
}

TEST(PeerResolverTest, AHangingLookupDoesNotBlockResolve) {
  GatedLookup gate;
  PeerResolver::Options o;
  o.lookup = gate.Fn();
  PeerResolver r(o);
  GatedLookup::ReleaseOnExit release{gate};
  EXPECT_FALSE(r.Resolve("peer.example:7946").has_value());  // queued, not waited for
  ASSERT_TRUE(Eventually([&] { return gate.entered.load() == 1; }));
  // The lookup is stuck inside the resolver thread; Resolve still returns.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(r.Resolve("peer.example:7946").has_value());
  EXPECT_EQ(gate.calls.load(), 1);  // one lookup per name at a time
  gate.Release();
  ASSERT_TRUE(Eventually([&] { return r.Resolve("peer.example:7946").has_value(); }));
  auto a = r.Resolve("peer.example:9");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->ip, ip::make_address("10.0.0.1"));
  EXPECT_EQ(a->port, 9);  // the port comes from the address, the cache is per host
  EXPECT_EQ(gate.calls.load(), 1);  // fresh: no new lookup
}

TEST(PeerResolverTest, StaleAnswersAreServedWhileRefreshingAndAfterAFailedRefresh) {
  GatedLookup gate;
  gate.Release();
  PeerResolver::Options o;
  o.lookup = gate.Fn();
  o.ttl = std::chrono::seconds(0);  // every answer is stale at once
  o.negative_ttl = std::chrono::seconds(0);
  PeerResolver r(o);
  ASSERT_TRUE(Eventually([&] { return r.Resolve("peer.example:1").has_value(); }));
  gate.fail.store(true);  // DNS goes away
  const int before = gate.calls.load();
  ASSERT_TRUE(Eventually([&] {
    auto a = r.Resolve("peer.example:1");
    EXPECT_TRUE(a.has_value());  // never lost while refreshes fail
    return gate.calls.load() >= before + 3;
  }));
  EXPECT_EQ(r.Resolve("peer.example:1")->ip, ip::make_address("10.0.0.1"));
  // A name that never resolved stays unresolved.
  ASSERT_TRUE(Eventually([&] {
    (void)r.Resolve("nx.example:1");
    return r.lookups_done() >= static_cast<uint64_t>(gate.calls.load()) && gate.calls.load() > before + 3;
  }));
  EXPECT_FALSE(r.Resolve("nx.example:1").has_value());
}

TEST(PeerResolverTest, QueuedLookupsAreBounded) {
  GatedLookup gate;
  PeerResolver::Options o;
  o.lookup = gate.Fn();
  PeerResolver r(o);
  GatedLookup::ReleaseOnExit release{gate};
  (void)r.Resolve("first.example:1");
  ASSERT_TRUE(Eventually([&] { return gate.entered.load() == 1; }));  // the thread is busy with it
  for (size_t i = 0; i < PeerResolver::kMaxQueued + 10; ++i) {
    EXPECT_FALSE(r.Resolve("h" + std::to_string(i) + ".example:1").has_value());
  }
  EXPECT_EQ(r.lookups_dropped(), 10u);
  gate.Release();
  ASSERT_TRUE(Eventually([&] { return r.lookups_done() == PeerResolver::kMaxQueued + 1; }));
  // The dropped names are queued again on their next use.
  ASSERT_TRUE(Eventually([&] { return r.Resolve("h" + std::to_string(PeerResolver::kMaxQueued + 5) + ".example:1").has_value(); }));
}

TEST(PeerResolverTest, LocalhostResolvesToLoopbackThroughGetaddrinfo) {
  PeerResolver r;
  std::optional<IpPort> a;
  ASSERT_TRUE(Eventually([&] {
    a = r.Resolve("localhost:1234");
    return a.has_value();
  }));
  EXPECT_TRUE(a->ip.is_loopback()) << a->ip.to_string();
  EXPECT_EQ(a->port, 1234);
}

}  // namespace
}  // namespace pollen::runtime
