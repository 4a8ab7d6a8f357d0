// Asking peers about keys: WAIT (Node::BeginWait) and the quorum EXISTS
// (Node::BeginQuorumExists).
//
// WAIT numreplicas: the asker sends the keys its client added to every live
// peer in KeyCheck messages with add = true; each peer adds them (a no-op
// where its bits are already set) and answers which keys it now holds. A
// peer counts once it has answered "held" for every key: at that moment it
// had every bit of them, and bits are never cleared while their generation
// is in the window. So the count never overstates (the simulator checks it
// against every node's filter: BrokeWaitPromise). Pushing the keys, rather
// than waiting for gossip to bring their bits, makes WAIT one round trip
// instead of a gossip delay; the price is a message per live peer per
// kMaxCheckKeys keys. A peer that holds the keys but does not answer is not
// counted (an understatement, never an overstatement).
//
// Quorum EXISTS (seed 000's quorum read): the keys absent here are asked of
// up to `replicas` random live peers (add = false); a key is present if any
// of them says so. A peer that does not answer within the deadline leaves
// its keys to the others' answers and the local one.
//
// This file holds the bookkeeping and the completion rule; Node::Impl
// (node_peer_checks.cc) sends and answers the messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "node/core/routing.h"
#include "node/core/types.h"

namespace pollen::node {

// Bounds. A KeyCheck carries at most kMaxCheckKeys keys and kMaxCheckBytes
// of them (the RouteAdd limits); a longer key cannot be checked (WAIT counts
// no peer for it). At most kMaxCheckTickets calls and kMaxCheckRequests
// (peer, chunk) pairs wait for answers at once; beyond them a call is
// refused (ResourceExhausted). One WAIT covers at most kMaxWaitKeys keys.
inline constexpr size_t kMaxCheckKeys = kMaxRouteKeys;
inline constexpr size_t kMaxCheckBytes = kMaxRouteBytes;
inline constexpr size_t kMaxCheckKeyBytes = kMaxRouteKeyBytes;
inline constexpr size_t kMaxCheckTickets = 1024;
inline constexpr size_t kMaxCheckRequests = size_t{1} << 20;
inline constexpr size_t kMaxWaitKeys = size_t{1} << 20;
inline constexpr uint32_t kMaxQuorumPeers = 16;
// The longest a WAIT waits (its timeout, or no timeout, is cut to this), so
// a ticket whose peers keep refusing ends and frees its slot.
inline constexpr Duration kMaxWaitTime = std::chrono::seconds(60);
// A peer's unanswered chunks are sent again after route_timeout, then after
// twice its last wait, up to this many route timeouts: a WAIT on a silent
// peer sends each chunk about 40 times in 60 s (100 ms route timeout)
// instead of 600. Per peer, so one peer's "refused" (which resets its wait)
// does not speed up the resends to a silent one.
inline constexpr uint32_t kMaxResendTimeouts = 16;

// Keys of one filter (the input of a WAIT).
struct KeyBatch {
  std::string filter;
  std::vector<std::string> keys;
  // The filter incarnation (FilterVersion::incarnation) that took the keys;
  // 0: whichever holds the name. A batch whose filter was replaced since is
  // skipped, as a deleted one: its keys went with it.
  uint64_t incarnation = 0;
};

// A KeyCheck's worth of keys of one filter.
struct CheckChunk {
  std::string filter;
  std::vector<std::string> keys;
  std::vector<uint32_t> indices;  // quorum EXISTS: the keys' positions in the call
  uint64_t incarnation = 0;  // the filter's when the check began: a resend after a replacement is not sent
};

// One WAIT or quorum EXISTS until it is answered.
struct CheckTicket {
  struct Peer {
    std::string name;
    std::vector<uint64_t> ids;  // per chunk: the request id, 0 once answered
    size_t chunks_left = 0;
    bool failed = false;  // left the view, or cannot hold a key: it will not count
    // Its unanswered chunks go again at next_resend; resend_interval doubles
    // at each resend, up to kMaxResendTimeouts route timeouts, and falls back
    // to one route timeout when the peer answers "refused".
    Time next_resend{0};
    Duration resend_interval{0};
  };
  bool add = false;     // WAIT (push and count) or quorum EXISTS (ask)
  uint32_t wanted = 0;  // WAIT: numreplicas
  std::vector<CheckChunk> chunks;
  std::vector<Peer> peers;
  std::vector<bool> present;  // quorum EXISTS: per key of the call
  uint32_t complete_peers = 0;  // peers that answered every chunk (WAIT: held every key)
  bool every_live_peer = false;  // `peers` were every live member but self at the start
  Time began{0};
  Time deadline = Time::max();
  // WAIT: once `wanted` peers counted, the stragglers get until this time,
  // so one slow peer costs a short wait rather than a smaller count.
  Time grace_end = Time::max();

  size_t remaining_peers() const {
    size_t n = 0;
    for (const Peer& p : peers) n += (!p.failed && p.chunks_left > 0) ? 1 : 0;
    return n;
  }
};

// True when the ticket is answered at `now`: WAIT once `wanted` peers hold
// every key (after the stragglers' grace) or no other peer can answer; a
// quorum EXISTS once every asked peer answered or every key is present; both
// at their deadline.
inline bool CheckAnswered(const CheckTicket& t, Time now) {
  if (now >= t.deadline || t.remaining_peers() == 0) return true;
  if (t.add) return t.complete_peers >= t.wanted && now >= t.grace_end;
  for (bool p : t.present) {
    if (!p) return false;
  }
  return true;
}

}  // namespace pollen::node
