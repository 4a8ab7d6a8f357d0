// Runs a window of node events on the WorkerTeam and commits them in the
// serial loop's order (parallel_window.h has the argument).
#include "simulation/parallel_window.h"

#include <algorithm>
#include <functional>

namespace pollen::sim {

namespace {

// A window with one node's events runs on the caller alone. (The results
// are the same either way.)
constexpr uint32_t kMinParallelNodes = 2;

bool Earlier(const Time a_at, uint64_t a_key, const Time b_at, uint64_t b_key) {
  return a_at != b_at ? a_at < b_at : a_key < b_key;
}

}  // namespace

bool Simulator::Impl::ParallelWindowsAllowed() const { return o.threads > 1 && o.workload.wait_every.count() == 0; }

bool Simulator::Impl::RunWindow(Time hard_stop) {
  WindowRunner& w = *windows;
  const Duration lookahead = net.options().min_latency;
  if (lookahead <= Duration(0) || !IsNodeEvent(queue.Top().kind)) return false;
  const Time start = queue.NextTime();
  if (start > hard_stop) return false;  // the serial loop reports it
  Time end = std::min(start + lookahead, hard_stop + Duration(1));
  w.gathered.clear();
  while (!queue.empty() && queue.NextTime() < end) {
    if (!IsNodeEvent(queue.Top().kind)) {
      end = queue.NextTime();  // it runs after the window, serially
      break;
    }
    w.gathered.push_back(queue.Pop());
  }
  assert(!w.gathered.empty());
  const uint32_t lanes = static_cast<uint32_t>(w.lanes.size());
  // The window's events grouped by node (here, before the lanes run, so that
  // no lane reads an event another lane moves). Lanes take whole nodes, the
  // next one free, so that a lane with slow nodes takes fewer: which lane ran
  // a node does not matter to the commit.
  w.by_node.resize(w.gathered.size());
  for (uint32_t k = 0; k < w.gathered.size(); ++k) w.by_node[k] = k;
  std::stable_sort(w.by_node.begin(), w.by_node.end(),
                   [&](uint32_t a, uint32_t b) { return w.gathered[a].payload.node < w.gathered[b].payload.node; });
  w.node_starts.clear();
  for (uint32_t k = 0; k < w.by_node.size(); ++k) {
    if (k == 0 || w.gathered[w.by_node[k]].payload.node != w.gathered[w.by_node[k - 1]].payload.node) w.node_starts.push_back(k);
  }
  const uint32_t node_count = static_cast<uint32_t>(w.node_starts.size());
  w.node_starts.push_back(static_cast<uint32_t>(w.by_node.size()));
  w.next_node.store(0, std::memory_order_relaxed);
  for (WindowRunner::Lane& lane : w.lanes) {
    lane.steps.clear();
    lane.created_step.clear();
  }

  const std::function<void(int)> run_lane = [&](int lane_index) {
    WindowRunner::Lane& lane = w.lanes[static_cast<size_t>(lane_index)];
    auto later = [](const WindowRunner::Pending& a, const WindowRunner::Pending& b) {
      return Earlier(b.at, b.key, a.at, a.key);
    };
    for (;;) {
      const uint32_t g = w.next_node.fetch_add(1, std::memory_order_relaxed);
      if (g >= node_count) break;
      // The node's events, in (time, key) order; its own events created
      // inside the window join them.
      lane.node_queue.clear();
      for (uint32_t k = w.node_starts[g]; k < w.node_starts[g + 1]; ++k) {
        auto& entry = w.gathered[w.by_node[k]];
        lane.node_queue.push_back({entry.time, entry.seq, std::move(entry.payload)});
      }
      std::make_heap(lane.node_queue.begin(), lane.node_queue.end(), later);
      while (!lane.node_queue.empty()) {
        std::pop_heap(lane.node_queue.begin(), lane.node_queue.end(), later);
        WindowRunner::Pending p = std::move(lane.node_queue.back());
        lane.node_queue.pop_back();
        const uint32_t index = static_cast<uint32_t>(lane.steps.size());
        if (p.key >= WindowRunner::kCreated) lane.created_step[p.key - WindowRunner::kCreated] = index;
        NodeStep& step = lane.steps.emplace_back();
        step.window_key = p.key;
        RunStep(p.ev, p.at, step);
        if (step.push && step.push_at < end) {
          step.created = static_cast<int32_t>(lane.created_step.size());
          lane.created_step.push_back(0);  // set when it runs
          lane.node_queue.push_back({step.push_at, WindowRunner::kCreated + static_cast<uint64_t>(step.created),
                                     std::move(step.push_ev)});
          std::push_heap(lane.node_queue.begin(), lane.node_queue.end(), later);
        }
      }
    }
  };
  ++w.windows;
  if (lanes > 1 && node_count >= kMinParallelNodes) {
    ++w.parallel_windows;
    w.team.Run(run_lane);
  } else {
    run_lane(0);
  }

  // Commit in the serial loop's order: (time, sequence), where a created
  // event's sequence number is taken when its creator commits.
  using Ref = WindowRunner::CommitRef;
  auto later = [](const Ref& a, const Ref& b) { return Earlier(b.at, b.seq, a.at, a.seq); };
  std::vector<Ref>& order = w.commit_order;  // kept across windows (~30,000 at N=1000), not reallocated
  order.clear();
  for (uint32_t lane = 0; lane < lanes; ++lane) {
    const WindowRunner::Lane& l = w.lanes[lane];
    for (uint32_t k = 0; k < l.steps.size(); ++k) {
      if (l.steps[k].window_key < WindowRunner::kCreated) order.push_back({l.steps[k].at, l.steps[k].window_key, lane, k});
    }
  }
  std::make_heap(order.begin(), order.end(), later);
  while (!order.empty()) {
    std::pop_heap(order.begin(), order.end(), later);
    const Ref ref = order.back();
    order.pop_back();
    WindowRunner::Lane& l = w.lanes[ref.lane];
    NodeStep& step = l.steps[ref.step];
    CommitStepEffects(step);
    if (!step.push) continue;
    if (step.created >= 0) {
      order.push_back({step.push_at, queue.TakeSeq(), ref.lane, l.created_step[static_cast<size_t>(step.created)]});
      std::push_heap(order.begin(), order.end(), later);
    } else {
      At(step.push_at, std::move(step.push_ev));
    }
  }
  return true;
}

}  // namespace pollen::sim
