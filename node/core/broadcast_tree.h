// BroadcastTree: the shape of tree dissemination, sans IO. It holds names
// and beacons; Node::Impl does the sending (node_tree.cc).
//
// Each node keeps a few overlay neighbours (member names, links symmetric).
// On that overlay the nodes agree on one spanning tree, as a distance-vector
// protocol does (802.1D's spanning tree, without its timers): the root is the
// live member with the smallest name, and each other node's parent is the
// neighbour that offers the shortest path to that root (ties: the smaller
// neighbour name). A node learns its neighbours' (root, distance, parent)
// from their beacons. A new bit is pushed along tree links only (the parent
// and the neighbours whose beacon names this node as parent), never back to
// where it came from, so without loss each bit crosses each node once: N-1
// transmissions per bit, whoever added it.
//
// Why not Plumtree's prune-on-duplicate (tried first; simulation/README.md,
// "Tree dissemination"): with many concurrent origins a shared tree is
// over-pruned faster than IHAVE/GRAFT repairs it (N=100, 20 adds/s: 9,093
// grafts and 13,888 prunes for 1,177 adds, median delivery 5.5 s). A tree
// that depends only on membership does not thrash under traffic.
//
// Splits: the overlay is random and kept only while a node has fewer than
// `degree` neighbours, so after a long partition each side can refill from
// itself and stay a tree of its own. Node::Impl closes that: a node that is a
// root while membership lists a smaller live member links to it (or, if
// refused, to a random member) every beacon interval.
//
// Loops: a node never takes as parent a neighbour whose parent it is, and a
// path longer than max_distance is refused, so a stale path dies out (count
// to infinity, bounded). A root that membership no longer lists as live is
// ignored at once.
//
// Promises:
//  - Bounded: at most max_degree neighbours, one beacon each.
//  - Deterministic: the same calls give the same results; ordered containers
//    wherever an order reaches a result, no randomness of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace pollen::node {

class BroadcastTree {
 public:
  struct Config {
    size_t degree = 4;        // neighbours a node seeks
    size_t max_degree = 8;    // neighbours it accepts
    uint32_t max_distance = 32;  // longer paths are refused (and beacons beyond kMaxDistance are malformed)
  };
  static constexpr uint32_t kMaxDistance = 1024;
  // What a node tells its neighbours about its place in the tree.
  struct Beacon {
    std::string root;
    uint32_t distance = 0;  // hops to the root
    std::string parent;     // empty at the root
    bool operator==(const Beacon&) const = default;
  };

  BroadcastTree(std::string self, Config config);

  // ---- overlay ----
  size_t degree() const { return neighbours_.size(); }
  bool NeedsNeighbours() const { return neighbours_.size() < config_.degree; }
  bool IsNeighbour(const std::string& name) const { return neighbours_.count(name) > 0; }
  // False if it already is one, is this node, or the node is full.
  bool AddNeighbour(const std::string& name);
  void RemoveNeighbour(const std::string& name);
  std::vector<std::string> Neighbours() const;  // name order
  // Counts changes of the neighbour set and of their beacons: Recompute with
  // the same liveness answers is a no-op while this stays the same.
  uint64_t version() const { return version_; }

  // ---- tree ----
  // A neighbour's beacon (ignored from a non-neighbour).
  void OnBeacon(const std::string& name, Beacon beacon);
  // Recomputes this node's beacon from its neighbours' beacons whose root
  // `live` accepts; among paths to the same root, a neighbour that `suspect`
  // names (if given) is the parent only when no other neighbour offers one.
  // True if the beacon changed.
  bool Recompute(const std::function<bool(const std::string&)>& live,
                 const std::function<bool(const std::string&)>& suspect = nullptr);
  const Beacon& beacon() const { return beacon_; }
  // The parent (if any) and every neighbour whose beacon names this node as
  // its parent, in name order.
  std::vector<std::string> TreeLinks() const;
  // A neighbour whose beacon names this node as its parent.
  bool IsChild(const std::string& name) const;

  const Config& config() const { return config_; }

 private:
  struct Neighbour {
    bool has_beacon = false;
    Beacon beacon;
  };
  const std::string self_;
  Config config_;
  std::map<std::string, Neighbour> neighbours_;
  Beacon beacon_;
  uint64_t version_ = 0;
};

}  // namespace pollen::node
