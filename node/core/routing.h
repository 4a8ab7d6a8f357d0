// Owner routing (FilterConfig::routed): who decides whether a key is new.
//
// Gossip answers "have we seen this key?" locally, so two nodes that receive
// the same new key within a gossip delay both answer "new" (simulation/README,
// "Duplicate-new rate today": 94% of keys added at 3 nodes within 100 ms at
// N=10). A routed filter gives each key one decider, its owner: the live
// member (alive or suspect, self included) with the highest rendezvous score
// SipHash(route key, key) mixed with a hash of the member's name. Every node
// with the same view picks the same owner; a join or a departure moves only
// the keys whose owner came or went (1/N of them).
//
// The owner's test-and-add runs on its driver thread, one request after
// another, so of several concurrent adds of a key it answers "new" once. The
// guarantee holds while the askers agree on the owner and the owner keeps its
// bits: a view change, an owner that crashes before its bits spread, or a
// timeout that falls back to the local answer can still give a duplicate
// (counted: NodeCounters::routed_fallbacks; docs/routing.md).
//
// This file holds the deterministic parts: the ranking and the bookkeeping of
// requests in flight. Node::Impl (node_routing.cc) sends and answers them.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crdt/keyed_hash.h"
#include "node/core/types.h"

namespace pollen::node {

// Bounds. A request carries at most kMaxRouteKeys keys and kMaxRouteBytes of
// them; a key longer than kMaxRouteKeyBytes is decided locally (counted as a
// fallback). At most kMaxRoutedInFlight requests wait for answers; beyond it
// new keys are decided locally. An owner remembers each answer for
// kRouteAnswerRetention (at most kRouteAnswerMemory of them, the oldest
// forgotten first), so a retry whose first reply was lost gets the same
// answer instead of "already present". The retention covers every attempt
// at the largest route timeout the daemon accepts (4 x 2 s).
inline constexpr size_t kMaxRouteKeys = 1024;
inline constexpr size_t kMaxRouteBytes = size_t{256} << 10;
inline constexpr size_t kMaxRouteKeyBytes = size_t{64} << 10;
inline constexpr size_t kMaxRoutedInFlight = 65536;
inline constexpr size_t kRouteAnswerMemory = 262144;
inline constexpr Duration kRouteAnswerRetention = std::chrono::seconds(10);
// Attempts per request: kRouteOwnerAttempts to the owner (same request id, so
// the owner answers a retry from memory), then one to the next-ranked member,
// then the local answer.
inline constexpr uint32_t kRouteOwnerAttempts = 3;
inline constexpr uint32_t kRouteAttempts = kRouteOwnerAttempts + 1;

// Rendezvous (highest random weight) hashing over a set of member names.
class Rendezvous {
 public:
  explicit Rendezvous(const crdt::ClusterSecret& secret);

  // Replaces the candidates (names need not be sorted; duplicates are not allowed).
  void Reset(const std::vector<std::string>& names);
  size_t size() const { return candidates_.size(); }

  uint64_t KeyHash(std::string_view key) const { return crdt::SipHash24(key_, key); }
  // The best and second-best candidates for `key_hash` (nullptr when there
  // are fewer candidates). Ties cannot change the order between nodes: the
  // name breaks them.
  std::pair<const std::string*, const std::string*> TopTwo(uint64_t key_hash) const;

 private:
  struct Candidate {
    std::string name;
    uint64_t hash = 0;
  };
  crdt::SipKey key_;
  std::vector<Candidate> candidates_;
};

// One request this node sent: keys of one client call (positions `indices`
// in it) that one owner decides.
struct RouteRequest {
  uint64_t id = 0;
  uint64_t ticket = 0;
  std::string filter;
  std::vector<uint32_t> indices;
  std::vector<std::string> keys;
  std::string owner;          // the member asked at this attempt
  std::string second;         // the next-ranked member when sent ("" if none)
  std::vector<std::string> asked;  // members sent this id so far, the owner first
  uint32_t attempt = 1;       // 1-based
  Time deadline{0};
};

// One client call with routed keys, until every key has an answer.
struct RouteTicket {
  std::string filter;
  std::vector<bool> added;    // per key: the answer (true: new)
  std::vector<bool> full;     // per key: refused, filter full
  size_t requests_left = 0;
  uint32_t remote_keys = 0;   // keys decided by another node
  uint32_t fallback_keys = 0; // keys decided here because the owner did not answer
  bool filter_gone = false;   // the filter was deleted or replaced meanwhile: NotFound
  Time began{0};
};

// The answers an owner gave recently, by (asker, request id): bounded FIFO.
class AnswerMemory {
 public:
  struct Answer {
    std::vector<bool> added, full;
  };
  const Answer* Find(const std::string& asker, uint64_t id) const;
  // Also forgets the answers older than kRouteAnswerRetention at `now`.
  void Remember(const std::string& asker, uint64_t id, Answer answer, Time now);
  size_t size() const { return answers_.size(); }

 private:
  std::map<std::pair<std::string, uint64_t>, Answer> answers_;
  std::deque<std::pair<Time, std::pair<std::string, uint64_t>>> order_;  // by the time remembered
};

// The keys a member decided as stand-in for a silent owner
// (RouteAdd.stand_in), by routing hash, for kRouteAnswerRetention (at most
// kRouteAnswerMemory). The first stand-in request for a key answers "new"
// even if the key's bits are already here: they may be the silent owner's,
// whose "new" never reached anyone (its replies lost), and a URL crawled
// twice is better than one never crawled. Later stand-in requests for the
// key answer from the filter, so askers that all lost the owner still agree.
class StandIns {
 public:
  // True the first time `key_hash` is seen (within the retention).
  bool FirstTime(uint64_t key_hash, Time now);

 private:
  std::set<uint64_t> keys_;
  std::deque<std::pair<Time, uint64_t>> order_;
};

}  // namespace pollen::node
