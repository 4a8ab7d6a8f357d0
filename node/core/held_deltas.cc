#include "node/core/held_deltas.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace pollen::node {

HeldDeltas::HeldDeltas(size_t max_words) : max_words_(max_words) { assert(max_words > 0); }

bool HeldDeltas::Hold(Delta d) {
  assert(!d.words.empty());
  assert(words_ <= max_words_);
  if (d.words.size() > max_words_ - words_) return false;
  if (!held_.empty()) d.arrived = std::max(d.arrived, held_.back().arrived);
  words_ += d.words.size();
  held_.push_back(std::move(d));
  return true;
}

std::vector<HeldDeltas::Delta> HeldDeltas::Take(std::string_view name) {
  std::vector<Delta> taken;
  std::deque<Delta> kept;
  for (Delta& d : held_) {
    if (d.params.name == name) {
      words_ -= d.words.size();
      taken.push_back(std::move(d));
    } else {
      kept.push_back(std::move(d));
    }
  }
  held_ = std::move(kept);
  return taken;
}

size_t HeldDeltas::Expire(Time cutoff) {
  size_t expired = 0;
  while (!held_.empty() && held_.front().arrived <= cutoff) {
    words_ -= held_.front().words.size();
    held_.pop_front();
    ++expired;
  }
  return expired;
}

}  // namespace pollen::node
