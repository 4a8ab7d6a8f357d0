// A test pump for Nodes: no sockets, virtual time, optional loss.
//
// Cluster owns N nodes named "n0".."n<N-1>" (addresses "addr-0"...), each
// seeded from the cluster seed. Step() advances virtual time by `step`, ticks
// every node, then delivers outgoing frames (zero latency) until none are left
// or a bound is hit. A filter decides per frame whether it is dropped; it can
// look inside frames because the test holds the cluster secret.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "crdt/generations.h"
#include "node/core/frames.h"
#include "node/core/node.h"
#include "node/core/rng.h"
#include "protocol/seal.h"
#include "protocol/wire.pb.h"

namespace pollen::node::testing {

using namespace std::chrono_literals;

inline crdt::ClusterSecret TestSecret(uint64_t seed = 7) {
  Rng rng(seed);
  crdt::ClusterSecret s;
  for (auto& b : s.bytes) b = static_cast<uint8_t>(rng.Next());
  return s;
}

inline std::string AddressOf(size_t i) { return "addr-" + std::to_string(i); }
inline std::string NameOf(size_t i) { return "n" + std::to_string(i); }

// Opens a frame with the cluster secret (no replay check) to see its type.
inline std::optional<wire::Envelope> Peek(const crdt::ClusterSecret& secret, const std::string& frame) {
  protocol::Keyring ring(protocol::DeriveGossipKey(secret));
  auto opened = protocol::Open(ring, "test", frame, protocol::kMaxFrameBytes);
  if (!std::holds_alternative<protocol::Opened>(opened)) return std::nullopt;
  wire::Envelope env;
  if (!env.ParseFromString(std::get<protocol::Opened>(opened).plaintext)) return std::nullopt;
  return env;
}

// Seals arbitrary envelopes as a fake member would (its own sender id).
class Forger {
 public:
  explicit Forger(const crdt::ClusterSecret& secret, uint64_t sender = 0xF0F0)
      : ring_(protocol::DeriveGossipKey(secret)), sender_(sender) {}
  std::string Seal(wire::Envelope env, bool set_defaults = true) {
    if (set_defaults) {
      if (env.version() == 0) env.set_version(kWireVersion);
      if (env.sender_name().empty()) env.set_sender_name("forger");
      if (env.sender_address().empty()) env.set_sender_address("addr-forger");
    }
    return protocol::Seal(ring_, "test", sender_, ++counter_, env.SerializeAsString());
  }
  std::string SealBytes(std::string_view plaintext) { return protocol::Seal(ring_, "test", sender_, ++counter_, plaintext); }

 private:
  protocol::Keyring ring_;
  uint64_t sender_;
  uint64_t counter_ = 0;
};

struct ClusterOptions {
  size_t nodes = 3;
  uint64_t seed = 1;
  std::vector<FilterConfig> filters;
  Duration gossip_interval = 200ms;
  Duration anti_entropy_interval = 2s;
  Duration anti_entropy_max_interval{0};  // NodeConfig's; 0 (the tests' default): a fixed interval
  Duration step = 50ms;
  double datagram_loss = 0;  // applied to every datagram
  bool tcp_only = false;
  NodeConfig::Dissemination dissemination = NodeConfig::Dissemination::kTree;  // the node default
  bool report_peer_adds = false;  // NodeConfig::report_peer_adds
  bool compact_refs = true;       // NodeConfig::tree_compact_refs
  // Last word on node i's config (say, one node as an older version).
  std::function<void(size_t i, NodeConfig&)> configure;
  bool inspect = false;  // count delivered frames by (channel, type) in delivered()
  // Return true to drop a frame (from, outgoing, peeked envelope if it opened).
  std::function<bool(size_t from, const Outgoing&, const wire::Envelope&)> drop;
};

class Cluster {
 public:
  explicit Cluster(ClusterOptions options) : options_(std::move(options)), rng_(options_.seed ^ 0xABCD) {
    for (size_t i = 0; i < options_.nodes; ++i) {
      nodes_.push_back(MakeNode(i));
      index_[AddressOf(i)] = i;
    }
  }

  NodeConfig ConfigFor(size_t i) const {
    NodeConfig c;
    c.name = NameOf(i);
    c.advertise = AddressOf(i);
    c.seeds = {AddressOf(0)};
    c.secret = TestSecret();
    c.cluster_label = "test";
    c.rng_seed = options_.seed * 1000 + i;
    c.gossip_interval = options_.gossip_interval;
    c.anti_entropy_interval = options_.anti_entropy_interval;
    c.anti_entropy_max_interval = std::max(options_.anti_entropy_interval, options_.anti_entropy_max_interval);
    c.tcp_only = options_.tcp_only;
    c.dissemination = options_.dissemination;
    c.filters = options_.filters;
    c.report_peer_adds = options_.report_peer_adds;
    c.tree_compact_refs = options_.compact_refs;
    if (options_.configure) options_.configure(i, c);
    return c;
  }

  std::unique_ptr<Node> MakeNode(size_t i) const {
    auto node = Node::Create(ConfigFor(i));
    EXPECT_TRUE(node.ok()) << node.status();
    return *std::move(node);
  }

  Node& node(size_t i) { return *nodes_[i]; }
  // Crash and restart node i: a new process (a new boot seed, so new sender
  // ids), optionally with snapshots imported before Start.
  void Restart(size_t i, const std::map<std::string, std::string>& snapshots = {}) {
    NodeConfig c = ConfigFor(i);
    c.rng_seed += 7919 * ++restarts_;
    auto node = Node::Create(c);
    ASSERT_TRUE(node.ok()) << node.status();
    for (const auto& [name, bytes] : snapshots) ASSERT_TRUE((*node)->ImportSnapshot(bytes).ok());
    nodes_[i] = *std::move(node);
    nodes_[i]->Start(now_);
  }
  size_t size() const { return nodes_.size(); }
  Time now() const { return now_; }
  std::vector<Event>& events(size_t i) { return events_[i]; }
  uint64_t dropped() const { return dropped_; }
  // With options.inspect: frames delivered by "datagram/<body case>" or "stream/<body case>".
  const std::map<std::string, uint64_t>& delivered() const { return delivered_; }

  void StartAll() {
    for (auto& n : nodes_) n->Start(now_);
    Deliver();
  }

  void Step() {
    now_ += options_.step;
    for (auto& n : nodes_) {
      if (n->NextWakeup() <= now_) n->Tick(now_);
    }
    Deliver();
    if (on_step) on_step();
  }

  void RunFor(Duration d) {
    const Time end = now_ + d;
    while (now_ < end) Step();
  }

  // Runs until pred() holds or `limit` elapses; returns pred().
  bool RunUntil(const std::function<bool()>& pred, Duration limit) {
    const Time end = now_ + limit;
    while (!pred() && now_ < end) Step();
    return pred();
  }

  void Deliver() {
    for (int round = 0; round < 1000; ++round) {
      bool any = false;
      for (size_t i = 0; i < nodes_.size(); ++i) {
        for (Event& e : nodes_[i]->TakeEvents()) events_[i].push_back(std::move(e));
        std::vector<Outgoing> out = nodes_[i]->TakeOutgoing();
        for (Outgoing& o : out) {
          any = true;
          // Frame-size and channel promises of node.h, checked on every frame.
          if (o.channel == Channel::kDatagram) {
            EXPECT_LE(o.bytes.size(), size_t{1200});
            EXPECT_FALSE(options_.tcp_only);
          }
          auto it = index_.find(o.to);
          if (it == index_.end()) continue;
          if (ShouldDrop(i, o)) {
            ++dropped_;
            continue;
          }
          if (options_.inspect) {
            std::optional<wire::Envelope> env = Peek(TestSecret(), o.bytes);
            const char* ch = o.channel == Channel::kDatagram ? "datagram/" : "stream/";
            ++delivered_[std::string(ch) + (env ? std::to_string(env->body_case()) : "?")];
          }
          if (o.channel == Channel::kDatagram) {
            nodes_[it->second]->HandleDatagram(AddressOf(i), o.bytes, now_);
          } else {
            nodes_[it->second]->HandleStreamFrame(AddressOf(i), o.bytes, now_);
          }
        }
      }
      if (!any) return;
    }
    ADD_FAILURE() << "delivery did not quiesce";
  }

  // Digest of every live generation of `filter` at node i.
  std::vector<std::pair<uint64_t, uint64_t>> Digests(size_t i, const std::string& filter) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    auto info = nodes_[i]->Info(filter);
    if (!info.ok()) return out;
    for (const GenerationInfo& g : info->generations) out.emplace_back(crdt::SlotOf(g.epoch, g.layer), g.digest);
    return out;
  }

  bool Converged(const std::string& filter) {
    auto first = Digests(0, filter);
    if (first.empty()) return false;
    for (size_t i = 1; i < nodes_.size(); ++i) {
      if (Digests(i, filter) != first) return false;
    }
    return true;
  }

  bool AllMembersLive() {
    for (auto& n : nodes_) {
      size_t live = 0;
      for (const MemberInfo& m : n->Members()) live += m.state == MemberState::kAlive;
      if (live != nodes_.size()) return false;
    }
    return true;
  }

  std::function<void()> on_step;

 private:
  bool ShouldDrop(size_t from, const Outgoing& o) {
    if (o.channel == Channel::kDatagram && options_.datagram_loss > 0 && rng_.Unit() < options_.datagram_loss) return true;
    if (options_.drop) {
      std::optional<wire::Envelope> env = Peek(TestSecret(), o.bytes);
      if (env && options_.drop(from, o, *env)) return true;
    }
    return false;
  }

  ClusterOptions options_;
  Rng rng_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<Address, size_t> index_;
  std::map<size_t, std::vector<Event>> events_;
  Time now_{0};
  uint64_t dropped_ = 0;
  uint64_t restarts_ = 0;
  std::map<std::string, uint64_t> delivered_;
};

// The keys tests add: "key-<i>".
inline std::string Key(int i) { return "key-" + std::to_string(i); }

// Keys [first, last) read present on every node.
inline bool AllPresent(Cluster& c, const std::string& filter, int first, int last) {
  for (size_t n = 0; n < c.size(); ++n) {
    for (int i = first; i < last; ++i) {
      auto r = c.node(n).Exists(filter, Key(i));
      if (!r.ok() || !*r) return false;
    }
  }
  return true;
}

inline FilterConfig SharedFilter(const std::string& name, uint64_t capacity = 10'000, double fpr = 0.01) {
  FilterConfig f;
  f.name = name;
  f.capacity = capacity;
  f.fpr = fpr;
  return f;
}

// Forged frames from an authenticated peer: each envelope is sealed and
// handed to node `target` as a stream frame (some are over a datagram's
// size). Returns how many it counted as malformed, and whether the newest
// generation of `filter` kept its set bits.
struct ForgedOutcome {
  uint64_t malformed = 0;
  bool bits_unchanged = false;
};
inline ForgedOutcome SendForged(Cluster& c, size_t target, const std::string& filter,
                                const std::vector<wire::Envelope>& envelopes) {
  auto set_bits = [&] {
    auto info = c.node(target).Info(filter);
    return info.ok() ? std::optional<uint64_t>(info->generations.back().set_bits) : std::nullopt;
  };
  const std::optional<uint64_t> bits_before = set_bits();
  const uint64_t malformed_before = c.node(target).Counters().rejected_by_reason["malformed"];
  Forger forger(TestSecret());
  for (const wire::Envelope& env : envelopes) c.node(target).HandleStreamFrame("addr-forger", forger.Seal(env), c.now());
  ForgedOutcome out;
  out.malformed = c.node(target).Counters().rejected_by_reason["malformed"] - malformed_before;
  out.bits_unchanged = bits_before.has_value() && set_bits() == bits_before;
  return out;
}

// The four malformed shapes of a request carrying keys (RouteAdd,
// KeyCheck): no keys, no id, one key over `max_keys`, invalid filter
// parameters for `filter`.
template <typename KeyRequest>
std::vector<KeyRequest> MalformedKeyRequests(size_t max_keys, const std::string& filter) {
  std::vector<KeyRequest> out(4);
  out[0].set_id(1);
  out[1].add_keys("k");
  out[2].set_id(2);
  for (size_t i = 0; i <= max_keys; ++i) out[2].add_keys("k" + std::to_string(i));
  out[3].set_id(3);
  out[3].add_keys("k");
  out[3].mutable_filter()->set_name(filter);  // blocks 0, k 0: invalid parameters
  return out;
}

inline size_t CountEvents(const std::vector<Event>& events, Event::Kind kind) {
  size_t n = 0;
  for (const Event& e : events) n += e.kind == kind;
  return n;
}

}  // namespace pollen::node::testing
