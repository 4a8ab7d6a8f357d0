// Vocabulary shared by the sans-IO node core, the simulator and the daemon.
// The core never reads a clock: every entry point takes `now`.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pollen::node {

using Duration = std::chrono::nanoseconds;
// Monotonic time since an arbitrary per-process origin. The simulator's virtual
// clock and the daemon's steady_clock both map onto it.
using Time = std::chrono::nanoseconds;

// Where a peer can be reached. The daemon uses "host:port" ("[v6]:port" for
// IPv6); the simulator uses any unique token. The core treats it as opaque.
using Address = std::string;

enum class Channel : uint8_t { kDatagram, kStream };

// A sealed frame the driver must deliver to `to`.
struct Outgoing {
  Address to;
  Channel channel = Channel::kDatagram;
  std::string bytes;
};

enum class Scope : uint8_t { kShared, kDigest };

// crdt::kHashSchemeDefault (node/core/catalog.cc checks they agree), named
// here so that this header needs no crdt header.
inline constexpr uint32_t kFilterConfigHashScheme = 3;

// A filter as declared in config or by BF.RESERVE / catalog gossip.
struct FilterConfig {
  std::string name;
  uint64_t capacity = 1'000'000;
  double fpr = 0.01;
  uint32_t generations = 2;
  Scope scope = Scope::kShared;
  std::string owner;               // node name; required for kDigest
  double rotate_fill = 0.0;        // propose epoch+1 at this fill ratio; 0 = never
  Duration rotate_interval{0};     // propose epoch+1 after this long; 0 = never
  // Scaling (RedisBloom's EXPANSION): when the newest layer holds its
  // capacity, open one `expansion` times larger (crdt/generations.h).
  // 0: a fixed-size filter (NONSCALING), which refuses new keys once full
  // unless it rotates by fill. Excludes rotate_fill.
  uint32_t expansion = 0;
  // Owner-routed test-and-add (docs/routing.md): a key not present here is
  // added by its owner (rendezvous hashing over the live members), whose
  // answer is the one the client gets, so concurrent adds of one key at
  // several nodes answer "new" once. Shared filters only.
  bool routed = false;
  // The hash scheme the filter is made with (crdt/generations.h): 3, the
  // split layout and the schedule that sizes a reserved filter like
  // RedisBloom's, unless a config file section asks for 2 (its default there:
  // docs/crdt.md, "Layouts"). Afterwards the filter's params carry it.
  uint32_t hash_scheme = kFilterConfigHashScheme;
};

enum class MemberState : uint8_t { kAlive, kSuspect, kDead, kLeft };

struct MemberInfo {
  std::string name;
  Address address;
  MemberState state = MemberState::kAlive;
  uint64_t incarnation = 0;
  Time last_change{0};
  // Round trip (ping sent -> ack received, in the node's `now` time base) of
  // the last direct probe of this member that was answered; none yet, and
  // always none for self.
  std::optional<Duration> probe_rtt{};
};

// Something that happened, for logs, metrics and simulator checkers.
struct Event {
  enum class Kind : uint8_t {
    kMemberJoined, kMemberSuspect, kMemberDead, kMemberLeft, kMemberAlive,
    kEpochAdvanced, kFilterCreated, kFilterDiscarded,
    kFilterDeleted,        // a tombstone removed the live filter (DEL here or on a peer); count: deleted_through
    kFrameRejected,        // detail: the reason (counted in metrics too)
    kMergeRefused,         // parameter mismatch (DESIGN invariant 4)
    kAntiEntropyRepaired,  // count: ranges repaired
    kFilterGrew,           // a scaling filter opened a layer; count: the newest generation's layers
    kFilterSaturated,      // passed a saturation threshold (node_impl.h); detail: which and by how much
    kFilterRelieved,       // back under the thresholds (grew, rotated or replaced)
    kFilterRefused,        // a peer's filter over this node's memory budget; detail: why
  };
  Kind kind;
  std::string subject;  // member or filter name
  std::string detail;
  uint64_t count = 0;
};

}  // namespace pollen::node
