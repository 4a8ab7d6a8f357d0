// Parallel windows: pollen-sim's node events on several threads, with the
// serial loop's results bit for bit (same trace hash, same report).
//
// The argument. A frame sent at time t arrives no sooner than t + L, where L
// is the network's minimum latency. Take a window [start, end) of the agenda
// with end <= start + L that holds only node events (ticks and deliveries;
// any other event ends the window early). Then:
//  - every frame sent inside the window arrives at or after `end`, so no
//    event inside it depends on another node's event inside it;
//  - the only events created inside it for inside it are a node's own: its
//    next tick, or a frame it holds back (slow lag);
//  - a node event reads and writes only its own node and SimNode, plus
//    state that only non-node events change (network partitions, the other
//    node's up and boot), which stay fixed inside the window.
// So each node's events can run in their agenda order on any thread
// (RunStep), each recording what the shared state must learn (NodeStep);
// committing the steps in the serial loop's (time, sequence) order then
// replays exactly what the serial loop does: the same network draws, trace
// mixes, checker calls and sequence numbers. A step's own tick inside the
// window gets its sequence number at commit (EventQueue::TakeSeq), where the
// serial loop would have pushed it, so it is committed where the serial loop
// would have run it. Names: the nodes share two NamePools, which are frozen
// (pinned) first; see NamePool::Freeze.
//
// Not used with the WAIT workload: its answers are judged against other
// nodes' filters at commit, which a window may have moved on.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "simulation/sim_impl.h"
#include "simulation/worker_team.h"

namespace pollen::sim {

struct WindowRunner {
  explicit WindowRunner(int threads) : team(threads), lanes(static_cast<size_t>(threads)) {}

  // An event waiting to run inside the window, on its node's lane. `key`
  // orders a node's events: the agenda's sequence number, or kCreated plus
  // the created event's id (created events come after every agenda event of
  // the same time, as a later push would).
  static constexpr uint64_t kCreated = uint64_t{1} << 63;
  struct Pending {
    Time at{0};
    uint64_t key = 0;
    Ev ev;
  };
  // One thread's share of a window: the nodes it took.
  struct Lane {
    std::vector<Pending> node_queue;     // the node being run: a min-heap
    std::vector<NodeStep> steps;         // in the order they ran
    std::vector<uint32_t> created_step;  // created id -> index in steps
  };
  // A step waiting to commit: (at, seq) is its place in the serial order.
  struct CommitRef {
    Time at{0};
    uint64_t seq = 0;
    uint32_t lane = 0, step = 0;
  };

  WorkerTeam team;
  std::vector<Lane> lanes;
  std::vector<EventQueue<Ev>::Entry> gathered;  // the window's agenda events, in order
  std::vector<uint32_t> by_node;                // indices into gathered, grouped by node
  std::vector<uint32_t> node_starts;            // where each node's group starts in by_node, then its size
  std::atomic<uint32_t> next_node{0};           // the next group a lane takes
  std::vector<CommitRef> commit_order;          // a min-heap while the window commits
  uint64_t windows = 0, parallel_windows = 0;  // RunResult's
};

}  // namespace pollen::sim
