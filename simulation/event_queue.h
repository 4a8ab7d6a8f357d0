// EventQueue: the simulator's agenda, a min-heap of payloads keyed by virtual time.
//
// Promises: Pop() returns events in ascending (time, sequence) order, where the
// sequence number is the order of Push() calls. Two events at the same virtual
// time therefore come out in the order they were scheduled, so a run depends
// only on its inputs, never on heap internals. Bounded: Push() fails (returns
// false) once `max_events` events are pending.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "node/core/types.h"

namespace pollen::sim {

using node::Duration;
using node::Time;

template <typename Payload>
class EventQueue {
 public:
  struct Entry {
    Time time{0};
    uint64_t seq = 0;
    Payload payload;
  };

  explicit EventQueue(size_t max_events = size_t{1} << 24) : max_events_(max_events) {
    assert(max_events <= kMaxSlots);
  }

  // Schedules `payload` at `time`. Returns false (and drops it) when full.
  bool Push(Time time, Payload payload) {
    if (heap_.size() >= max_events_) return false;
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
      slots_[slot] = std::move(payload);
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back(std::move(payload));
    }
    heap_.push_back(Key{time, next_seq_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), Later);
    return true;
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }

  // Time of the earliest event. Requires !empty().
  Time NextTime() const {
    assert(!heap_.empty());
    return heap_.front().time;
  }

  // The earliest event's payload, left in place. Requires !empty().
  const Payload& Top() const {
    assert(!heap_.empty());
    return slots_[heap_.front().slot];
  }

  // Uses up the next sequence number, as a Push would, without an event:
  // for a caller that orders some events outside the queue (pollen-sim's
  // parallel windows) yet must number later pushes as if they were here.
  uint64_t TakeSeq() { return next_seq_++; }

  // Removes and returns the earliest event. Requires !empty().
  Entry Pop() {
    assert(!heap_.empty());
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    const Key key = heap_.back();
    heap_.pop_back();
    Entry entry{key.time, key.seq, std::move(slots_[key.slot])};
    free_.push_back(key.slot);
    return entry;
  }

 private:
  // The heap orders small keys; payloads stay put in `slots_` (reused through
  // `free_`), so a sift moves 24 bytes rather than a whole payload (the
  // simulator's events carry frame bytes: moving them through the heap was
  // a few percent of pollen-sim).
  static constexpr size_t kMaxSlots = size_t{1} << 32;
  struct Key {
    Time time{0};
    uint64_t seq = 0;
    uint32_t slot = 0;
  };
  // Heap comparator: "a comes out after b".
  static bool Later(const Key& a, const Key& b) {
    if (a.time != b.time) return a.time > b.time;
    return a.seq > b.seq;
  }

  size_t max_events_;
  uint64_t next_seq_ = 0;
  std::vector<Key> heap_;
  std::vector<Payload> slots_;   // at most max_events_ + 0 live, the rest free
  std::vector<uint32_t> free_;  // indices of slots_ not in the heap
};

}  // namespace pollen::sim
