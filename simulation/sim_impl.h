// Simulator::Impl: the state and steps of one simulation run (simulator.h
// describes the model). Internal to simulation/: simulator.cc holds the event
// loop and node I/O, sim_faults.cc the faults, sim_workload.cc the workloads
// and periodic safety checks, sim_liveness.cc the liveness phase.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "node/core/name_pool.h"
#include "node/core/node.h"
#include "node/core/rng.h"
#include "simulation/checkers.h"
#include "simulation/clock.h"
#include "simulation/event_queue.h"
#include "simulation/network.h"
#include "simulation/trace_hash.h"
#include "simulation/simulator.h"

namespace pollen::sim {
struct WindowRunner;  // parallel_window.h

namespace internal {

using node::Channel;
using node::Rng;

inline constexpr char kCrawlFilter[] = "crawl:seen";
inline constexpr Time kNever = Time::max();
inline constexpr Duration kMinTickGap = std::chrono::milliseconds(1);
inline constexpr Duration kMaxTickGap = std::chrono::seconds(1);
inline constexpr Duration kMembersPollEvery = std::chrono::milliseconds(100);

inline double Sec(Duration d) { return static_cast<double>(d.count()) / 1e9; }

inline Duration Exponential(Rng& rng, Duration mean) {
  const double x = -std::log(1.0 - rng.Unit()) * static_cast<double>(mean.count());
  return Duration(static_cast<int64_t>(std::min(x, 1e18)));
}
inline Duration Uniform(Rng& rng, Duration lo, Duration hi) {
  if (hi <= lo) return lo;
  return lo + Duration(static_cast<int64_t>(rng.Unit() * static_cast<double>((hi - lo).count())));
}
inline Duration PerSecond(double rate) { return Duration(static_cast<int64_t>(1e9 / rate)); }

// Independent streams per subsystem, all from the run seed.
enum Stream : uint64_t { kNetwork = 1, kFaults, kWorkload, kNodeSeeds, kClocks, kSwarm };
inline Rng StreamRng(uint64_t seed, Stream stream) { return Rng(seed ^ (0xd1342543de82ef95ULL * stream)); }

inline std::string EventKindName(node::Event::Kind kind) {
  using K = node::Event::Kind;
  switch (kind) {
    case K::kMemberJoined: return "member_joined";
    case K::kMemberSuspect: return "member_suspect";
    case K::kMemberDead: return "member_dead";
    case K::kMemberLeft: return "member_left";
    case K::kMemberAlive: return "member_alive";
    case K::kEpochAdvanced: return "epoch_advanced";
    case K::kFilterCreated: return "filter_created";
    case K::kFilterDiscarded: return "filter_discarded";
    case K::kFilterDeleted: return "filter_deleted";
    case K::kFrameRejected: return "frame_rejected";
    case K::kMergeRefused: return "merge_refused";
    case K::kAntiEntropyRepaired: return "anti_entropy_repaired";
    case K::kFilterGrew: return "filter_grew";
    case K::kFilterSaturated: return "filter_saturated";
    case K::kFilterRelieved: return "filter_relieved";
    case K::kFilterRefused: return "filter_refused";
  }
  return "unknown";
}

inline void AddCounters(node::NodeCounters& into, const node::NodeCounters& c) {
  into.adds += c.adds;
  into.delta_bits_sent += c.delta_bits_sent;
  into.delta_bits_received += c.delta_bits_received;
  into.bytes_out += c.bytes_out;
  into.frames_out += c.frames_out;
  into.anti_entropy_runs += c.anti_entropy_runs;
  into.ranges_repaired += c.ranges_repaired;
  into.anti_entropy_continued += c.anti_entropy_continued;
  into.anti_entropy_resumed += c.anti_entropy_resumed;
  into.epochs_advanced += c.epochs_advanced;
  into.filters_replaced += c.filters_replaced;
  into.delta_overflows += c.delta_overflows;
  into.stale_deltas += c.stale_deltas;
  into.unknown_filter += c.unknown_filter;
  into.held_deltas += c.held_deltas;
  into.held_deltas_refused += c.held_deltas_refused;
  into.held_deltas_released += c.held_deltas_released;
  into.held_deltas_dropped += c.held_deltas_dropped;
  into.tree_parent_changes += c.tree_parent_changes;
  into.tree_resends += c.tree_resends;
  for (const auto& [k, v] : c.rejected_by_reason) into.rejected_by_reason[k] += v;
  for (const auto& [k, v] : c.bytes_out_by_type) into.bytes_out_by_type[k] += v;
  for (const auto& [k, v] : c.frames_out_by_type) into.frames_out_by_type[k] += v;
}

struct Ev {
  enum class Kind : uint8_t {
    kTick, kDeliver, kStart, kRestart, kHeal, kScripted, kRandomPartition, kRandomCrash,
    kCrawlAdd, kDigestAdd, kDigestRotate, kOperatorRotate, kSample, kPoll, kCheck, kFaultsEnd,
    kConvergePoll, kWindowStart, kMembersPoll, kRandomPause, kResume,
    kContendedKey, kContendedAdd, kWait, kFreshFilter,
  };
  Kind kind = Kind::kTick;
  uint32_t node = 0;
  uint32_t from = 0;
  uint64_t token = 0;      // kTick: wake token; kDeliver: receiver's boot; kScripted, kContendedAdd: index
  uint64_t from_boot = 0;  // kDeliver: sender's boot
  Channel channel = Channel::kDatagram;
  bool lagged = false;     // kDeliver: already held back by the receiver's slow_lag
  std::string bytes;
};

struct SimNode {
  std::string name;
  node::Address address;
  std::unique_ptr<node::Node> node;
  bool up = false;
  bool paused = false;
  std::vector<Ev> held;     // frames that arrived while paused, in order
  Duration slow_lag{0};     // > 0: a slow node, reading each frame this late
  uint64_t pause_token = 0;  // moves on each pause, slow spell and crash: stale kResume events do nothing
  Time available_since{0};  // last start, restart or resume
  uint64_t boot = 0;
  NodeClock clock;
  uint64_t wake_token = 0;
  Time wake_at = kNever;
  bool has_persisted = false;
  std::map<std::string, std::string> persisted;
  node::NodeCounters carried;  // counters of earlier boots
  // Took a frame, a client add or a restart since the last sample poll: only
  // such a node can newly hold a sample key (Poll skips the others).
  bool changed_since_poll = true;
};

// What Flush takes from a node: its frames to send, answered adds and
// WAITs, events, and for each filter-created or -discarded event the filter's
// counts at that moment (the checker's Observe reads them at commit, when the
// node may have moved on).
struct NodeOutput {
  std::vector<node::Outgoing> outgoing;
  std::vector<node::RoutedAddResult> routed;
  std::vector<node::PeerCheckResult> checks;
  std::vector<node::Event> events;
  std::vector<std::pair<size_t, node::FilterInfo>> observed;  // (index in events, counts)
};

// One node event (a tick or a delivery) split in two. RunStep does the part
// that touches only that node (its core, its SimNode's wake and hold state)
// and records here what the rest of the simulator must learn; CommitStep
// applies that to the shared state (trace, network, counters, checkers,
// agenda). Steps of different nodes share nothing, so within a window of
// the minimum link latency they may run on different threads and be
// committed afterwards in the serial loop's order (parallel_window.cc).
struct NodeStep {
  enum class Outcome : uint8_t { kNothing, kDelivered, kPartitionDropped, kPausedDropped, kHeld, kLagged, kTicked };
  Time at{0};
  uint32_t node = 0;
  Outcome outcome = Outcome::kNothing;
  uint32_t from = 0;         // kDelivered: the trace's record of the frame
  Channel channel = Channel::kDatagram;
  uint64_t bytes_hash = 0;
  NodeOutput out;
  // At most one event for the agenda: the frame held back by slow lag, or the node's next tick.
  bool push = false;
  Time push_at{0};
  Ev push_ev;
  // Parallel windows only (parallel_window.h): the pushed event runs in this
  // window, as created event `created`; this step's own place in its node's
  // order (WindowRunner::Pending::key).
  int32_t created = -1;
  uint64_t window_key = 0;
};

struct Sample {
  std::string filter;
  std::string key;
  bool fresh = false;  // the first key of a fresh filter (--fresh-filter-every)
  Time added{0};
  std::vector<bool> seen;
  Duration t999{-1}, t100{-1};
  bool active = true;
  bool polled = false;  // the first poll reads every node; later ones only changed ones
};

}  // namespace internal
using namespace internal;  // NOLINT: internal header, included by simulation/*.cc only

struct Simulator::Impl {
  explicit Impl(SimOptions options);  // simulator.cc, where WindowRunner is complete
  ~Impl();

  static NetworkOptions NetworkWithFaults(const SimOptions& o) {
    NetworkOptions n = o.network;
    n.loss = o.faults.loss;
    n.duplicate = o.faults.duplicate;
    n.reorder = o.faults.reorder;
    return n;
  }

  SimOptions o;
  Rng fault_rng, work_rng, seed_rng;
  Network net;
  SafetyChecker checker;
  EventQueue<Ev> queue;
  TraceHash trace;
  // Every node's member names and addresses, held once (NamePool): N^2
  // copies otherwise (64 bytes per pair, 6.4 GB at N=10,000). Two pools, so
  // that name ids are dense (see MemberTable).
  std::shared_ptr<node::NamePool> member_names = std::make_shared<node::NamePool>();
  std::shared_ptr<node::NamePool> member_addresses = std::make_shared<node::NamePool>();
  // --warm-start: every node's (name, address), handed to each node's first
  // start; dropped once all have started.
  std::shared_ptr<const std::vector<std::pair<std::string, node::Address>>> warm_members;
  uint32_t warm_starts_left = 0;
  std::vector<SimNode> nodes;
  absl::flat_hash_map<node::Address, uint32_t> by_address;  // lookups only, never iterated
  absl::flat_hash_map<std::string, uint32_t> by_name;        // likewise
  Time partition_ended{0};
  std::set<std::pair<std::string, uint64_t>> false_accusations;  // (subject, incarnation)  // the last heal (false accusations are counted 10 s after it)
  Time now{0};
  Time faults_end{0}, liveness_start{0};
  // Bytes sent by type, summed over nodes and boots, when the workload window
  // [warmup, warmup + duration] opens and closes: traffic of that window only,
  // without the join storm before it or the liveness phase after.
  std::map<std::string, uint64_t> window_open_bytes, window_close_bytes;
  std::clock_t window_open_cpu = 0;
  std::chrono::steady_clock::time_point window_open_wall;
  std::map<std::string, uint64_t> BytesOutByType();
  bool faults_on = true, workload_on = true, done = false;
  bool join_bound_failed = false;  // --join-bound: judged once
  RunResult r;
  std::vector<Sample> samples;
  bool poll_pending = false;
  void MembersPoll();
  uint32_t observe_cursor = 0;
  uint32_t last_diff_node = 0;
  Time next_progress{0};
  std::vector<std::string> crawl_history;
  uint64_t url_counter = 0, object_counter = 0, fresh_filters = 0;
  // Per contended key: the adds made and the adds that answered new.
  struct Contended {
    uint32_t adds = 0;
    uint32_t answered_new = 0;
    bool fell_back = false;     // some add was decided by other than its owner (routing's documented escape)
    bool partial_view = false;  // some asker's view lacked a node, or a node was down (likewise)
  };
  std::vector<Contended> contended;
  // Routed adds waiting for their owners, by (node, ticket); a crash drops a node's.
  struct RoutedPending {
    std::string filter, key;
    uint64_t epoch = 0;
    int64_t contended_key = -1;
    Time began{0};
    bool full_view = false;  // every node up and live in the asker's view at BeginAdd
  };
  std::map<std::pair<uint32_t, uint64_t>, RoutedPending> routed_pending;
  std::vector<Duration> routed_new_latency, routed_present_latency;
  // WAIT (--wait-every-ms), per node: every crawl key added there since its
  // last crash, how many of them a WAIT answered by every live peer covered
  // (not sent again), and the WAIT in flight (it covers added[confirmed,
  // keys): what the checker holds its count against).
  struct NodeWaits {
    std::vector<std::string> added;
    size_t confirmed = 0;
    bool in_flight = false;
    uint64_t ticket = 0;
    size_t keys = 0;  // added.size() when it began
    Time began{0};
    uint64_t crashes = 0, rotations = 0;  // r.crashes, r.rotations when it began
  };
  std::vector<NodeWaits> waits;
  std::vector<Duration> wait_latency;

  std::string last_divergence;
  std::map<std::string, uint64_t> unroutable;

  // ---- scheduling helpers ----
  void At(Time t, Ev ev);
  void At(Time t, Ev::Kind kind, uint32_t node = 0, uint64_t token = 0);
  Time Local(uint32_t i) const { return nodes[i].clock.ToLocal(now); }
  uint32_t up_count() const;
  // A random node that is up, or -1.
  int RandomUp(Rng& rng);
  std::vector<node::FilterConfig> Filters() const;
  bool CreateNode(uint32_t i, bool warm = false);

  // ---- node I/O ----
  // Flush is Collect (the node's side) then CommitOutput (the simulator's).
  void Flush(uint32_t i);
  void Collect(uint32_t i, NodeOutput& out);
  void CommitOutput(uint32_t i, NodeOutput& out);
  // Reschedule pushes the tick NextTick plans (it moves the node's wake state).
  void Reschedule(uint32_t i, bool after_tick);
  bool NextTick(uint32_t i, bool after_tick, Time at, Time& wake, uint64_t& token);
  void AfterClientOp(uint32_t i);
  // A kTick or kDeliver event at time `at` (NodeStep). RunStep touches no
  // state of the simulator's but node ev.node's.
  static bool IsNodeEvent(Ev::Kind kind) { return kind == Ev::Kind::kTick || kind == Ev::Kind::kDeliver; }
  void RunStep(Ev& ev, Time at, NodeStep& step);
  void CommitStep(NodeStep& step);  // pushes step.push with At() (step.created must be -1)
  void CommitStepEffects(NodeStep& step);  // all but the push

  // An add at node i, recorded for the checkers. Returns true if acknowledged.
  // `contended_key`: the index of a contended key (ContendedAnswer), or -1.
  // An add to a routed filter is acknowledged when its answer comes back
  // (AddAnswered, from Flush).
  bool ClientAdd(uint32_t i, const std::string& filter, const std::string& key, int64_t contended_key = -1);
  void AddAnswered(uint32_t i, node::RoutedAddResult done);
  void WaitAt();  // a WAIT at a random up node with unconfirmed keys
  void WaitAnswered(uint32_t i, node::PeerCheckResult done);
  void RotateAt(uint32_t i, const std::string& filter);

  // Safety checks of one node; `observe` also reads its filters' bit counts
  // (a scan of each changed generation; digests and estimates are not asked
  // for), which Check() spreads over time.
  void CheckNode(uint32_t i, bool observe = true);

  // ---- faults ----
  void Crash(uint32_t i, bool keep_state, Duration down);
  void Restart(uint32_t i);
  std::vector<uint8_t> SidesByIndex(double fraction);
  void StartPartition(Network::PartitionKind kind, std::vector<uint8_t> side);
  void RandomPartition();
  void RandomCrash();
  void RandomPause();
  void Resume(uint32_t i, uint64_t token);
  // A suspect or dead event at node `observer` about `subject`: counted if
  // the subject was plainly healthy.
  void CountAccusation(const node::Event& e);
  void Scripted(const ScriptedFault& f);

  // ---- workloads ----
  void CrawlAdd();
  void DigestAdd(uint32_t owner);
  void DigestRotate(uint32_t owner);
  void OperatorRotate();
  void AddSample();
  // A fresh filter at a random up node, and its first key as a sample.
  void FreshFilter();
  void TrackSample(Sample s);
  // A contended key: schedules its adds at distinct nodes (ContendedAdd).
  void ContendedKey();
  void ContendedAdd(uint32_t i, uint64_t key);
  // `escaped`: decided by other than the key's owner, or with a partial view.
  void ContendedAnswer(uint64_t key, bool added, bool fell_back = false, bool partial_view = false);
  void Poll();
  void Check();

  // ---- liveness ----
  void FaultsEnd();
  using FilterStates = std::vector<std::tuple<std::string, std::vector<uint64_t>, std::vector<uint64_t>>>;
  FilterStates StateOf(uint32_t i);

  // True when every live node has the same filters, epochs and digests. Tries
  // the node that differed last time first, so a poll that fails is cheap.
  bool Converged();
  void ConvergePoll();

  // ---- parallel windows (parallel_window.cc) ----
  std::unique_ptr<WindowRunner> windows;  // --threads > 1
  bool ParallelWindowsAllowed() const;
  // Runs the node events of the next window of the agenda on the worker
  // threads and commits them; false if the agenda's next event is not a
  // node event (the caller dispatches it).
  bool RunWindow(Time hard_stop);

  // ---- the run ----
  void Setup();
  void Dispatch(Ev& ev);
  RunResult Run();
  void Finish();
};

}  // namespace pollen::sim

