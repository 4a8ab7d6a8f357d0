// MemberTable: the other members one node knows, one slot each, found by name.
//
// What it promises:
//  - Insert gives an entry a slot number; the entry stays at the same address
//    until Erase of that slot (entries live in a ChunkedVector and never
//    move), so a reference to it, or to its name or address, is good until
//    then. An erased slot is reused by a later Insert.
//  - Names and addresses are held as ids in NamePools, which may be shared
//    with other tables (pollen-sim's nodes share two: one for names, one
//    for addresses).
//  - Find by name is a pool lookup and one array read: the index is a slot
//    number per name id, as long as the largest id this table holds and at
//    most the pool's id count. At N=10,000 that is ~40 KB per table, and a
//    lookup reads one cache line of it instead of probing a hash table whose
//    every candidate was checked through the entry (pollen-sim's steady state
//    at N=10,000: MemberTable::Find was 12% of the CPU, perf). (With names
//    and addresses in one pool, and the index grown by doubling, it was up
//    to 160 KB, 1.6 GB of pollen-sim's N=10,000.)
//  - ForEach walks every slot in use in slot order, which depends only on
//    the table's history of Inserts and Erases: deterministic, as the
//    protocol's walks (full-state lists, probe rounds, eviction) must be.
//    SortedByName gives them in name order (for listings).
//
// Why a table of its own: every node holds every member, so its cost is paid
// N^2 times in the simulator. At N=1000 a std::map<std::string, Member>, a
// hashed name index beside it and a piggyback queue of ready-made wire
// updates came to ~725 bytes of heap per (node, member) pair at the cold
// start's peak (heaptrack, pollen-sim N=1000): ~43 GB at N=10,000. An entry
// here is 56 bytes, its index slot ~8.
//
// Not thread-safe: one driver thread, like Membership.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "node/core/chunked_vector.h"
#include "node/core/name_pool.h"
#include "node/core/types.h"

namespace pollen::node {

using MemberSlot = uint32_t;
inline constexpr MemberSlot kNoSlot = ~MemberSlot{0};

// One member as a node holds it. pollen-sim holds N^2 of these (each node
// every other), so the size matters: 40 bytes, and 4.0 GB at N=10,000 (56
// bytes before 2026-11-28). A suspect's Lifeguard bookkeeping
// (Membership::suspects_) and the names (NamePool) live elsewhere.
struct MemberEntry {
  static constexpr uint32_t kNotLive = ~uint32_t{0};
  static constexpr int32_t kMaxProbeRttUs = (int32_t{1} << 23) - 1;  // 8.4 s

  NamePool::Id name = NamePool::kNone;  // kNone: the slot is free
  NamePool::Id address = NamePool::kNone;
  uint64_t incarnation = 0;
  Time last_change{0};
  uint32_t queue_key = 0;                        // Membership's piggyback queue key; 0: not queued
  uint32_t live_pos = kNotLive;                  // Membership's live list position while alive or suspect
  MemberSlot slot = kNoSlot;                     // set by Insert
  // The last answered direct probe's round trip in microseconds (it is only
  // displayed), at most kMaxProbeRttUs (a probe times out long before);
  // < 0: none yet. 24 bits, so that it shares a word with the state.
  int32_t probe_rtt_us : 24 = -1;
  MemberState state : 7 = MemberState::kAlive;
  // It announced kMemberFeatureCompactFrames (Membership, "Compact frames").
  bool takes_compact : 1 = false;
};
static_assert(sizeof(MemberEntry) == 40, "see above");

class MemberTable {
 public:
  // Asserts non-null pools; one pool may serve both.
  MemberTable(std::shared_ptr<NamePool> names, std::shared_ptr<NamePool> addresses);
  explicit MemberTable(std::shared_ptr<NamePool> pool) : MemberTable(pool, pool) {}
  MemberTable(const MemberTable&) = delete;  // owns pool references: released once
  MemberTable& operator=(const MemberTable&) = delete;
  ~MemberTable();  // releases every name and address

  size_t size() const { return size_; }
  MemberSlot Find(std::string_view name) const;  // kNoSlot if absent
  const std::string& name(const MemberEntry& e) const { return names_->at(e.name); }
  const std::string& address(const MemberEntry& e) const { return addresses_->at(e.address); }
  void SetAddress(MemberEntry& e, std::string_view address);

  // Asserts a slot in use.
  MemberEntry& at(MemberSlot slot);
  const MemberEntry& at(MemberSlot slot) const;

  // A default entry for `name` at `address`. Asserts a non-empty name that is
  // not in the table.
  MemberEntry& Insert(std::string_view name, std::string_view address);
  // Frees the slot; its name and address stay in their pools.
  void Erase(MemberSlot slot);
  // Room in the index for ids below `ids` without reallocating (a warm start).
  void Reserve(size_t ids) { slot_of_id_.reserve(ids); }

  // Every slot in use, ordered by name. O(N log N).
  std::vector<MemberSlot> SortedByName() const;
  // Every slot in use, in slot order. O(slots).
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    slots_.ForEach([&](const MemberEntry& e) {
      if (e.name != NamePool::kNone) fn(e);
    });
  }

 private:
  std::shared_ptr<NamePool> names_;
  std::shared_ptr<NamePool> addresses_;
  ChunkedVector<MemberEntry> slots_;
  std::vector<MemberSlot> free_;
  // slot_of_id_[id]: the slot whose name has pool id `id`, else kNoSlot.
  // Within one pool equal names have equal ids. Its capacity stays within
  // the pool's id count (see Insert).
  std::vector<MemberSlot> slot_of_id_;
  size_t size_ = 0;
};

}  // namespace pollen::node
