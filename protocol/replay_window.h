// ReplayWindow: per-sender sliding windows over frame counters (like IPsec's
// anti-replay window).
//
// What it promises:
//  - A counter is fresh if it is above the highest seen from its sender, or
//    within kWindow below it and not seen yet; Accept records a fresh one and
//    refuses the rest.
//  - At most max_senders senders are tracked; beyond that the least recently
//    accepted one is forgotten (its next frame starts a new window).
//  - O(1) per frame.
// Feed it only frames that opened, so that only key holders create entries.
//
// Why the state is small: every node hears from nearly every other node (a
// SWIM probe each round, sooner or later), so a node of an N-node cluster
// tracks up to min(2N, max_senders) senders (a datagram and a stream id
// each), and pollen-sim holds N such windows.
//  - A receiver sees a small share of any sender's counters (they count
//    frames to every peer), so the window nearly always holds a handful of
//    seen counters: up to kInline are kept as distances below the highest,
//    and only a sender with more gets a 1024-bit ring, until its window
//    empties again. (A ring for every sender was 144 bytes each, 75 of the
//    ~240 MB heap of pollen-sim N=1000; heaptrack.)
//  - Senders live in one array of 32-byte records that also carries the
//    recency list (16-bit links), found through a hash set of 16-bit indices.
//    A hash map of 48-byte values, with a list of (stamp, sender) pairs for
//    the recency once full, was ~500 KB per node with 4096 senders, ~5 of the
//    13 GB of pollen-sim's 10,000-node cold start (heaptrack at N=2000 and
//    4000, where it grew as N^2); this is ~150 KB.
// Same answers as the ring alone (tests/protocol/seal_test.cc checks both
// against a model, and the eviction against an exact LRU).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

namespace pollen::protocol {

class ReplayWindow {
 public:
  static constexpr uint64_t kWindow = 1024;
  static constexpr size_t kMaxSenders = 4096;
  static constexpr size_t kInline = 4;  // seen counters below the highest kept without a ring

  // max_senders: 1 .. 65534 (records are linked by 16-bit indices).
  explicit ReplayWindow(size_t max_senders = kMaxSenders);
  // Holds pointers into itself (the index's hasher reads the records).
  ReplayWindow(const ReplayWindow&) = delete;
  ReplayWindow& operator=(const ReplayWindow&) = delete;

  // True if (sender, counter) is fresh; records it. False for a repeat or a
  // counter kWindow or more behind the highest seen from that sender.
  bool Accept(uint64_t sender, uint64_t counter);
  size_t senders() const { return index_.size(); }
  size_t rings() const { return rings_.size() - free_rings_.size(); }  // senders whose window needs the ring now

 private:
  using Index = uint16_t;  // a record's or a ring's position
  static constexpr Index kNil = 0xFFFF;
  static constexpr size_t kWords = kWindow / 64;
  using Ring = std::array<uint64_t, kWords>;  // bit (c % kWindow) <=> counter c seen

  struct Record {
    uint64_t sender = 0;
    uint64_t highest = 0;
    // Without a ring: the other counters seen in the window, as distances
    // below `highest` (1 .. kWindow - 1); 0 marks an unused place.
    std::array<uint16_t, kInline> below{};
    Index ring = kNil;  // the whole window, highest included, when set
    Index older = kNil;  // recency list: the next less recently accepted sender
    Index newer = kNil;
  };
  static_assert(sizeof(Record) == 32, "see the header comment");
  static_assert(kWindow <= 65536, "distances fit uint16_t");

  // The index holds record positions and is searched by sender: both hash
  // and compare through the records.
  struct BySender {
    using is_transparent = void;
    const std::vector<Record>* records;
    size_t operator()(Index i) const { return absl::HashOf((*records)[i].sender); }
    size_t operator()(uint64_t sender) const { return absl::HashOf(sender); }
    bool operator()(Index a, Index b) const { return a == b; }
    bool operator()(Index a, uint64_t sender) const { return (*records)[a].sender == sender; }
    bool operator()(uint64_t sender, Index a) const { return (*records)[a].sender == sender; }
  };

  bool Advance(Record& r, uint64_t counter);   // counter > r.highest
  bool Backfill(Record& r, uint64_t counter);  // counter <= r.highest
  void ToRing(Record& r);
  void FreeRing(Record& r);
  Ring& RingOf(const Record& r) { return rings_[r.ring]; }
  Index NewRecord(uint64_t sender);  // evicts the least recent when full
  void Unlink(Index i);
  void LinkNewest(Index i);

  size_t max_senders_;
  std::vector<Record> records_;
  absl::flat_hash_set<Index, BySender, BySender> index_;
  Index oldest_ = kNil;
  Index newest_ = kNil;
  std::vector<Ring> rings_;
  std::vector<Index> free_rings_;
};

}  // namespace pollen::protocol
