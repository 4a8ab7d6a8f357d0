#include "node/core/broadcast_tree.h"

#include <cassert>
#include <tuple>

namespace pollen::node {

BroadcastTree::BroadcastTree(std::string self, Config config) : self_(std::move(self)), config_(config) {
  assert(!self_.empty());
  assert(config_.degree >= 1 && config_.degree <= config_.max_degree);
  assert(config_.max_distance >= 1 && config_.max_distance <= kMaxDistance);
  beacon_.root = self_;
}

bool BroadcastTree::AddNeighbour(const std::string& name) {
  if (name == self_ || neighbours_.size() >= config_.max_degree) return false;
  if (!neighbours_.emplace(name, Neighbour{}).second) return false;
  ++version_;
  return true;
}

void BroadcastTree::RemoveNeighbour(const std::string& name) {
  if (neighbours_.erase(name) > 0) ++version_;
}

std::vector<std::string> BroadcastTree::Neighbours() const {
  std::vector<std::string> out;
  out.reserve(neighbours_.size());
  for (const auto& [name, n] : neighbours_) out.push_back(name);
  return out;
}

void BroadcastTree::OnBeacon(const std::string& name, Beacon beacon) {
  auto it = neighbours_.find(name);
  if (it == neighbours_.end() || (it->second.has_beacon && it->second.beacon == beacon)) return;
  it->second.has_beacon = true;
  it->second.beacon = std::move(beacon);
  ++version_;
}

bool BroadcastTree::Recompute(const std::function<bool(const std::string&)>& live,
                              const std::function<bool(const std::string&)>& suspect) {
  Beacon best{self_, 0, ""};  // this node as the root
  bool best_suspect = false;
  for (const auto& [name, n] : neighbours_) {
    if (!n.has_beacon || n.beacon.parent == self_) continue;  // no news, or my child (poison reverse)
    if (uint64_t{n.beacon.distance} + 1 > config_.max_distance || n.beacon.root == self_ || !live(n.beacon.root)) continue;
    Beacon via{n.beacon.root, n.beacon.distance + 1, name};
    const bool via_suspect = suspect != nullptr && suspect(name);
    // Smaller root first, then a parent not suspected, then the shorter
    // path, then the smaller neighbour.
    if (std::tie(via.root, via_suspect, via.distance, via.parent) <
        std::tie(best.root, best_suspect, best.distance, best.parent)) {
      best = std::move(via);
      best_suspect = via_suspect;
    }
  }
  if (best == beacon_) return false;
  beacon_ = std::move(best);
  return true;
}

std::vector<std::string> BroadcastTree::TreeLinks() const {
  std::vector<std::string> out;
  for (const auto& [name, n] : neighbours_) {
    if (name == beacon_.parent || (n.has_beacon && n.beacon.parent == self_)) out.push_back(name);
  }
  return out;
}

bool BroadcastTree::IsChild(const std::string& name) const {
  auto it = neighbours_.find(name);
  return it != neighbours_.end() && it->second.has_beacon && it->second.beacon.parent == self_;
}

}  // namespace pollen::node
