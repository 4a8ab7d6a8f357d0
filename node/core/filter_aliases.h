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
//   3. forget: a NACK on the link starts over with new numbers. A push the
//      receiver cannot resolve (it restarted and lost the table, or gave up
//      on the defining push) is NACKed at once (PushDelivery::OnRefused), so
//      a lost table costs one refused push and its resend in full.
// Numbers are never reused within a stream, so a stale entry at the receiver
// can never name another filter: a number means one reference for the
// stream's lifetime. A new stream (the sender restarted, or the link was
// dropped and made again) starts both sides' tables afresh.
//
// The receiver keeps, per link, the kMaxPerLink highest numbers it has seen
// defined in the current stream. The sender holds at most kMaxPerLink live
// numbers, all assigned since its last forget, so they are the highest it
// has assigned: every live number the receiver saw is among the highest it
// saw, and eviction never drops one in use. A filter beyond the sender's
// kMaxPerLink goes as a compact reference.
//
// An alias resolves only to a compact reference, which the node then
// resolves against the filter it holds (Node's ParamsFromWire): bits never
// reach a filter whose name and digest they were not sent under. The one
// way a stale entry could resolve is a restarted sender drawing the same
// random 32-bit stream id as before (2^-32 per restart and link; PushDelivery
// would confuse the two streams too): its bits would then land in another
// filter this node holds, which adds false positives there, never a false
// negative anywhere.
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

namespace pollen::node {

class FilterAliases {
 public:
  static constexpr size_t kMaxPerLink = 32;

  // What names a filter in one push: alias 0 (the table is full) means the
  // compact reference alone; otherwise the alias, with the compact reference
  // beside it when `define`.
  struct Form {
    uint32_t alias = 0;
    bool define = false;
  };
  struct Target {
    std::string name;
    uint64_t digest = 0;
    friend bool operator==(const Target&, const Target&) = default;
  };

  // ---- sender ----
  // The form for `target` in push `seq` of `stream` on `link`, where the
  // neighbour has acknowledged every push up to `acked` of that stream.
  Form ForPush(const std::string& link, uint32_t stream, const Target& target, uint64_t seq, uint64_t acked);
  // The link NACKed a push: define again, under new numbers.
  void Forget(const std::string& link);

  // ---- receiver ----
  // A push of `stream` from `link` defined `alias` as `target`.
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
