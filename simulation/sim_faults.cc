// Faults: crashes and restarts, partitions, scripted scenario steps.
#include "simulation/sim_impl.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pollen::sim {

void Simulator::Impl::Crash(uint32_t i, bool keep_state, Duration down) {
  SimNode& s = nodes[i];
  if (!s.up) return;
  s.has_persisted = keep_state;
  s.persisted.clear();
  if (keep_state) s.persisted = s.node->ExportSnapshots();
  AddCounters(s.carried, s.node->Counters());
  s.node.reset();
  s.up = false;
  ++s.wake_token;
  s.wake_at = kNever;
  net.ResetStreams(i);
  checker.OnCrash(i, keep_state);
  ++r.crashes;
  trace.Mix(0xc4a5);
  trace.Mix(i);
  trace.Mix(keep_state ? 1 : 0);
  At(now + down, Ev::Kind::kRestart, i);
}

void Simulator::Impl::Restart(uint32_t i) {
  SimNode& s = nodes[i];
  if (s.up) return;
  ++s.boot;
  if (!CreateNode(i)) return;
  s.changed_since_poll = true;
  if (s.has_persisted) {
    for (const auto& [name, bytes] : s.persisted) {
      if (auto st = s.node->ImportSnapshot(bytes); !st.ok()) {
        checker.Fail(absl::StrFormat("restart: node %d ImportSnapshot(%s) failed: %s", i, name, st.ToString()));
      }
    }
  }
  s.persisted.clear();
  s.has_persisted = false;
  for (const node::FilterInfo& info : s.node->Filters(node::InfoParts::kCounts)) checker.Observe(i, info, now);
  s.up = true;
  s.wake_at = kNever;
  ++r.restarts;
  trace.Mix(0x4e57);
  trace.Mix(i);
  s.node->Start(Local(i));
  Flush(i);
  Reschedule(i, false);
}

std::vector<uint8_t> Simulator::Impl::SidesByIndex(double fraction) {
  std::vector<uint8_t> side(o.nodes, 0);
  const uint32_t ones = static_cast<uint32_t>(std::lround(o.nodes * fraction));
  for (uint32_t i = o.nodes - std::min(ones, o.nodes); i < o.nodes; ++i) side[i] = 1;
  return side;
}

void Simulator::Impl::StartPartition(Network::PartitionKind kind, std::vector<uint8_t> side) {
  net.Partition(kind, std::move(side));
  ++r.partitions;
  trace.Mix(0x9a47);
  trace.Mix(static_cast<uint64_t>(kind));
}

void Simulator::Impl::RandomPartition() {
  const FaultOptions& f = o.faults;
  if (!faults_on) return;
  if (net.partition_kind() == Network::PartitionKind::kNone && o.nodes >= 2) {
    Network::PartitionKind kind = Network::PartitionKind::kSymmetric;
    if (f.one_way_partition && (!f.partition || fault_rng.Below(2))) kind = Network::PartitionKind::kOneWay;
    const double fraction = 0.2 + 0.6 * fault_rng.Unit();
    std::vector<uint8_t> side(o.nodes);
    for (auto& b : side) b = fault_rng.Unit() < fraction ? 1 : 0;
    side[fault_rng.Below(o.nodes)] = 0;  // both sides non-empty
    uint32_t other = static_cast<uint32_t>(fault_rng.Below(o.nodes));
    if (side[other] == 0 && std::count(side.begin(), side.end(), 1) == 0) side[other] = 1;
    if (std::count(side.begin(), side.end(), 0) == 0) side[0] = 0;
    StartPartition(kind, std::move(side));
    At(now + Uniform(fault_rng, f.partition_min, f.partition_max), Ev::Kind::kHeal);
  }
  At(now + Exponential(fault_rng, f.partition_gap), Ev::Kind::kRandomPartition);
}

void Simulator::Impl::RandomCrash() {
  const FaultOptions& f = o.faults;
  if (!faults_on) return;
  if ((o.nodes - up_count()) * 2 < o.nodes) {
    const int i = RandomUp(fault_rng);
    const bool keep = fault_rng.Unit() < f.keep_state;
    const Duration down = Uniform(fault_rng, f.down_min, f.down_max);
    if (i >= 0) Crash(static_cast<uint32_t>(i), keep, down);
  }
  At(now + Exponential(fault_rng, f.crash_gap), Ev::Kind::kRandomCrash);
}

void Simulator::Impl::Scripted(const ScriptedFault& f) {
  using K = ScriptedFault::Kind;
  if (!faults_on) return;
  switch (f.kind) {
    case K::kPartition:
      StartPartition(Network::PartitionKind::kSymmetric, SidesByIndex(f.fraction));
      break;
    case K::kOneWayPartition:
      StartPartition(Network::PartitionKind::kOneWay, SidesByIndex(f.fraction));
      break;
    case K::kHeal:
      net.Heal();
      trace.Mix(0x4ea1);
      break;
    case K::kCrash: {
      uint32_t count = std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(o.nodes * f.fraction)));
      for (uint32_t i = o.nodes; i-- > 0 && count > 0;) {
        if (!nodes[i].up) continue;
        Crash(i, f.keep_state, f.down);
        --count;
      }
      break;
    }
    case K::kRotate: {
      const uint32_t i = static_cast<uint32_t>(std::lround(f.fraction * (o.nodes - 1)));
      if (i < o.nodes && nodes[i].up) RotateAt(i, kCrawlFilter);
      break;
    }
  }
}

}  // namespace pollen::sim
