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
  std::erase_if(routed_pending, [i](const auto& entry) { return entry.first.first == i; });  // never answered
  if (!waits.empty()) waits[i] = NodeWaits{};  // its clients and their WAIT are gone
  s.up = false;
  s.paused = false;  // what it held is lost with it
  s.held.clear();
  s.slow_lag = Duration(0);
  ++s.pause_token;  // its pending Resume does nothing
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
  s.available_since = now;
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

void Simulator::Impl::RandomPause() {
  const FaultOptions& f = o.faults;
  if (!faults_on) return;
  uint32_t paused = 0;
  for (const SimNode& s : nodes) paused += (s.paused || s.slow_lag > Duration(0)) ? 1 : 0;
  if (paused * 4 < o.nodes) {
    const int i = RandomUp(fault_rng);  // never a paused one; a slow one is left as it is
    const Duration length = Uniform(fault_rng, f.pause_min, f.pause_max);
    // Half stop outright; half stay up but read every frame 0.5-2 s late
    // (a loaded event loop): their probes time out before the acks are read.
    const bool stop = fault_rng.Below(2) == 0;
    const Duration lag = Uniform(fault_rng, std::chrono::milliseconds(500), std::chrono::seconds(2));
    if (i >= 0 && nodes[i].slow_lag == Duration(0)) {
      SimNode& s = nodes[i];
      ++s.pause_token;
      if (stop) {
        s.paused = true;
      } else {
        s.slow_lag = lag;
      }
      ++r.pauses;
      trace.Mix(0x9a05);
      trace.Mix(static_cast<uint64_t>(i));
      trace.Mix(stop ? 0 : static_cast<uint64_t>(lag.count()));
      At(now + length, Ev::Kind::kResume, static_cast<uint32_t>(i), s.pause_token);
    }
  }
  At(now + Exponential(fault_rng, f.pause_gap), Ev::Kind::kRandomPause);
}

void Simulator::Impl::Resume(uint32_t i, uint64_t token) {
  SimNode& s = nodes[i];
  if (token != s.pause_token) return;  // a crash came in between
  if (s.slow_lag > Duration(0)) {
    s.slow_lag = Duration(0);  // frames already delayed keep their time
    s.available_since = now;
    return;
  }
  if (!s.up || !s.paused) return;  // crashed meanwhile
  s.paused = false;
  s.available_since = now;
  trace.Mix(0x4e5e);
  trace.Mix(i);
  // The worst order for the node: its overdue timers fire before it reads
  // the frames that waited (an answer to its probe among them).
  s.node->Tick(Local(i));
  Flush(i);
  std::vector<Ev> held = std::exchange(s.held, {});
  for (Ev& ev : held) Dispatch(ev);
  s.wake_at = kNever;
  ++s.wake_token;
  Reschedule(i, true);
}

void Simulator::Impl::CountAccusation(const node::Event& e) {
  constexpr Duration kQuiet = std::chrono::seconds(10);
  auto it = by_name.find(e.subject);
  if (it == by_name.end()) return;
  const SimNode& s = nodes[it->second];
  if (!s.up || s.paused || s.slow_lag > Duration(0) || now - s.available_since < kQuiet) return;
  if (net.partition_kind() != Network::PartitionKind::kNone || now - partition_ended < kQuiet) return;
  if (e.kind == node::Event::Kind::kMemberDead) {
    ++r.false_deaths;
    return;
  }
  ++r.false_suspect_events;
  if (false_accusations.insert({e.subject, e.count}).second) ++r.false_suspicions;
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
      partition_ended = now;
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
