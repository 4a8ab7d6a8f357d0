// SafetyChecker: the invariants the simulator checks on every run, always on.
//
//   1. An acknowledged add never reads absent at the node that acknowledged it
//      while the key's epoch is inside that node's generation window, unless
//      that node has since restarted without its persisted state.
//   2. Generation bits never clear: for a node that did not lose its state,
//      set_bits of a given (filter, epoch) never decreases.
//   3. Epochs never go back: a node's epoch per filter never decreases while
//      the filter keeps its incarnation (node::FilterInfo::incarnation). A
//      replacement by a winning catalog entry (reported as kFilterDiscarded,
//      passed in as OnReplaced) starts a new incarnation whose epoch and bits
//      are tracked afresh; an incarnation that changes without that report is
//      a failure. A restart that keeps its state renumbers incarnations but
//      keeps the epochs it must not go below.
// And, for the liveness phase, CheckAckedEverywhere: every durable acknowledged
// key whose epoch is in a node's window reads present on that node.
//
// Failures are recorded as readable strings (the first kMaxStored kept, all
// counted). The checker never changes node state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "node/core/node.h"

namespace pollen::sim {

class SafetyChecker {
 public:
  static constexpr size_t kMaxStored = 20;

  // `generations` is G, the window length of every filter.
  SafetyChecker(size_t nodes, uint32_t generations) : generations_(generations), acks_by_node_(nodes) {}

  // `node` acknowledged adding `key` to `filter`, whose newest epoch was `epoch`.
  void OnAck(size_t node, const std::string& filter, const std::string& key, uint64_t epoch);
  // `node` crashed; with kept_state its persisted state (all acks) survives.
  void OnCrash(size_t node, bool kept_state);

  // Checks invariants 2 and 3 against one observation of a node's filter.
  void Observe(size_t node, const node::FilterInfo& info, node::Time at);
  // A node reported (kEpochAdvanced) or was seen at `epoch`: checks invariant 3
  // and remembers it as the node's current epoch of `filter`.
  void OnEpoch(size_t node, const std::string& filter, uint64_t epoch, node::Time at);
  // `node` discarded `filter`'s state for a winning catalog entry
  // (kFilterDiscarded): forget its epoch and bits, and accept a new incarnation.
  void OnReplaced(size_t node, const std::string& filter);
  // The node's current epoch of `filter` as last reported (0 if never).
  uint64_t CurrentEpoch(size_t node, const std::string& filter) const;
  // Checks invariant 1 for every key `node` acknowledged, using the node's
  // current epochs: a key is required while epoch > current - G.
  void CheckAcked(size_t node, const node::Node& n, node::Time at);
  // Liveness: every durable acknowledged key reads present on `n` (node index
  // `node`) when its epoch is in n's window. Returns keys checked.
  uint64_t CheckAckedEverywhere(size_t node, const node::Node& n, node::Time at);

  void Fail(std::string message);

  const std::vector<std::string>& failures() const { return failures_; }
  uint64_t failure_count() const { return failure_count_; }
  uint64_t acked() const { return acks_.size(); }
  uint64_t volatile_acks() const { return volatile_acks_; }  // lost with a wiped node
  // Sum over every (filter, epoch) seen of the most set bits any node had:
  // the distinct bits the cluster set.
  uint64_t distinct_bits() const;

 private:
  struct Ack {
    std::string filter, key;
    uint64_t epoch = 0;
    bool durable = true;
  };
  // Epoch window [lo, hi] of `info` (its generations); false if it has none.
  static bool Window(const node::FilterInfo& info, uint64_t& lo, uint64_t& hi);

  uint32_t generations_;
  std::vector<Ack> acks_;
  std::vector<std::vector<size_t>> acks_by_node_;
  uint64_t volatile_acks_ = 0;
  struct EpochSeen {
    uint64_t epoch = 0;
    std::optional<uint64_t> incarnation;  // unknown until observed (and after a restart)
  };
  std::map<std::pair<size_t, std::string>, EpochSeen> last_epoch_;
  std::map<std::tuple<size_t, std::string, uint64_t>, uint64_t> last_bits_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> max_bits_;
  std::vector<std::string> failures_;
  uint64_t failure_count_ = 0;
};

// Owner routing's promise (docs/routing.md), for one contended key: it is
// broken when the key was answered new more than once although every add
// reached the key's owner (`fell_back` false) and every asking node's view,
// when it asked, held every node of the cluster live and every node was up
// (`partial_view` false: all askers then rank the same owner). A fallback or
// a view that differs is the documented escape: such duplicates are
// measured, not failures.
struct RoutedKeyAnswers {
  uint32_t answered_new = 0;
  bool fell_back = false;
  bool partial_view = false;
};
bool BrokeRoutingPromise(const RoutedKeyAnswers& key);

// WAIT's promise (node/core/peer_checks.h): its count never exceeds the
// peers that hold every key the caller added (`holders`, counted by the
// simulator from every node's filter when the answer arrives).
bool BrokeWaitPromise(uint32_t peers_acked, uint32_t holders);

}  // namespace pollen::sim
