// Simulator: runs one seeded simulation of a Pollen cluster.
//
// N real node::Node instances talk through a simulated Network in virtual time
// (an EventQueue ordered by (time, sequence)); nothing reads the wall clock and
// all randomness comes from Rng streams forked from the run seed in a fixed
// order (network, faults, workload, node seeds, clocks, swarm). Run() drives:
//   warmup   nodes start (staggered) and join through the first three nodes;
//   faults   for `duration`: the workloads (crawl dedup, digest publishing,
//            operator rotations, tracked sample keys) and the enabled faults;
//   liveness faults stop, partitions heal, crashed nodes restart; the run
//            passes only if within `liveness_bound` every live node holds
//            identical state (equal GenerationInfo digests and epochs) for every
//            filter, and every durable acknowledged key reads present everywhere.
// The SafetyChecker runs throughout (every check_every, and after rotations).
//
// Durability model for crashes: "keep state" restarts from ExportSnapshots()
// taken at the crash instant, i.e. a node that persists every acknowledged add
// before replying (appendfsync always); "wipe" restarts empty, and the adds it
// alone acknowledged are no longer required anywhere.
#pragma once

#include <memory>

#include "simulation/run_result.h"
#include "simulation/sim_options.h"

namespace pollen::sim {

class Simulator {
 public:
  explicit Simulator(SimOptions options);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs to the end of the liveness phase (or the bound) and reports. Call once.
  RunResult Run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The options a seed runs with: `base` with the seed set, and in swarm mode
// the faults drawn from the seed.
SimOptions OptionsForSeed(const SimOptions& base, uint64_t seed);

// "pollen-sim --seed=S <flags>": the command that replays `options`.
std::string ReplayCommand(const SimOptions& options);

}  // namespace pollen::sim
