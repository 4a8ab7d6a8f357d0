#include "simulation/checkers.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "crdt/generations.h"

namespace pollen::sim {

namespace {
double Sec(node::Time t) { return static_cast<double>(t.count()) / 1e9; }
}  // namespace

void SafetyChecker::Fail(std::string message) {
  ++failure_count_;
  if (failures_.size() < kMaxStored) failures_.push_back(std::move(message));
}

void SafetyChecker::OnAck(size_t node, const std::string& filter, const std::string& key, uint64_t epoch) {
  acks_by_node_.at(node).push_back(acks_.size());
  acks_.push_back(Ack{filter, key, epoch, true});
}

void SafetyChecker::OnCrash(size_t node, bool kept_state) {
  if (kept_state) {
    // A restarted node numbers its incarnations afresh; its epochs must still
    // not go back.
    for (auto& [key, seen] : last_epoch_) {
      if (key.first == node) seen.incarnation.reset();
    }
    return;
  }
  for (size_t index : acks_by_node_.at(node)) {
    if (acks_[index].durable) ++volatile_acks_;
    acks_[index].durable = false;
  }
  acks_by_node_[node].clear();
  std::erase_if(last_epoch_, [&](const auto& entry) { return entry.first.first == node; });
  std::erase_if(last_bits_, [&](const auto& entry) { return std::get<0>(entry.first) == node; });
}

void SafetyChecker::OnReplaced(size_t node, const std::string& filter) {
  last_epoch_.erase({node, filter});
  std::erase_if(last_bits_, [&](const auto& entry) {
    return std::get<0>(entry.first) == node && std::get<1>(entry.first) == filter;
  });
}

void SafetyChecker::OnEpoch(size_t node, const std::string& filter, uint64_t epoch, node::Time at) {
  auto [it, inserted] = last_epoch_.try_emplace(std::make_pair(node, filter), EpochSeen{epoch, std::nullopt});
  if (inserted) return;
  if (epoch < it->second.epoch) {
    Fail(absl::StrFormat("epoch went back: node %d filter %s epoch %d -> %d at t=%.3fs", node, filter,
                         it->second.epoch, epoch, Sec(at)));
    return;
  }
  it->second.epoch = epoch;
}

uint64_t SafetyChecker::CurrentEpoch(size_t node, const std::string& filter) const {
  auto it = last_epoch_.find({node, filter});
  return it == last_epoch_.end() ? 0 : it->second.epoch;
}

void SafetyChecker::Observe(size_t node, const node::FilterInfo& info, node::Time at) {
  const std::string& name = info.config.name;
  std::optional<uint64_t>& incarnation = last_epoch_[{node, name}].incarnation;
  if (incarnation && *incarnation != info.incarnation) {
    Fail(absl::StrFormat("filter replaced without a kFilterDiscarded event: node %d filter %s incarnation %d -> %d "
                         "at t=%.3fs", node, name, *incarnation, info.incarnation, Sec(at)));
  }
  incarnation = info.incarnation;
  OnEpoch(node, name, info.epoch, at);
  for (const node::GenerationInfo& g : info.generations) {
    const uint64_t slot = crdt::SlotOf(g.epoch, g.layer);
    uint64_t& bits = last_bits_[{node, name, slot}];
    if (g.set_bits < bits) {
      Fail(absl::StrFormat("bits cleared: node %d filter %s epoch %d set_bits %d -> %d at t=%.3fs", node, name,
                           g.epoch, bits, g.set_bits, Sec(at)));
    }
    bits = std::max(bits, g.set_bits);
    uint64_t& most = max_bits_[{name, slot}];
    most = std::max(most, g.set_bits);
  }
}

bool SafetyChecker::Window(const node::FilterInfo& info, uint64_t& lo, uint64_t& hi) {
  if (info.generations.empty()) return false;
  lo = info.generations.front().epoch;
  hi = info.generations.back().epoch;
  return true;
}

void SafetyChecker::CheckAcked(size_t node, const node::Node& n, node::Time at) {
  for (size_t index : acks_by_node_.at(node)) {
    const Ack& ack = acks_[index];
    const uint64_t current = CurrentEpoch(node, ack.filter);
    if (ack.epoch + generations_ <= current) continue;  // rotated out of the window
    auto present = n.Exists(ack.filter, ack.key);
    if (!present.ok() || !*present) {
      Fail(absl::StrFormat("acked add reads absent: node %d filter %s key %s epoch %d (node at %d) at t=%.3fs",
                           node, ack.filter, ack.key, ack.epoch, current, Sec(at)));
    }
  }
}

uint64_t SafetyChecker::CheckAckedEverywhere(size_t node, const node::Node& n, node::Time at) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> windows;
  uint64_t checked = 0;
  for (const Ack& ack : acks_) {
    if (!ack.durable) continue;
    auto w = windows.find(ack.filter);
    if (w == windows.end()) {
      auto info = n.Info(ack.filter, node::InfoParts::kEpochsOnly);
      uint64_t lo = 1, hi = 0;
      if (!info.ok()) {
        Fail(absl::StrFormat("liveness: filter %s missing on node %d at t=%.3fs", ack.filter, node, Sec(at)));
      } else {
        Window(*info, lo, hi);
      }
      w = windows.emplace(ack.filter, std::make_pair(lo, hi)).first;
    }
    if (ack.epoch < w->second.first || ack.epoch > w->second.second) continue;
    ++checked;
    auto present = n.Exists(ack.filter, ack.key);
    if (!present.ok() || !*present) {
      Fail(absl::StrFormat("liveness: acked key absent on node %d: filter %s key %s epoch %d at t=%.3fs", node,
                           ack.filter, ack.key, ack.epoch, Sec(at)));
    }
  }
  return checked;
}

uint64_t SafetyChecker::distinct_bits() const {
  uint64_t total = 0;
  for (const auto& [key, bits] : max_bits_) total += bits;
  return total;
}

bool BrokeRoutingPromise(const RoutedKeyAnswers& key) {
  return key.answered_new > 1 && !key.fell_back && !key.partial_view;
}

bool BrokeWaitPromise(uint32_t peers_acked, uint32_t holders) { return peers_acked > holders; }

}  // namespace pollen::sim
