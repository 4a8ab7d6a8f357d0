// FilterAliases: per tree link, small numbers that stand for filter
// references in pushes (sans IO).
//
// A compact reference (catalog.h: the filter's name and a 64-bit digest of
// its other pinned fields) is ~21 bytes of a push whose positions are ~27
// (pollen-sim, N=100, 20 adds/s: 990 KB of 5.3 MB of push frames in the
// window). On a link whose neighbour advertises TreeBeacon.features bit 2,
// the sender names a filter by a number instead, in three steps:
//   1. define: the compact reference with `FilterRef.alias` set beside it, in
//      numbered pushes of the link's delivery stream, until one of them is
//      acknowledged;
//   2. use: the number alone (3 bytes with its wrapper), in later pushes of
//      the same stream;
//   3. forget: a NACK on the link's current stream starts over with new
//      numbers. A push the receiver cannot resolve is NACKed at once
//      (PushDelivery::OnRefused), so a lost table costs one refused push and
//      its resend in full. The receiver loses its table when it restarts or
//      drops the link on its side (the sender's stream goes on), and misses a
//      definition when it gives up on the push that carried it.
// Numbers are never reused within a stream, so a stale entry at the receiver
// can never name another filter: a number means one reference for the
// stream's lifetime. A new stream (the sender restarted, or dropped the link
// and made it again: PushDelivery draws a new id) starts both sides afresh.
// The caller must therefore retain the same links here as in its
// PushDelivery: a link's numbers live exactly as long as its stream.
//
// The sender holds at most kMaxPerLink live numbers per link: those assigned
// since its last forget, the lowest evicted when a new filter needs one. So
// they are the kMaxPerLink highest it has assigned. The receiver keeps, per
// link, the kMaxPerLink highest numbers it has seen defined in the current
// stream: every live number it saw is among them, and its eviction never
// drops a number in use.
//
// An alias resolves only to a compact reference, which the node then
// resolves against the filter it holds (Node's ParamsFromWire): bits never
// reach a filter whose name and digest they were not sent under. The one
// way a stale entry could resolve is a new stream drawing the same random
// 32-bit id as the one before it (2^-32 per sender restart or link made
// again; PushDelivery would confuse the two streams too): its bits would
// then land in another filter this node holds, and be pushed on from there,
// which adds false positives to that filter, never a false negative.
//
// Promises: bounded (kMaxPerLink entries per link and direction, links as
// the caller retains them); deterministic (ordered containers only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "protocol/wire.pb.h"

namespace pollen::node {

class FilterAliases {
 public:
  static constexpr size_t kMaxPerLink = 32;

  // What names a filter in one push: alias 0 means the compact reference
  // alone (out of numbers in this stream); otherwise the alias, with the
  // compact reference beside it when `define`.
  struct Form {
    uint32_t alias = 0;
    bool define = false;
  };
  struct Target {
    std::string name;
    uint64_t digest = 0;
    friend bool operator==(const Target&, const Target&) = default;
  };
  using Definitions = std::vector<std::pair<uint32_t, Target>>;

  // ---- sender ----
  // The form for `target` in push `seq` of `stream` on `link`, where the
  // neighbour has acknowledged every push up to `acked` of that stream.
  Form ForPush(const std::string& link, uint32_t stream, const Target& target, uint64_t seq, uint64_t acked);
  // The link NACKed a push of our current stream: define again, under new
  // numbers.
  void Forget(const std::string& link);

  // ---- receiver ----
  // Replaces the aliases in `push` (a numbered push of `stream` from `link`)
  // by the compact references they stand for, and collects the push's own
  // definitions into `defined`, to Learn once the push has been taken.
  enum class Expansion {
    kNone,       // no alias in the push
    kExpanded,   // every alias replaced
    kUnknown,    // an alias this link has not defined (in this push or a taken one): refuse the push
    kMalformed,  // an alias outside a numbered push, beside full parameters, or defined two ways
  };
  static bool HasAlias(const wire::Gossip& push);
  Expansion Expand(const std::string& link, uint32_t stream, uint64_t seq, wire::Gossip* push,
                   Definitions* defined) const;
  // A push of `stream` from `link` that was taken defined `alias` as `target`.
  void Learn(const std::string& link, uint32_t stream, uint32_t alias, const Target& target);
  // What `alias` stands for in `stream` from `link`; nullptr if unknown.
  const Target* Find(const std::string& link, uint32_t stream, uint32_t alias) const;

  // ---- both ----
  // Drops every link not in `links` (ascending).
  void Retain(const std::vector<std::string>& links);
  size_t links() const { return links_.size(); }

 private:
  struct Sent {
    uint32_t alias = 0;
    uint64_t defined_in = 0;  // the first push that defined it
  };
  struct Link {
    // sender
    uint32_t stream = 0;
    uint32_t next_alias = 1;
    std::map<std::pair<std::string, uint64_t>, Sent> sent;
    // receiver
    uint32_t rx_stream = 0;
    std::map<uint32_t, Target> received;
  };
  std::map<std::string, Link> links_;
};

}  // namespace pollen::node
