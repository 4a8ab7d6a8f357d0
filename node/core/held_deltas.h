// HeldDeltas: deltas for filters this node has not heard of yet, kept until
// the filter's catalog entry arrives.
//
// A new filter's first keys race its catalog entry. The entry spreads by
// gossip, a few random peers per round; the keys' bits go down the broadcast
// tree (which now carries the entry ahead of them, node_tree.cc) or, with
// flood dissemination, in gossip frames that may arrive out of order. Bits
// for a name a node did not know yet were dropped, and with them the copy
// for the node's whole subtree, until anti-entropy (10 s by default): in
// scenario fresh-filters (20 nodes, a new filter every second, its first key
// added at once; seeds 1-8) that key reached every node after 4.8-7.0 s at
// the median, up to 20 s. Tree pushes now carry the entry ahead of the bits
// and flood frames pack it with them, so this is the backstop for what
// still outruns it (an entry split into another frame, a sender no longer
// announcing it, a local Reserve racing a peer's): held here, the bits are
// merged, and passed on, when the entry is installed (docs/node-core.md,
// "A new filter's first keys"; in the fresh-filters runs, also with 30%
// reordering and 10% loss, nothing needed holding).
//
// Bounded twice: at most `max_cost` in all, a delta costing its words plus
// kBookkeepingWords (its name, parameters and containers: a one-word delta
// takes about 16 words of memory); one that does not fit is refused. And the
// owner expires what it has held too long (Node: one anti-entropy interval,
// after which anti-entropy has repaired it anyway). Sans-IO: time comes from
// the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "crdt/generations.h"
#include "crdt/word_bits.h"
#include "node/core/types.h"

namespace pollen::node {

class HeldDeltas {
 public:
  struct Delta {
    crdt::FilterParams params;  // as the sender described the filter
    uint64_t slot = 0;          // crdt::SlotOf(epoch, layer)
    std::vector<crdt::WordBits> words;
    Time arrived{0};
  };

  static constexpr size_t kBookkeepingWords = 16;

  explicit HeldDeltas(size_t max_cost);

  // Keeps `d` (which has words) unless that would pass max_cost: false then,
  // and nothing changed. An `arrived` earlier than the last one held for the
  // same name is raised to it (each name's queue stays in time order).
  bool Hold(Delta d);

  // Removes and returns the deltas held for filter `name`, oldest first.
  std::vector<Delta> Take(std::string_view name);

  // Drops the deltas that arrived at or before `cutoff`; returns how many.
  // Linear in the names held.
  size_t Expire(Time cutoff);

  size_t cost() const { return cost_; }
  size_t size() const { return count_; }

 private:
  static size_t Cost(const Delta& d) { return d.words.size() + kBookkeepingWords; }

  const size_t max_cost_;
  std::map<std::string, std::deque<Delta>, std::less<>> by_name_;  // each oldest first, none empty
  size_t cost_ = 0;   // sum of Cost() over everything held
  size_t count_ = 0;  // deltas held
};

}  // namespace pollen::node
