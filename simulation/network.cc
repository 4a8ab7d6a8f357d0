#include "simulation/network.h"

#include <cassert>
#include <cmath>

namespace pollen::sim {

namespace {
void CheckOptions(const NetworkOptions& o) {
  assert(o.loss >= 0 && o.loss < 1);
  assert(o.duplicate >= 0 && o.duplicate <= 1);
  assert(o.reorder >= 0 && o.reorder <= 1);
  assert(o.min_latency.count() >= 0 && o.tail_mean.count() >= 0 && o.reorder_delay.count() >= 0);
  (void)o;
}
}  // namespace

Network::Network(size_t nodes, NetworkOptions options, node::Rng rng)
    : nodes_(nodes), options_(options), rng_(rng), side_(nodes, 0) {
  CheckOptions(options_);
}

void Network::set_options(const NetworkOptions& options) {
  CheckOptions(options);
  options_ = options;
}

node::Duration Network::SampleLatency() {
  // Exponential tail by inversion; 1 - Unit() is in (0, 1], so log is finite.
  // Capped at 50 means so one sample cannot stall a run.
  const double mean = static_cast<double>(options_.tail_mean.count());
  double tail = -std::log(1.0 - rng_.Unit()) * mean;
  if (tail > 50 * mean) tail = 50 * mean;
  return options_.min_latency + node::Duration(static_cast<int64_t>(tail));
}

Arrivals Network::Plan(size_t from, size_t to, node::Channel channel, node::Time now) {
  assert(from < nodes_ && to < nodes_);
  ++counters_.planned;
  Arrivals arrivals;
  if (!Reachable(from, to)) {
    ++counters_.partition_dropped;
    return arrivals;
  }
  if (channel == node::Channel::kStream) {
    node::Time at = now + SampleLatency();
    node::Time& tail = stream_tail_[{from, to}];
    if (at < tail) at = tail;
    tail = at;
    arrivals.push_back(at);
    return arrivals;
  }
  if (options_.loss > 0 && rng_.Unit() < options_.loss) {
    ++counters_.lost;
    return arrivals;
  }
  const int copies = (options_.duplicate > 0 && rng_.Unit() < options_.duplicate) ? 2 : 1;
  if (copies == 2) ++counters_.duplicated;
  for (int c = 0; c < copies; ++c) {
    node::Time at = now + SampleLatency();
    if (options_.reorder > 0 && rng_.Unit() < options_.reorder) {
      ++counters_.reordered;
      at += node::Duration(static_cast<int64_t>(rng_.Unit() * options_.reorder_delay.count()));
    }
    arrivals.push_back(at);
  }
  if (arrivals.size() == 2 && arrivals[1] < arrivals[0]) std::swap(arrivals[0], arrivals[1]);
  return arrivals;
}

bool Network::Reachable(size_t from, size_t to) const {
  switch (kind_) {
    case PartitionKind::kNone:
      return true;
    case PartitionKind::kSymmetric:
      return side_[from] == side_[to];
    case PartitionKind::kOneWay:
      return !(side_[from] == 0 && side_[to] == 1);
  }
  return true;
}

bool Network::Deliverable(size_t from, size_t to) {
  if (Reachable(from, to)) return true;
  CountPartitionDrop();
  return false;
}

void Network::Partition(PartitionKind kind, std::vector<uint8_t> side) {
  assert(side.size() == nodes_);
  kind_ = kind;
  side_ = std::move(side);
}

void Network::Heal() {
  kind_ = PartitionKind::kNone;
  side_.assign(nodes_, 0);
}

void Network::ResetStreams(size_t node) {
  for (auto it = stream_tail_.begin(); it != stream_tail_.end();) {
    if (it->first.first == node || it->first.second == node) {
      it = stream_tail_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pollen::sim
