// The liveness phase: faults stop, then all live nodes must converge.
#include "simulation/sim_impl.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pollen::sim {

void Simulator::Impl::FaultsEnd() {
  window_close_bytes = BytesOutByType();
  r.window_cpu_seconds = static_cast<double>(std::clock() - window_open_cpu) / CLOCKS_PER_SEC;
  r.window_wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_open_wall).count();
  faults_on = false;
  workload_on = false;
  NetworkOptions calm = o.network;
  calm.loss = calm.duplicate = calm.reorder = 0;
  net.set_options(calm);
  net.Heal();
  partition_ended = now;
  trace.Mix(0xfe4d);
  for (uint32_t i = 0; i < o.nodes; ++i)
    if (nodes[i].paused || nodes[i].slow_lag > Duration(0)) Resume(i, nodes[i].pause_token);
  for (uint32_t i = 0; i < o.nodes; ++i)
    if (!nodes[i].up) Restart(i);
  liveness_start = now;
  At(now, Ev::Kind::kConvergePoll);
}

Simulator::Impl::FilterStates Simulator::Impl::StateOf(uint32_t i) {
  FilterStates out;
  for (const node::FilterInfo& f : nodes[i].node->Filters(node::InfoParts::kDigests)) {
    std::vector<uint64_t> epochs, digests;
    for (const auto& g : f.generations) {
      epochs.push_back(g.epoch);
      digests.push_back(g.digest);
    }
    out.emplace_back(f.config.name, std::move(epochs), std::move(digests));
  }
  return out;
}

bool Simulator::Impl::Converged() {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < o.nodes; ++i)
    if (nodes[i].up) order.push_back(i);
  if (order.size() < 2) return true;
  auto last = std::find(order.begin(), order.end(), last_diff_node);
  if (last != order.end() && last != order.begin() + 1) std::iter_swap(order.begin() + 1, last);
  const FilterStates reference = StateOf(order[0]);
  for (size_t k = 1; k < order.size(); ++k) {
    const FilterStates mine = StateOf(order[k]);
    if (mine == reference) continue;
    last_diff_node = order[k];
    last_divergence = absl::StrFormat("node %d differs from node %d", order[k], order[0]);
    for (size_t f = 0; f < std::max(mine.size(), reference.size()); ++f) {
      if (f < mine.size() && f < reference.size() && mine[f] == reference[f]) continue;
      const auto& t = f < mine.size() ? mine[f] : reference[f];
      absl::StrAppend(&last_divergence, " in filter ", std::get<0>(t), " (epochs ",
                      absl::StrJoin(std::get<1>(t), "/"), " vs ",
                      f < reference.size() ? absl::StrJoin(std::get<1>(reference[f]), "/") : std::string("none"),
                      ")");
      break;
    }
    return false;
  }
  return true;
}

void Simulator::Impl::ConvergePoll() {
  if (Converged()) {
    r.converged = true;
    r.convergence_seconds = Sec(now - liveness_start);
    for (uint32_t i = 0; i < o.nodes; ++i) {
      if (!nodes[i].up) continue;
      for (const auto& [name, epochs, digests] : StateOf(i)) {
        r.final_epochs[name] = epochs.empty() ? 0 : epochs.back();
        r.final_layers[name] = static_cast<uint64_t>(std::count(epochs.begin(), epochs.end(), r.final_epochs[name]));
      }
      break;
    }
    for (uint32_t i = 0; i < o.nodes; ++i) {
      if (!nodes[i].up) continue;
      CheckNode(i);
      r.keys_checked_live += checker.CheckAckedEverywhere(i, *nodes[i].node, now);
    }
    done = true;
    return;
  }
  if (now - liveness_start >= o.liveness_bound) {
    checker.Fail(absl::StrFormat("liveness: not converged %.1fs after faults stopped: %s", Sec(o.liveness_bound),
                                 last_divergence));
    done = true;
    return;
  }
  At(now + o.converge_poll, Ev::Kind::kConvergePoll);
}

}  // namespace pollen::sim
