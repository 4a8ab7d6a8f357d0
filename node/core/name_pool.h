// NamePool: interned member names and addresses, each held once, counted.
//
// What it promises:
//  - Intern(text) returns text's id, the same id for equal text while any
//    reference to it remains, and counts one more reference; Release(id)
//    counts one fewer and frees the string at zero (its id is then reused).
//  - at(id) is the string; its address is stable until the last Release.
//  - Find(text) looks up without interning: kNone if absent.
//
// Why: every node holds every member's name and address, so in the
// simulator (N nodes in one process) their std::strings were 64 bytes per
// (node, member) pair, N^2 of them: 6.4 GB of the N=10,000 cluster's memory.
// Nodes that run in one thread may share one pool (pollen-sim gives all its
// nodes one), which holds each string once per process. A node without a
// shared pool gets a pool of its own.
//
// Not thread-safe, except in shared mode: every Membership sharing a pool
// runs in one thread, unless the pool was put in shared mode (below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "node/core/chunked_vector.h"

namespace pollen::node {

class NamePool {
 public:
  using Id = uint32_t;
  static constexpr Id kNone = ~Id{0};

  NamePool();
  NamePool(const NamePool&) = delete;  // the index's hasher points at this pool
  NamePool& operator=(const NamePool&) = delete;

  Id Intern(std::string_view text);
  void Release(Id id);  // asserts a live id

  // Shared mode, for nodes driven from several threads at once (pollen-sim's
  // --threads): from here on the set of strings is frozen. Find and at only
  // read; Intern of held text and Release count atomically; an Intern of new
  // text, or a Release of the last reference, would change the index under
  // another thread's reads, so it aborts instead. The caller first interns
  // (pins) every string the nodes will use. Irreversible.
  void Freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  Id Find(std::string_view text) const;
  const std::string& at(Id id) const;  // asserts a live id
  uint32_t references(Id id) const;     // 0 for a free or unknown id
  size_t size() const { return index_.size(); }  // distinct strings held
  size_t ids() const { return entries_.size(); }  // every id is below this

 private:
  struct Entry {
    std::string text;
    uint32_t refs = 0;  // 0: free. Read and written through std::atomic_ref (shared mode).
  };
  static uint32_t Refs(const Entry& e);
  struct TextHash {
    using is_transparent = void;
    const NamePool* pool;
    size_t operator()(std::string_view text) const;
    size_t operator()(Id id) const { return (*this)(std::string_view(pool->entries_[id].text)); }
  };
  struct TextEq {
    using is_transparent = void;
    const NamePool* pool;
    std::string_view TextOf(Id id) const { return pool->entries_[id].text; }
    static std::string_view TextOf(std::string_view text) { return text; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return TextOf(a) == TextOf(b);
    }
  };

  ChunkedVector<Entry> entries_;  // a lookup's probe reads its candidate's text here
  std::vector<Id> free_;
  absl::flat_hash_set<Id, TextHash, TextEq> index_;
  bool frozen_ = false;
};

}  // namespace pollen::node
