// ReplayWindow: per-sender sliding windows over frame counters (like IPsec's
// anti-replay window).
//
// What it promises:
//  - A counter is fresh if it is above the highest seen from its sender, or
//    within kWindow below it and not seen yet; Accept records a fresh one and
//    refuses the rest.
//  - At most max_senders senders are tracked; beyond that the least recently
//    accepted one is forgotten (its next frame starts a new window).
//  - O(1) per frame (amortized once the table is full).
// Feed it only frames that opened, so that only key holders create entries.
//
// Why the state is small: every node hears from nearly every other node (a
// SWIM probe each round, sooner or later), so a node of an N-node cluster
// tracks up to min(2N, max_senders) senders (a datagram and a stream id
// each). A 1024-bit ring per sender was 144 bytes, 75 of the ~240 MB heap of
// pollen-sim N=1000 (heaptrack) and ~7 GB at N=10,000. But a receiver sees a
// small share of any sender's counters (they count frames to every peer), so
// the window nearly always holds a handful of seen counters: up to kInline
// are kept as distances below the highest, and only a sender with more gets
// the ring, until its window empties again. Same answers as the ring alone
// (tests/protocol/seal_test.cc checks both against a model).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace pollen::protocol {

class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 1024;
  static constexpr size_t kMaxSenders = 4096;
  static constexpr size_t kInline = 4;  // seen counters below the highest kept without a ring

  explicit ReplayWindow(size_t max_senders = kMaxSenders);
  // True if (sender, counter) is fresh; records it. False for a repeat or a
  // counter kWindow or more behind the highest seen from that sender.
  bool Accept(uint64_t sender, uint64_t counter);
  size_t senders() const { return senders_.size(); }
  size_t rings() const { return rings_; }  // senders whose window needs the ring now

 private:
  static constexpr size_t kWords = kWindow / 64;
  using Ring = std::array<uint64_t, kWords>;  // bit (c % kWindow) <=> counter c seen
  struct State {
    uint64_t highest = 0;
    uint64_t touched = 0;  // clock_ at the last accepted frame: unique per sender
    // Without a ring: the other counters seen in the window, as distances
    // below `highest` (1 .. kWindow - 1), the first n_below of them.
    std::array<uint16_t, kInline> below{};
    uint8_t n_below = 0;
    std::unique_ptr<Ring> ring;  // the whole window, highest included, when set
  };
  static_assert(kWindow <= 65536, "distances fit uint16_t");

  bool Advance(State& s, uint64_t counter);   // counter > s.highest
  bool Backfill(State& s, uint64_t counter);  // counter <= s.highest
  void ToRing(State& s);
  void Touch(uint64_t sender, State& s);
  void EvictLeastRecent();

  size_t max_senders_;
  uint64_t clock_ = 0;
  size_t rings_ = 0;
  // Looked up per frame, never iterated in an order that matters.
  absl::flat_hash_map<uint64_t, State> senders_;
  // Once the table has been full: (touched, sender) per accepted frame,
  // oldest first; an entry whose stamp is no longer its sender's is stale.
  // The front's first live entry is the least recently used sender. Kept
  // under 2 x senders + 64 entries by dropping stale ones.
  bool track_recency_ = false;
  std::deque<std::pair<uint64_t, uint64_t>> recency_;
};

}  // namespace pollen::protocol
