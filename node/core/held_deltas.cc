#include "node/core/held_deltas.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace pollen::node {

HeldDeltas::HeldDeltas(size_t max_cost) : max_cost_(max_cost) { assert(max_cost > kBookkeepingWords); }

bool HeldDeltas::Hold(Delta d) {
  assert(!d.words.empty());
  assert(cost_ <= max_cost_);
  if (Cost(d) > max_cost_ - cost_) return false;
  cost_ += Cost(d);
  ++count_;
  std::deque<Delta>& queue = by_name_[d.params.name];
  if (!queue.empty()) d.arrived = std::max(d.arrived, queue.back().arrived);
  queue.push_back(std::move(d));
  return true;
}

std::vector<HeldDeltas::Delta> HeldDeltas::Take(std::string_view name) {
  std::vector<Delta> taken;
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return taken;
  for (Delta& d : it->second) {
    cost_ -= Cost(d);
    --count_;
    taken.push_back(std::move(d));
  }
  by_name_.erase(it);
  return taken;
}

size_t HeldDeltas::Expire(Time cutoff) {
  size_t expired = 0;
  for (auto it = by_name_.begin(); it != by_name_.end();) {
    std::deque<Delta>& queue = it->second;
    while (!queue.empty() && queue.front().arrived <= cutoff) {
      cost_ -= Cost(queue.front());
      --count_;
      queue.pop_front();
      ++expired;
    }
    it = queue.empty() ? by_name_.erase(it) : std::next(it);
  }
  return expired;
}

}  // namespace pollen::node
