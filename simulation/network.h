// Network: the simulated links between nodes, with faults.
//
// Given a frame sent from node `from` to node `to` at virtual time `now`, Plan()
// decides when (and whether, and how many times) it arrives:
//   - latency = min_latency + an exponential tail with mean tail_mean;
//   - datagrams are lost with probability `loss`, delivered twice with
//     probability `duplicate`, and delayed by an extra uniform [0, reorder_delay]
//     with probability `reorder` (so later datagrams may overtake them);
//   - stream frames are never lost, duplicated or reordered: per directed pair
//     they arrive in send order (a frame never arrives before an earlier one);
//   - while `from` cannot reach `to` (a partition), every frame is dropped, and
//     a frame in flight when a partition starts is dropped on arrival
//     (Deliverable()), like a broken TCP connection.
// Partitions: symmetric (two sides, neither reaches the other) or one-way (side
// 0 cannot send to side 1; side 1 still reaches side 0). Heal() removes them.
// All randomness comes from the Rng given at construction.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "node/core/rng.h"
#include "node/core/types.h"

namespace pollen::sim {

struct NetworkOptions {
  node::Duration min_latency = std::chrono::milliseconds(1);
  node::Duration tail_mean = std::chrono::milliseconds(4);
  double loss = 0.0;       // datagrams only, [0, 1)
  double duplicate = 0.0;  // datagrams only, [0, 1]
  double reorder = 0.0;    // datagrams only, [0, 1]
  node::Duration reorder_delay = std::chrono::milliseconds(30);
};

// At most two arrival times, ascending, held inline: Plan() runs per frame
// and a std::vector per call was an allocation per frame.
class Arrivals {
 public:
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  node::Time& operator[](size_t i) {
    assert(i < n_);
    return at_[i];
  }
  const node::Time& operator[](size_t i) const {
    assert(i < n_);
    return at_[i];
  }
  const node::Time* begin() const { return at_.data(); }
  const node::Time* end() const { return at_.data() + n_; }
  void push_back(node::Time t) {
    assert(n_ < at_.size());
    at_[n_++] = t;
  }
  operator std::vector<node::Time>() const { return {begin(), end()}; }  // NOLINT: implicit by design

 private:
  std::array<node::Time, 2> at_{};
  size_t n_ = 0;
};

struct NetworkCounters {
  uint64_t planned = 0;            // frames handed to Plan()
  uint64_t lost = 0;               // datagrams dropped by `loss`
  uint64_t duplicated = 0;         // extra copies
  uint64_t reordered = 0;          // datagrams given extra delay
  uint64_t partition_dropped = 0;  // at send or on arrival
};

class Network {
 public:
  enum class PartitionKind : uint8_t { kNone, kSymmetric, kOneWay };

  Network(size_t nodes, NetworkOptions options, node::Rng rng);

  // Arrival times (0, 1 or 2 entries, ascending) of a frame sent at `now`.
  Arrivals Plan(size_t from, size_t to, node::Channel channel, node::Time now);

  // False while a partition separates from -> to. Checked again on arrival.
  bool Reachable(size_t from, size_t to) const;
  // Call on arrival; counts the drop when the link is partitioned.
  bool Deliverable(size_t from, size_t to);
  // Counts a frame dropped on arrival (for a caller that checked Reachable).
  void CountPartitionDrop() { ++counters_.partition_dropped; }

  // side[i] is 0 or 1 for each node. Replaces any current partition.
  void Partition(PartitionKind kind, std::vector<uint8_t> side);
  void Heal();
  PartitionKind partition_kind() const { return kind_; }

  void set_options(const NetworkOptions& options);
  const NetworkOptions& options() const { return options_; }
  const NetworkCounters& counters() const { return counters_; }
  size_t nodes() const { return nodes_; }

  // Forgets the ordering state of streams to and from `node` (it restarted:
  // its connections are new).
  void ResetStreams(size_t node);

 private:
  node::Duration SampleLatency();

  size_t nodes_;
  NetworkOptions options_;
  node::Rng rng_;
  NetworkCounters counters_;
  PartitionKind kind_ = PartitionKind::kNone;
  std::vector<uint8_t> side_;
  // Last arrival time per directed stream (from, to): keeps streams in order.
  std::map<std::pair<size_t, size_t>, node::Time> stream_tail_;
};

}  // namespace pollen::sim
