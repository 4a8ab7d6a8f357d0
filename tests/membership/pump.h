// A tiny deterministic message pump for Membership tests: a virtual clock,
// per-message latency from a seeded Rng, optional drop rules, and nodes that
// can be stopped (no ticks, nothing in or out) and resumed. Every message is
// serialized and parsed, so the wire form is exercised too. No sockets.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "node/core/membership.h"
#include "node/core/rng.h"

namespace pollen::node::testing {

using namespace std::chrono_literals;

inline const char* KindName(Event::Kind k) {
  switch (k) {
    case Event::Kind::kMemberJoined:
      return "joined";
    case Event::Kind::kMemberAlive:
      return "alive";
    case Event::Kind::kMemberSuspect:
      return "suspect";
    case Event::Kind::kMemberDead:
      return "dead";
    case Event::Kind::kMemberLeft:
      return "left";
    default:
      return "other";
  }
}

struct LoggedEvent {
  Time at;
  std::string observer;
  Event event;
};

class Pump {
 public:
  explicit Pump(uint64_t seed) : rng_(seed) {}

  static MembershipConfig Config(const std::string& name, std::vector<Address> seeds) {
    MembershipConfig c;
    c.self_name = name;
    c.self_address = AddressOf(name);
    c.seeds = std::move(seeds);
    c.probe_interval = 1s;
    c.probe_timeout = 400ms;
    c.indirect_probes = 3;
    c.suspicion_multiplier = 4.0;
    c.dead_reconnect_interval = 5s;
    c.gossip_interval = 200ms;
    return c;
  }
  static Address AddressOf(const std::string& name) { return name + ":7946"; }

  // Adds a node (not started). Its Rng seed is derived from the pump's.
  Membership& Add(const MembershipConfig& config) {
    auto m = std::make_unique<Membership>(config, rng_.Next());
    Membership& ref = *m;
    by_address_[config.self_address] = config.self_name;
    nodes_[config.self_name] = std::move(m);
    return ref;
  }
  Membership& Add(const std::string& name, std::vector<Address> seeds) { return Add(Config(name, std::move(seeds))); }

  void Start(const std::string& name) {
    running_.insert(name);
    nodes_.at(name)->Start(now_);
    Collect();
  }
  void Stop(const std::string& name) { running_.erase(name); }
  void Resume(const std::string& name) { running_.insert(name); }
  Membership& node(const std::string& name) { return *nodes_.at(name); }
  const std::map<std::string, std::unique_ptr<Membership>>& nodes() const { return nodes_; }
  Time now() const { return now_; }

  // Drop rule on (from name, to name); nullptr = deliver everything.
  void SetDrop(std::function<bool(const std::string&, const std::string&)> drop) { drop_ = std::move(drop); }
  void SetLossRate(double p) { loss_ = p; }

  // Delivers a hand-made message to `to` now, as if from `from_name`.
  void Inject(const std::string& from_name, const std::string& to, const wire::MembershipMessage& msg) {
    nodes_.at(to)->Handle(AddressOf(from_name), msg, now_);
    Collect();
  }

  // Runs until `until`, or until pred() holds (checked after every step).
  // Returns whether pred held. Bounded by a step limit.
  bool RunUntil(Time until, const std::function<bool()>& pred = nullptr) {
    Time checked{0};
    bool first = true;
    for (uint64_t steps = 0; steps < 50'000'000; ++steps) {
      // pred is checked at most every 10 ms of virtual time (it can be costly).
      if (pred && (first || now_ - checked >= 10ms)) {
        first = false;
        checked = now_;
        if (pred()) return true;
      }
      Time next = Time::max();
      if (!queue_.empty()) next = std::get<0>(queue_.begin()->first);
      for (const std::string& name : running_) next = std::min(next, nodes_.at(name)->NextWakeup());
      if (next > until) {
        now_ = until;
        return pred ? pred() : true;
      }
      now_ = std::max(now_, next);
      while (!queue_.empty() && std::get<0>(queue_.begin()->first) <= now_) {
        auto node = queue_.extract(queue_.begin());
        const auto& [from, to, bytes] = node.mapped();
        if (!running_.count(to)) continue;
        wire::MembershipMessage msg;
        if (!msg.ParseFromString(bytes)) continue;
        ++delivered_;
        nodes_.at(to)->Handle(AddressOf(from), msg, now_);
      }
      for (const std::string& name : running_) {
        if (nodes_.at(name)->NextWakeup() <= now_) nodes_.at(name)->Tick(now_);
      }
      Collect();
    }
    return false;
  }
  bool RunFor(Duration d, const std::function<bool()>& pred = nullptr) { return RunUntil(now_ + d, pred); }

  // True if every running node among `observers` holds every member of
  // `subjects` in `state` (self counts as alive).
  bool AllSee(const std::vector<std::string>& observers, const std::vector<std::string>& subjects,
              MemberState state) const {
    for (const std::string& o : observers) {
      for (const std::string& s : subjects) {
        auto info = nodes_.at(o)->Find(s);
        if (!info || info->state != state) return false;
      }
    }
    return true;
  }

  const std::vector<LoggedEvent>& events() const { return events_; }
  std::vector<LoggedEvent> EventsAbout(const std::string& subject, Event::Kind kind) const {
    std::vector<LoggedEvent> out;
    for (const LoggedEvent& e : events_) {
      if (e.event.subject == subject && e.event.kind == kind) out.push_back(e);
    }
    return out;
  }
  std::string Trace() const {
    std::string out;
    for (const LoggedEvent& e : events_) {
      out += std::to_string(e.at.count()) + " " + e.observer + " " + KindName(e.event.kind) + " " +
             e.event.subject + " " + std::to_string(e.event.count) + "\n";
    }
    return out;
  }
  uint64_t delivered() const { return delivered_; }
  uint64_t sent() const { return sent_; }
  std::map<std::string, uint64_t> sent_by_type() const { return sent_by_type_; }

 private:
  void Collect() {
    for (auto& [name, m] : nodes_) {
      for (Event& e : m->TakeEvents()) events_.push_back(LoggedEvent{now_, name, std::move(e)});
      std::vector<Membership::Send> out = m->TakeOutgoing();
      if (!running_.count(name)) continue;
      for (Membership::Send& s : out) {
        ++sent_;
        ++sent_by_type_[TypeOf(*s.msg)];
        auto to = by_address_.find(s.to);
        if (to == by_address_.end()) continue;
        if (drop_ && drop_(name, to->second)) continue;
        if (loss_ > 0 && !s.reliable && rng_.Unit() < loss_) continue;  // a stream is retransmitted
        const Duration latency = 1ms + Duration(static_cast<int64_t>(rng_.Below(20'000'000)));
        queue_.emplace(std::make_tuple(now_ + latency, seq_++),
                       std::make_tuple(name, to->second, s.msg->SerializeAsString()));
      }
    }
  }
  static std::string TypeOf(const wire::MembershipMessage& m) {
    switch (m.body_case()) {
      case wire::MembershipMessage::kPing:
        return "ping";
      case wire::MembershipMessage::kAck:
        return "ack";
      case wire::MembershipMessage::kPingReq:
        return "ping_req";
      case wire::MembershipMessage::kPushPull:
        return m.push_pull().join() ? "join" : "push_pull";
      case wire::MembershipMessage::kGossip:
        return "gossip";
      default:
        return "none";
    }
  }

  Rng rng_;
  Time now_{0};
  uint64_t seq_ = 0;
  uint64_t delivered_ = 0, sent_ = 0;
  double loss_ = 0;
  std::map<std::string, std::unique_ptr<Membership>> nodes_;
  std::map<Address, std::string> by_address_;
  std::set<std::string> running_;
  std::function<bool(const std::string&, const std::string&)> drop_;
  // (deliver at, seq) -> (from, to, bytes)
  std::map<std::tuple<Time, uint64_t>, std::tuple<std::string, std::string, std::string>> queue_;
  std::vector<LoggedEvent> events_;
  std::map<std::string, uint64_t> sent_by_type_;
};

inline std::vector<std::string> Names(const std::string& prefix, int n, int first = 0) {
  std::vector<std::string> out;
  for (int i = first; i < first + n; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

}  // namespace pollen::node::testing
