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

  explicit EventQueue(size_t max_events = size_t{1} << 24) : max_events_(max_events) {}

  // Schedules `payload` at `time`. Returns false (and drops it) when full.
  bool Push(Time time, Payload payload) {
    if (heap_.size() >= max_events_) return false;
    heap_.push_back(Entry{time, next_seq_++, std::move(payload)});
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

  // Removes and returns the earliest event. Requires !empty().
  Entry Pop() {
    assert(!heap_.empty());
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    Entry entry = std::move(heap_.back());
    heap_.pop_back();
    return entry;
  }

 private:
  // Heap comparator: "a comes out after b".
  static bool Later(const Entry& a, const Entry& b) {
    if (a.time != b.time) return a.time > b.time;
    return a.seq > b.seq;
  }

  size_t max_events_;
  uint64_t next_seq_ = 0;
  std::vector<Entry> heap_;
};

}  // namespace pollen::sim
