// MemberTable: the other members one node knows, one slot each, found by name.
//
// What it promises:
//  - Insert gives an entry a slot number; the entry stays at the same address
//    until Erase of that slot (entries live in a deque and never move), so a
//    reference to it, or to its name or address, is good until then. An
//    erased slot is reused by a later Insert.
//  - Find by name is a hash lookup. The index holds slot numbers only: it
//    hashes the name stored in the entry rather than a copy of it.
//  - SortedByName gives every slot in use in name order, for the walks whose
//    order the protocol's determinism rests on (full-state lists, probe
//    rounds, eviction).
//
// Why a table of its own: every node holds every member, so its cost is paid
// N^2 times in the simulator. At N=1000 a std::map<std::string, Member>, a
// hashed name index beside it and a piggyback queue of ready-made wire
// updates came to ~725 bytes of heap per (node, member) pair at the cold
// start's peak (heaptrack, pollen-sim N=1000): ~43 GB at N=10,000. An entry
// here is 112 bytes, its index slot ~8.
//
// Not thread-safe: one driver thread, like Membership.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "node/core/types.h"

namespace pollen::node {

using MemberSlot = uint32_t;
inline constexpr MemberSlot kNoSlot = ~MemberSlot{0};

// A suspicion's Lifeguard bookkeeping, held apart: few members are ever
// suspect at once.
struct MemberSuspicion {
  Time since{0};
  Time deadline{0};                   // declared dead then, unless refuted
  std::vector<std::string> accusers;  // distinct, the first one first
};

struct MemberEntry {
  static constexpr uint32_t kNotLive = ~uint32_t{0};

  std::string name;  // never empty while the slot is in use
  Address address;
  uint64_t incarnation = 0;
  Time last_change{0};
  std::unique_ptr<MemberSuspicion> suspicion{};  // set exactly while suspect
  uint64_t queue_key = 0;                        // Membership's piggyback queue key; 0: not queued
  uint32_t live_pos = kNotLive;                  // Membership's live list position while alive or suspect
  MemberSlot slot = kNoSlot;                     // set by Insert
  // The last answered direct probe's round trip in microseconds (it is only
  // displayed), at most INT32_MAX; < 0: none yet.
  int32_t probe_rtt_us = -1;
  MemberState state = MemberState::kAlive;
};

class MemberTable {
 public:
  MemberTable();
  MemberTable(const MemberTable&) = delete;  // the index's hasher points at this table
  MemberTable& operator=(const MemberTable&) = delete;

  size_t size() const { return index_.size(); }
  MemberSlot Find(std::string_view name) const;  // kNoSlot if absent

  // Asserts a slot in use.
  MemberEntry& at(MemberSlot slot);
  const MemberEntry& at(MemberSlot slot) const;

  // Asserts a non-empty name that is not in the table; sets entry.slot.
  MemberSlot Insert(MemberEntry entry);
  // Frees the slot (its strings and suspicion with it).
  void Erase(MemberSlot slot);

  // Every slot in use, ordered by name. O(N log N).
  std::vector<MemberSlot> SortedByName() const;
  // Every slot in use, in slot order. O(slots).
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const MemberEntry& e : slots_) {
      if (!e.name.empty()) fn(e);
    }
  }

 private:
  struct NameHash {
    using is_transparent = void;
    const MemberTable* table;
    size_t operator()(std::string_view name) const;
    size_t operator()(MemberSlot slot) const;
  };
  struct NameEq {
    using is_transparent = void;
    const MemberTable* table;
    std::string_view NameOf(MemberSlot slot) const { return table->slots_[slot].name; }
    static std::string_view NameOf(std::string_view name) { return name; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return NameOf(a) == NameOf(b);
    }
  };

  std::deque<MemberEntry> slots_;
  std::vector<MemberSlot> free_;
  absl::flat_hash_set<MemberSlot, NameHash, NameEq> index_;
};

}  // namespace pollen::node
