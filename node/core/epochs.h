// Epoch policy: when a node proposes epoch + 1 for a filter.
//
// Epochs are a max-register per filter (DESIGN invariant 5): a node only ever
// moves forward (GenerationSet::Advance ignores lower or equal epochs), and two
// nodes that both propose e + 1 made the same proposal, since the generation
// for e + 1 is determined by (filter, e + 1) alone. Epochs above kMaxEpoch are
// refused on the wire so that e + 1 never overflows.
#pragma once

#include <cstdint>

#include "node/core/types.h"

namespace pollen::node {

// 2^56 - 1: a sub-filter's slot (epoch << 5 | layer) fits 64 bits, and a layer's
// key id (epoch | layer << 56) never equals an epoch (crdt/generations.h).
inline constexpr uint64_t kMaxEpoch = (uint64_t{1} << 56) - 1;

struct RotationInput {
  double fill_ratio = 0;  // newest generation
  Time now{0};
  Time epoch_began{0};    // when this node entered the current epoch
  bool may_propose = true;  // digest filters: only the owner proposes
};

// True if the node should propose epoch + 1 now (fill threshold reached, or the
// rotation interval elapsed on this node's clock since its epoch began).
inline bool ShouldRotate(const FilterConfig& config, const RotationInput& in) {
  if (!in.may_propose) return false;
  if (config.rotate_fill > 0 && in.fill_ratio >= config.rotate_fill) return true;
  if (config.rotate_interval.count() > 0 && in.now - in.epoch_began >= config.rotate_interval) return true;
  return false;
}

}  // namespace pollen::node
