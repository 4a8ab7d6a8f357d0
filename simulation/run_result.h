// RunResult: what one simulator run measured and checked, and its renderings.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "simulation/network.h"

namespace pollen::sim {

struct RunResult {
  uint64_t seed = 0;
  uint32_t nodes = 0;
  std::string scenario;   // "" when none was given
  std::string faults;     // FaultOptions::Describe()
  bool passed = false;
  std::vector<std::string> failures;  // first few, readable
  uint64_t failure_count = 0;
  uint64_t trace_hash = 0;
  uint64_t trace_events = 0;

  double virtual_seconds = 0;     // simulated time at the end of the run
  double wall_seconds = 0;        // filled in by the caller (not part of the trace)
  double cpu_seconds = 0;         // likewise: process CPU time of the run
  bool converged = false;
  double convergence_seconds = -1;  // from the end of faults to identical state
  // Cold start: from the first start until every node listed all nodes as
  // live (polled every 100 ms during the warmup); -1 if not by its end.
  double members_complete_seconds = -1;
  double liveness_bound_seconds = 0;
  std::string last_divergence;    // the last difference seen while converging

  // Propagation of sample keys: seconds from the add until 99.9% / 100% of the
  // live nodes read it (samples that never got there are counted apart).
  uint32_t samples = 0, samples_reached = 0;
  double p999_median = -1, p999_max = -1, p100_median = -1;
  // The first keys of fresh filters (--fresh-filter-every): samples, those
  // that reached every live node, and seconds until they did (-1: none).
  uint32_t fresh_samples = 0, fresh_reached = 0;
  double fresh_p100_median = -1, fresh_p100_max = -1;

  uint64_t adds = 0, new_keys = 0, acked = 0, volatile_acks = 0, keys_checked_live = 0;
  // Contended keys (--contended-rate): keys drawn, adds made of them, keys
  // that more than one add answered new (duplicate-new: crawled twice), and
  // keys that no add answered new (a false positive on the first add).
  uint64_t contended_keys = 0, contended_adds = 0, duplicate_new_keys = 0, contended_never_new = 0;
  // Owner routing (--routed): duplicates among keys whose adds all reached
  // the owner from askers whose views held every node (a checker failure,
  // checkers.h BrokeRoutingPromise), keys decided by another node or locally after
  // a silent owner, and add latencies (virtual ms) for keys answered new and
  // present; -1 without routed adds.
  uint64_t stable_duplicate_new_keys = 0, routed_remote_keys = 0, routed_fallback_keys = 0;
  double routed_new_p50_ms = -1, routed_new_p99_ms = -1, routed_present_p50_ms = -1, routed_present_p99_ms = -1;
  // WAIT (--wait-every-ms): calls answered, answered below numreplicas, not
  // judged (a crash or rotation during them), and latency (virtual ms; -1: none).
  uint64_t waits = 0, waits_short = 0, waits_unjudged = 0;
  double wait_p50_ms = -1, wait_p99_ms = -1, wait_max_ms = -1;
  uint64_t wire_bytes = 0, frames_sent = 0, frames_delivered = 0;
  double bytes_per_new_key = 0;
  double delta_bytes_per_new_key = 0;  // only frames of type "delta" (dissemination)
  uint64_t delta_bits_sent = 0, distinct_bits = 0;
  double transmissions_per_bit = 0;  // compare with N-1 and F*N
  uint32_t fanout = 0;
  std::string dissemination;  // "flood" or "tree"
  uint64_t crashes = 0, restarts = 0, partitions = 0, rotations = 0, pauses = 0;
  // Accusations of the innocent, about a node that was up, not paused or
  // slow, and reachable (no partition) for the previous 10 s: suspicions
  // raised (distinct member and incarnation), the suspect events they caused
  // across the nodes, and dead events.
  uint64_t false_suspicions = 0, false_suspect_events = 0, false_deaths = 0;
  uint64_t paused_frames_dropped = 0;  // a paused node's receive buffer was full
  NetworkCounters network;
  std::map<std::string, uint64_t> rejected_by_reason;
  std::map<std::string, uint64_t> node_counters;  // summed over nodes and boots
  std::map<std::string, uint64_t> bytes_out_by_type;
  // The workload window [warmup, warmup + duration] alone: bytes by type,
  // all of them per new key, and membership bytes per node per second.
  double window_seconds = 0;
  double window_cpu_seconds = 0;   // process CPU time the window took, all threads (not part of the trace)
  double window_wall_seconds = 0;  // elapsed (monotonic) time it took (likewise)
  // --threads > 1: windows of node events run, and those run on the worker
  // threads (the others held one node's events); 0 with one thread. Only how
  // the run was computed, not what it did.
  uint64_t windows = 0, parallel_windows = 0;
  std::map<std::string, uint64_t> window_bytes_by_type;
  double window_bytes_per_new_key = 0;
  double membership_bytes_per_node_second = 0;
  // Plumtree's RMR: transmissions per bit / (N-1) - 1; 0 when each bit
  // reaches each node exactly once.
  double relative_message_redundancy = 0;
  std::map<std::string, uint64_t> frames_out_by_type;
  std::map<std::string, uint64_t> events_by_kind;
  std::map<std::string, uint64_t> final_epochs;  // per filter, once converged
  std::map<std::string, uint64_t> final_layers;  // sub-filters of that epoch (1 unless it scales)

  std::string replay_command;
};

std::string FormatSummary(const RunResult& r);   // multi-line, human readable
std::string FormatOneLine(const RunResult& r);   // "PASS seed=.. nodes=.. ..."
std::string FormatJson(const RunResult& r);      // one JSON object, one line

}  // namespace pollen::sim
