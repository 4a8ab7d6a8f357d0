// PushPacing: when a node's next tree push may leave (NodeConfig::tree_push_gap).
//
// A push's fixed cost (seal, framing, delivery fields: ~50 bytes) is paid
// once per push per link, whatever it carries. A node whose pushes go out
// back to back pays it for every key; holding the next push until `gap`
// after the last lets the bits that arrive meanwhile share it. Holding only
// pays when bits do arrive meanwhile, and every hop of the tree adds the
// wait to the delivery time, so the gap applies only while the node is busy:
//  - busy from the first window of kWindow with at least kWindow / gap
//    arrivals (on average, another one within each gap);
//  - idle again after a window with fewer than half that, or none.
// An arrival is a batch of new bits joining the pending push: a push
// received with something new, or this node's own bits taken at a round.
// The hysteresis keeps a busy node busy although its neighbours, paced too,
// send fewer and larger pushes. A push that already carries kFullWords words
// of bits is not held: its fixed cost is a small part of it (~15%; a word
// costs ~2.3 bytes in a push), and at 20,000 adds/s (N=100, every node busy,
// ~1000 keys per push) holding such pushes tripled the delivery time
// (0.3 -> 0.9 s) for 4% fewer bytes.
//
// pollen-sim, seed 1 (issue 11's table rows): N=100 at 20 adds/s is busy
// (~11 arrivals per node and second without pacing); N=1000 at 0.5 adds/s
// is not (~0.5), and its runs are the same with and without a gap.
//
// Sans-IO and deterministic: times come from the caller.
#pragma once

#include <cstdint>

#include "node/core/types.h"

namespace pollen::node {

class PushPacing {
 public:
  static constexpr Duration kWindow = std::chrono::seconds(1);
  static constexpr uint64_t kFullWords = 128;

  // gap >= 0; 0: never held.
  explicit PushPacing(Duration gap);

  // A batch of new bits joined the pending push.
  void OnArrival(Time now);
  // A push left.
  void OnPush(Time now) { last_push_ = now; }
  // The earliest time, at or after `now`, that the next push may leave,
  // when it would carry `pending_words` words of bits.
  Time Earliest(Time now, uint64_t pending_words);
  bool busy() const { return busy_; }

 private:
  // Closes the window if it has ended, deciding busy for the next one.
  void Roll(Time now);

  Duration gap_;
  uint64_t busy_arrivals_;  // per window, to become busy
  uint64_t idle_arrivals_;  // per window, below which a busy node is idle
  Time window_start_ = Time::min();
  uint64_t arrivals_ = 0;  // in the window from window_start_
  bool busy_ = false;
  Time last_push_ = Time::min();
};

}  // namespace pollen::node
