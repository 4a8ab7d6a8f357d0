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
// the median, up to 20 s. Held here, the bits are merged, and passed on,
// when the entry is installed (docs/crdt.md, "A new filter's first keys").
//
// Bounded twice: at most `max_words` words in all (a delta that does not fit
// is refused), and the owner expires what it has held too long (Node: one
// anti-entropy interval, after which anti-entropy has repaired it anyway).
// Sans-IO: time comes from the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
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

  explicit HeldDeltas(size_t max_words);

  // Keeps `d` (which has words) unless that would pass max_words: false then,
  // and nothing changed. An `arrived` earlier than the last one held is
  // raised to it (the queue stays in time order).
  bool Hold(Delta d);

  // Removes and returns the deltas held for filter `name`, oldest first.
  std::vector<Delta> Take(std::string_view name);

  // Drops the deltas that arrived at or before `cutoff`; returns how many.
  size_t Expire(Time cutoff);

  size_t words() const { return words_; }
  size_t size() const { return held_.size(); }

 private:
  const size_t max_words_;
  std::deque<Delta> held_;  // arrival order
  size_t words_ = 0;        // sum of held_[i].words.size()
};

}  // namespace pollen::node
