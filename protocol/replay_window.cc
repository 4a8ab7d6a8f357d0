#include "protocol/replay_window.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace pollen::protocol {

ReplayWindow::ReplayWindow(size_t max_senders) : max_senders_(max_senders) {
  if (max_senders == 0) {
    std::fprintf(stderr, "ReplayWindow: max_senders must be > 0\n");
    std::abort();
  }
}

bool ReplayWindow::Accept(uint64_t sender, uint64_t counter) {
  auto it = senders_.find(sender);
  if (it == senders_.end()) {
    while (senders_.size() >= max_senders_) EvictLeastRecent();
    State& fresh = senders_[sender];
    fresh.highest = counter;
    Touch(sender, fresh);
    return true;
  }
  State& s = it->second;
  const bool fresh = counter > s.highest ? Advance(s, counter) : Backfill(s, counter);
  if (fresh) Touch(sender, s);
  return fresh;
}

bool ReplayWindow::Advance(State& s, uint64_t counter) {
  const uint64_t shift = counter - s.highest;
  if (s.ring != nullptr && shift >= kWindow) {
    s.ring.reset();  // nothing seen is left in the window: back to distances
    --rings_;
    s.n_below = 0;
  } else if (s.ring != nullptr) {
    // Forget the slots that now belong to counters highest+1 .. counter
    // (they held counters kWindow older), a word at a time: at most kWords + 1
    // iterations (bit by bit, a receiver that sees every 30th counter of a
    // sender spent 3% of pollen-sim N=100 here; perf).
    Ring& ring = *s.ring;
    uint64_t pos = (s.highest + 1) % kWindow;  // first slot to clear
    uint64_t left = shift;
    while (left > 0) {
      const uint64_t bit = pos % 64;
      const uint64_t n = std::min<uint64_t>(left, 64 - bit);
      const uint64_t mask = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << bit;
      ring[pos / 64] &= ~mask;
      left -= n;
      pos = (pos + n) % kWindow;
    }
    ring[(counter % kWindow) / 64] |= uint64_t{1} << (counter % 64);
  } else {
    // Every distance grows by `shift`; the old highest is now `shift` below.
    std::array<uint16_t, kInline + 1> kept;
    size_t n = 0;
    if (shift < kWindow) {
      kept[n++] = static_cast<uint16_t>(shift);
      for (size_t i = 0; i < s.n_below; ++i) {
        if (s.below[i] + shift < kWindow) kept[n++] = static_cast<uint16_t>(s.below[i] + shift);
      }
    }
    if (n > kInline) {
      s.highest = counter;
      std::copy_n(kept.begin(), kInline, s.below.begin());
      s.n_below = kInline;
      ToRing(s);
      Ring& ring = *s.ring;
      const uint64_t last = counter - kept[kInline];
      ring[(last % kWindow) / 64] |= uint64_t{1} << (last % 64);
      return true;
    }
    std::copy_n(kept.begin(), n, s.below.begin());
    s.n_below = static_cast<uint8_t>(n);
  }
  s.highest = counter;
  return true;
}

bool ReplayWindow::Backfill(State& s, uint64_t counter) {
  const uint64_t behind = s.highest - counter;
  if (behind == 0 || behind >= kWindow) return false;  // the highest itself, or too old to tell
  if (s.ring != nullptr) {
    uint64_t& word = (*s.ring)[(counter % kWindow) / 64];
    const uint64_t mask = uint64_t{1} << (counter % 64);
    if (word & mask) return false;
    word |= mask;
    return true;
  }
  const auto end = s.below.begin() + s.n_below;
  if (std::find(s.below.begin(), end, static_cast<uint16_t>(behind)) != end) return false;
  if (s.n_below < kInline) {
    s.below[s.n_below++] = static_cast<uint16_t>(behind);
    return true;
  }
  ToRing(s);
  (*s.ring)[(counter % kWindow) / 64] |= uint64_t{1} << (counter % 64);
  return true;
}

// The ring of the highest and the n_below distances.
void ReplayWindow::ToRing(State& s) {
  assert(s.ring == nullptr);
  s.ring = std::make_unique<Ring>();
  ++rings_;
  Ring& ring = *s.ring;
  const auto set = [&ring](uint64_t c) { ring[(c % kWindow) / 64] |= uint64_t{1} << (c % 64); };
  set(s.highest);
  for (size_t i = 0; i < s.n_below; ++i) set(s.highest - s.below[i]);
  s.n_below = 0;
}

void ReplayWindow::Touch(uint64_t sender, State& s) {
  s.touched = ++clock_;
  if (!track_recency_) return;
  recency_.emplace_back(s.touched, sender);
  if (recency_.size() > 2 * senders_.size() + 64) {
    std::erase_if(recency_, [this](const std::pair<uint64_t, uint64_t>& e) {
      auto it = senders_.find(e.second);
      return it == senders_.end() || it->second.touched != e.first;
    });
  }
}

// Forgets the sender with the oldest `touched` stamp (stamps are unique, so
// the choice does not depend on the hash map's iteration order). The first
// time the table is full, the recency list is built from the stamps; from
// then on Touch keeps it, and eviction pops stale entries off its front.
void ReplayWindow::EvictLeastRecent() {
  if (!track_recency_) {
    track_recency_ = true;
    std::vector<std::pair<uint64_t, uint64_t>> all;
    all.reserve(senders_.size());
    for (const auto& [sender, state] : senders_) all.emplace_back(state.touched, sender);
    std::sort(all.begin(), all.end());
    recency_.assign(all.begin(), all.end());
  }
  while (!recency_.empty()) {
    const auto [touched, sender] = recency_.front();
    recency_.pop_front();
    auto it = senders_.find(sender);
    if (it == senders_.end() || it->second.touched != touched) continue;  // stale
    if (it->second.ring != nullptr) --rings_;
    senders_.erase(it);
    return;
  }
  assert(senders_.empty());
}

}  // namespace pollen::protocol
