// SimOptions: everything that determines a simulator run, and its flag parser.
//
// A run is a pure function of its SimOptions (seed included): the same options
// give the same trace hash. Swarm mode draws the fault switches and their
// parameters from the seed (ApplySwarm), so one seed names one fault mix.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/core/node.h"
#include "node/core/rng.h"
#include "node/core/types.h"
#include "simulation/network.h"

namespace pollen::sim {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A fault at a fixed virtual time (used by the fixed scenarios).
struct ScriptedFault {
  enum class Kind : uint8_t {
    kPartition,         // symmetric, `fraction` of the nodes on side 1
    kOneWayPartition,   // side 0 cannot send to side 1
    kHeal,
    kCrash,             // `fraction` of the nodes, from the highest index down
    kRotate,            // operator rotation of the crawl filter at node round(fraction * (N-1))
  };
  Kind kind;
  node::Duration at{0};        // after warmup
  double fraction = 0.5;        // kPartition/kOneWay: side-1 share; kCrash: share crashed
  bool keep_state = true;      // kCrash: restart with persisted state
  node::Duration down{seconds(5)};  // kCrash: time until restart
};

struct FaultOptions {
  // Datagram faults (NetworkOptions gets these while faults are on).
  double loss = 0, duplicate = 0, reorder = 0;
  // Random symmetric / one-way partitions: mean gap between them, and length.
  bool partition = false, one_way_partition = false;
  node::Duration partition_gap{seconds(10)};
  node::Duration partition_min{seconds(2)}, partition_max{seconds(10)};
  // Random crashes: mean gap, chance the node keeps its persisted state, downtime.
  bool crash = false;
  node::Duration crash_gap{seconds(8)};
  // Random pauses (a GC pause, a starved CPU): the node runs nothing and reads
  // nothing for pause_min..pause_max; frames sent to it wait (up to a bound)
  // and on resume its timers fire before it reads them. At most a quarter of
  // the nodes paused at once.
  bool pause = false;
  node::Duration pause_gap{seconds(4)};
  node::Duration pause_min{seconds(1)}, pause_max{seconds(6)};
  double keep_state = 0.5;
  node::Duration down_min{seconds(1)}, down_max{seconds(10)};
  // Per-node clocks: offset uniform in [0, max_offset], drift uniform in +-max_drift.
  bool clock_drift = false;
  node::Duration max_offset{seconds(5)};
  double max_drift = 1e-3;
  std::vector<ScriptedFault> scripted;

  std::string Describe() const;  // e.g. "loss=0.30,partition,crash(keep=0.50)" or "none"
};

struct WorkloadOptions {
  double crawl_adds_per_sec = 20;    // cluster-wide, Poisson
  double repeat_fraction = 0.3;      // adds that repeat an earlier URL
  uint32_t digest_owners = 3;        // nodes that publish a digest (first indices)
  double digest_adds_per_sec = 2;    // per owner
  node::Duration digest_rotate_every{seconds(15)};  // per owner; 0 = never
  node::Duration operator_rotate_every{seconds(0)};  // mean gap; 0 = never
  node::Duration sample_every{seconds(2)};   // a tracked sample key
  node::Duration sample_timeout{seconds(30)};
  node::Duration sample_poll{milliseconds(10)};
  // Contended keys (issue 12's duplicate-new measurement): new keys per
  // second, each added by `contended_copies` distinct random nodes within
  // `contended_spread` of each other, as crawlers at several nodes finding
  // the same link. RunResult counts the keys more than one add called new.
  double contended_keys_per_sec = 0;
  uint32_t contended_copies = 3;
  node::Duration contended_spread{milliseconds(100)};
  // Owner routing (docs/routing.md): the crawl filter is routed, and every
  // add to it goes through Node::BeginAdd (answered when its owner answers).
  bool routed = false;
  node::Duration route_timeout{milliseconds(100)};
  // WAIT (node/core/peer_checks.h): this often a random up node whose
  // clients added crawl keys since its last complete WAIT calls
  // WAIT wait_replicas wait_timeout over them (0: never). The checker
  // fails a WAIT whose count exceeds the nodes that hold every key it covered.
  node::Duration wait_every{0};
  uint32_t wait_replicas = 2;
  node::Duration wait_timeout{milliseconds(1000)};
  // Fresh filters (a new filter's first keys race its catalog entry;
  // node/core/held_deltas.h): this often a random up node creates a new
  // filter and at once adds a tracked sample key to it (0: never). With
  // fresh_bound > 0, a fresh key that has not reached every live node that
  // long after its add fails the run.
  node::Duration fresh_filter_every{0};
  node::Duration fresh_bound{0};
};

struct SimOptions {
  uint64_t seed = 1;
  uint32_t seeds = 1;  // run seeds seed .. seed+seeds-1
  uint32_t nodes = 10;
  bool nodes_set = false;  // --nodes given (swarm keeps it)
  node::Duration warmup{seconds(5)};
  // Every node starts at once already holding every other as alive, as if
  // the cluster had joined long ago (MembershipConfig::warm_members): for
  // steady-state figures at N where the O(N^2 log N) cold start would take
  // hours. A restarted node joins through the seeds as usual.
  bool warm_start = false;
  node::Duration duration{seconds(30)};        // faults and workload, after warmup
  node::Duration liveness_bound{seconds(120)};  // to converge after faults stop
  node::Duration join_bound{0};                 // > 0: the cold start must end by then (<= warmup)
  node::Duration check_every{seconds(1)};
  node::Duration converge_poll{milliseconds(100)};

  node::Duration gossip_interval{milliseconds(200)};
  uint32_t fanout = 3;
  bool lifeguard = true;  // Membership's Lifeguard (--lifeguard=off: plain SWIM)
  bool reliable_ping = true;  // MembershipConfig::reliable_fallback_ping (--reliable-ping=off)
  node::NodeConfig::Dissemination dissemination = node::NodeConfig::Dissemination::kTree;
  node::Duration tree_push_delay{milliseconds(50)};  // NodeConfig::tree_push_delay
  node::Duration tree_push_gap{milliseconds(200)};   // NodeConfig::tree_push_gap
  bool compact_refs = true;  // NodeConfig::tree_compact_refs (--compact-refs=off: full references only)
  bool implicit_sender = true;  // NodeConfig::tree_implicit_sender (--implicit-sender=off: the address on every frame)
  bool filter_aliases = true;   // NodeConfig::tree_filter_aliases (--filter-aliases=off: compact references only)
  bool bare_pushes = true;      // NodeConfig::tree_bare_pushes (--bare-pushes=off: every push names its sender)
  bool compact_membership = true;  // NodeConfig::compact_membership (--compact-membership=off: the full form)
  bool compact_seal = true;     // NodeConfig::tree_compact_seal (--compact-seal=off: the full seal header on every frame)
  node::Duration anti_entropy_interval{seconds(10)};
  node::Duration anti_entropy_max_interval{seconds(60)};  // NodeConfig's; at or below the interval: fixed
  node::Duration probe_interval{seconds(1)};
  uint64_t capacity = 100'000;     // crawl filter
  uint32_t expansion = 0;          // crawl filter: 0 fixed-size, else it scales (a layer expansion^L larger)
  uint64_t digest_capacity = 10'000;
  double fpr = 0.01;
  uint32_t generations = 2;

  NetworkOptions network;  // latency; loss/dup/reorder come from `faults`
  FaultOptions faults;
  WorkloadOptions workload;

  bool swarm = false;
  std::string scenario;  // "" or one of ScenarioNames()
  bool json = false;
  bool quiet = false;
  bool help = false;
  bool version = false;  // print pollen-sim's version and exit
  // --threads: node events run on this many threads in windows of the
  // minimum link latency (parallel_window.h). The results are the same for
  // every value: only the speed changes.
  uint32_t threads = 1;
  bool huge_pages = false;  // --huge-pages=on: restart with malloc on transparent huge pages (main.cc)
  std::vector<std::string> replay_args;  // flags to replay a run, minus --seed/--seeds
  // --progress: called every 5 virtual seconds with the virtual time
  // (seconds) and, until the cold start has ended, how many nodes list every
  // node live (-1 after it, or with a warm start). The simulator itself does
  // no I/O; pollen-sim prints from here.
  bool progress = false;
  std::function<void(double seconds, int64_t nodes_listing_all)> on_progress;
};

// Names of the fixed scenarios: none, loss30, partition-heal, one-way,
// crash-restart, rotate-in-partition, grow, churn, pause, fresh-filters.
const std::vector<std::string>& ScenarioNames();

// Applies a fixed scenario to `options`. InvalidArgument for an unknown name.
absl::Status ApplyScenario(const std::string& name, SimOptions& options);

// Swarm mode: switches each fault on or off and draws its parameters from `rng`.
void ApplySwarm(node::Rng& rng, SimOptions& options);

// Parses pollen-sim's flags (argv[0] excluded). Errors read "ERR <message>".
absl::StatusOr<SimOptions> ParseFlags(const std::vector<std::string>& args);
std::string UsageText();

}  // namespace pollen::sim
