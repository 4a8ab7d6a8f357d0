// The event loop, node I/O and the run report.
#include "simulation/sim_impl.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "simulation/parallel_window.h"

namespace pollen::sim {

Simulator::Impl::Impl(SimOptions options)
    : o(std::move(options)),
      fault_rng(StreamRng(o.seed, kFaults)),
      work_rng(StreamRng(o.seed, kWorkload)),
      seed_rng(StreamRng(o.seed, kNodeSeeds)),
      net(o.nodes, NetworkWithFaults(o), StreamRng(o.seed, kNetwork)),
      checker(o.nodes, o.generations) {}

Simulator::Impl::~Impl() = default;

void Simulator::Impl::At(Time t, Ev ev) {
  if (!queue.Push(t, std::move(ev))) checker.Fail("simulator: event queue full");
}

void Simulator::Impl::At(Time t, Ev::Kind kind, uint32_t node, uint64_t token) {
  Ev ev;
  ev.kind = kind;
  ev.node = node;
  ev.token = token;
  At(t, std::move(ev));
}

uint32_t Simulator::Impl::up_count() const {
  uint32_t n = 0;
  for (const SimNode& s : nodes) n += s.up ? 1 : 0;
  return n;
}

int Simulator::Impl::RandomUp(Rng& rng) {
  std::vector<uint32_t> up;
  for (uint32_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].up && !nodes[i].paused) up.push_back(i);  // a paused node serves no client
  if (up.empty()) return -1;
  return static_cast<int>(up[rng.Below(up.size())]);
}

std::vector<node::FilterConfig> Simulator::Impl::Filters() const {
  std::vector<node::FilterConfig> filters;
  node::FilterConfig crawl;
  crawl.name = kCrawlFilter;
  crawl.capacity = o.capacity;
  crawl.fpr = o.fpr;
  crawl.generations = o.generations;
  crawl.expansion = o.expansion;
  crawl.routed = o.workload.routed;
  filters.push_back(crawl);
  for (uint32_t i = 0; i < std::min<uint32_t>(o.workload.digest_owners, o.nodes); ++i) {
    node::FilterConfig d;
    d.name = absl::StrCat("digest:", nodes[i].name);
    d.capacity = o.digest_capacity;
    d.fpr = o.fpr;
    d.generations = o.generations;
    d.scope = node::Scope::kDigest;
    d.owner = nodes[i].name;
    filters.push_back(d);
  }
  return filters;
}

bool Simulator::Impl::CreateNode(uint32_t i, bool warm) {
  SimNode& s = nodes[i];
  node::NodeConfig c;
  c.name = s.name;
  c.advertise = s.address;
  for (uint32_t j = 0; j < std::min<uint32_t>(3, o.nodes); ++j) c.seeds.push_back(nodes[j].address);
  for (size_t b = 0; b < c.secret.bytes.size(); ++b) c.secret.bytes[b] = static_cast<uint8_t>(0x5a ^ (b * 37));
  c.cluster_label = "pollen-sim";
  c.rng_seed = seed_rng.Next();
  c.gossip_interval = o.gossip_interval;
  c.fanout = o.fanout;
  c.dissemination = o.dissemination;
  c.tree_push_delay = o.tree_push_delay;
  c.tree_push_gap = o.tree_push_gap;
  c.tree_compact_refs = o.compact_refs;
  c.tree_implicit_sender = o.implicit_sender;
  c.tree_filter_aliases = o.filter_aliases;
  c.tree_bare_pushes = o.bare_pushes;
  c.tree_compact_seal = o.compact_seal;
  c.compact_membership = o.compact_membership;
  c.probe_interval = o.probe_interval;
  c.lifeguard = o.lifeguard;
  c.reliable_fallback_ping = o.reliable_ping;
  c.member_names = member_names;  // one copy of each name (frozen for --threads: Setup)
  c.member_addresses = member_addresses;
  if (warm) c.warm_members = warm_members;
  c.route_timeout = o.workload.route_timeout;
  c.anti_entropy_interval = o.anti_entropy_interval;
  c.anti_entropy_max_interval = o.anti_entropy_max_interval;
  c.refresh_unread_members = false;  // nothing here reads Members()
  c.filters = Filters();
  auto created = node::Node::Create(std::move(c));
  if (!created.ok()) {
    checker.Fail(absl::StrCat("node ", s.name, ": Create failed: ", created.status().ToString()));
    return false;
  }
  s.node = std::move(*created);
  return true;
}

void Simulator::Impl::Flush(uint32_t i) {
  NodeOutput out;
  Collect(i, out);
  CommitOutput(i, out);
}

void Simulator::Impl::Collect(uint32_t i, NodeOutput& out) {
  node::Node& n = *nodes[i].node;
  out.outgoing = n.TakeOutgoing();
  out.routed = n.TakeRoutedAdds();
  out.checks = n.TakePeerChecks();
  out.events = n.TakeEvents();
  for (size_t k = 0; k < out.events.size(); ++k) {
    const node::Event& e = out.events[k];
    if (e.kind == node::Event::Kind::kFilterCreated || e.kind == node::Event::Kind::kFilterDiscarded) {
      if (auto info = n.Info(e.subject, node::InfoParts::kCounts); info.ok()) out.observed.emplace_back(k, std::move(*info));
    }
  }
}

void Simulator::Impl::CommitOutput(uint32_t i, NodeOutput& out) {
  const SimNode& s = nodes[i];
  for (node::Outgoing& frame : out.outgoing) {
    auto to = by_address.find(frame.to);
    r.wire_bytes += frame.bytes.size();
    ++r.frames_sent;
    if (to == by_address.end()) {
      ++unroutable[frame.to];
      continue;
    }
    const Arrivals arrivals = net.Plan(i, to->second, frame.channel, now);
    for (size_t a = 0; a < arrivals.size(); ++a) {
      Ev ev;
      ev.kind = Ev::Kind::kDeliver;
      ev.node = to->second;
      ev.from = i;
      ev.token = nodes[to->second].boot;
      ev.from_boot = s.boot;
      ev.channel = frame.channel;
      ev.bytes = (a + 1 == arrivals.size()) ? std::move(frame.bytes) : frame.bytes;
      At(arrivals[a], std::move(ev));
    }
  }
  for (node::RoutedAddResult& done : out.routed) AddAnswered(i, std::move(done));
  for (node::PeerCheckResult& done : out.checks) WaitAnswered(i, std::move(done));
  size_t observed = 0;
  for (size_t k = 0; k < out.events.size(); ++k) {
    const node::Event& e = out.events[k];
    trace.Mix(0xe7e7);
    trace.Mix(i);
    trace.Mix(static_cast<uint64_t>(now.count()));
    trace.Mix(static_cast<uint64_t>(e.kind));
    trace.Mix(e.subject);
    trace.Mix(e.detail);
    trace.Mix(e.count);
    ++r.events_by_kind[EventKindName(e.kind)];
    if (e.kind == node::Event::Kind::kMemberSuspect || e.kind == node::Event::Kind::kMemberDead) CountAccusation(e);
    if (e.kind == node::Event::Kind::kEpochAdvanced) checker.OnEpoch(i, e.subject, e.count, now);
    if (e.kind == node::Event::Kind::kFilterDiscarded) checker.OnReplaced(i, e.subject);
    if (observed < out.observed.size() && out.observed[observed].first == k) {
      checker.Observe(i, out.observed[observed].second, now);
      ++observed;
    }
  }
}

bool Simulator::Impl::NextTick(uint32_t i, bool after_tick, Time at, Time& wake, uint64_t& token) {
  SimNode& s = nodes[i];
  if (!s.up) return false;
  const Time local = s.clock.ToLocal(at);
  const Time wake_local = s.node->NextWakeup();
  Time want;
  if (wake_local == kNever || wake_local - local > kMaxTickGap * 2) {
    want = at + kMaxTickGap;
  } else {
    want = std::min(s.clock.ToVirtual(wake_local), at + kMaxTickGap);
  }
  want = std::max(want, after_tick ? at + kMinTickGap : at);
  if (want >= s.wake_at) return false;
  s.wake_at = want;
  wake = want;
  token = ++s.wake_token;
  return true;
}

void Simulator::Impl::Reschedule(uint32_t i, bool after_tick) {
  Time wake;
  uint64_t token;
  if (NextTick(i, after_tick, now, wake, token)) At(wake, Ev::Kind::kTick, i, token);
}

void Simulator::Impl::AfterClientOp(uint32_t i) {
  Flush(i);
  Reschedule(i, false);
}

bool Simulator::Impl::ClientAdd(uint32_t i, const std::string& filter, const std::string& key, int64_t contended_key) {
  const uint64_t epoch = checker.CurrentEpoch(i, filter);
  if (o.workload.routed && filter == kCrawlFilter) {
    const std::string_view view = key;
    auto ticket = nodes[i].node->BeginAdd(filter, std::span<const std::string_view>(&view, 1), Local(i));
    nodes[i].changed_since_poll = true;
    trace.Mix(0x40a7);
    trace.Mix(i);
    trace.Mix(key);
    if (!ticket.ok()) {
      checker.Fail(absl::StrFormat("add failed: node %d filter %s: %s", i, filter, ticket.status().ToString()));
      return false;
    }
    const bool full_view = up_count() == nodes.size() && nodes[i].node->LiveMemberCount() == nodes.size();
    routed_pending[{i, *ticket}] = RoutedPending{filter, key, epoch, contended_key, now, full_view};
    AfterClientOp(i);  // takes the answer at once when no other node was asked
    return true;
  }
  auto added = nodes[i].node->Add(filter, key);
  nodes[i].changed_since_poll = true;
  trace.Mix(0xadd);
  trace.Mix(i);
  trace.Mix(key);
  if (!added.ok()) {
    checker.Fail(absl::StrFormat("add failed: node %d filter %s: %s", i, filter, added.status().ToString()));
    return false;
  }
  trace.Mix(*added ? 1 : 0);
  ++r.adds;
  if (*added) ++r.new_keys;
  checker.OnAck(i, filter, key, epoch);
  if (!waits.empty() && filter == kCrawlFilter) waits[i].added.push_back(key);
  if (contended_key >= 0) ContendedAnswer(static_cast<uint64_t>(contended_key), *added);
  AfterClientOp(i);
  return true;
}

void Simulator::Impl::AddAnswered(uint32_t i, node::RoutedAddResult done) {
  auto it = routed_pending.find({i, done.ticket});
  if (it == routed_pending.end()) {
    checker.Fail(absl::StrFormat("node %d answered unknown add ticket %d", i, done.ticket));
    return;
  }
  const RoutedPending p = std::move(it->second);
  routed_pending.erase(it);
  if (!done.status.ok() || done.added.size() != 1) {
    checker.Fail(absl::StrFormat("routed add failed: node %d key %s: %s", i, p.key, done.status.ToString()));
    return;
  }
  const bool added = done.added[0];
  trace.Mix(0x40a8);
  trace.Mix(i);
  trace.Mix(added ? 1 : 0);
  ++r.adds;
  if (added) ++r.new_keys;
  r.routed_remote_keys += done.remote_keys;
  r.routed_fallback_keys += done.fallback_keys;
  (added ? routed_new_latency : routed_present_latency).push_back(now - p.began);
  checker.OnAck(i, p.filter, p.key, p.epoch);
  if (!waits.empty() && p.filter == kCrawlFilter) waits[i].added.push_back(p.key);
  if (p.contended_key >= 0) {
    ContendedAnswer(static_cast<uint64_t>(p.contended_key), added, done.fallback_keys > 0, !p.full_view);
  }
}

void Simulator::Impl::RotateAt(uint32_t i, const std::string& filter) {
  auto st = nodes[i].node->Rotate(filter, Local(i));
  trace.Mix(0x4074);
  trace.Mix(i);
  trace.Mix(filter);
  if (!st.ok()) {
    checker.Fail(absl::StrFormat("rotate failed: node %d filter %s: %s", i, filter, st.ToString()));
    return;
  }
  ++r.rotations;
  CheckNode(i);
  AfterClientOp(i);
}

void Simulator::Impl::CheckNode(uint32_t i, bool observe) {
  const node::Node& n = *nodes[i].node;
  if (observe)
    for (const node::FilterInfo& info : n.Filters(node::InfoParts::kCounts)) checker.Observe(i, info, now);
  checker.CheckAcked(i, n, now);
}

void Simulator::Impl::Setup() {
  Rng clock_rng = StreamRng(o.seed, kClocks);
  nodes.resize(o.nodes);
  for (uint32_t i = 0; i < o.nodes; ++i) {
    SimNode& s = nodes[i];
    s.name = absl::StrFormat("node-%04d", i);
    s.address = absl::StrFormat("sim-%04d:7946", i);
    by_address[s.address] = i;
    by_name[s.name] = i;
    if (o.faults.clock_drift) {
      s.clock.offset = Uniform(clock_rng, Duration(0), o.faults.max_offset);
      s.clock.drift = (clock_rng.Unit() * 2 - 1) * o.faults.max_drift;
    } else {
      s.clock.offset = std::chrono::seconds(1);  // any origin; keeps local times positive
    }
    // Staggered start over the first second; the seeds first. A warm start
    // is all at once: a node listed alive must be up.
    const Duration start = i < 3 ? Duration(i) : Uniform(work_rng, Duration(0), std::chrono::seconds(1));
    At(o.warm_start ? Duration(0) : start, Ev::Kind::kStart, i);
  }
  if (ParallelWindowsAllowed()) {
    // The nodes share the name pools across threads: pin every name and
    // address they will use (one reference each, never released), then freeze.
    for (const SimNode& s : nodes) {
      member_names->Intern(s.name);
      member_addresses->Intern(s.address);
    }
    member_names->Freeze();
    member_addresses->Freeze();
    windows = std::make_unique<WindowRunner>(static_cast<int>(o.threads));
  }
  if (o.warm_start) {
    auto members = std::make_shared<std::vector<std::pair<std::string, node::Address>>>();
    for (const SimNode& s : nodes) members->emplace_back(s.name, s.address);
    warm_members = std::move(members);
    warm_starts_left = o.nodes;
  }
  const Time w = o.warmup;
  faults_end = w + o.duration;
  const WorkloadOptions& wl = o.workload;
  if (wl.crawl_adds_per_sec > 0) At(w, Ev::Kind::kCrawlAdd);
  if (wl.contended_keys_per_sec > 0) At(w, Ev::Kind::kContendedKey);
  if (wl.fresh_filter_every.count() > 0) At(w, Ev::Kind::kFreshFilter);
  if (wl.wait_every.count() > 0) {
    waits.resize(o.nodes);
    At(w + wl.wait_every, Ev::Kind::kWait);
  }
  for (uint32_t k = 0; k < std::min<uint32_t>(wl.digest_owners, o.nodes); ++k) {
    if (wl.digest_adds_per_sec > 0) At(w, Ev::Kind::kDigestAdd, k);
    if (wl.digest_rotate_every.count() > 0) At(w + wl.digest_rotate_every, Ev::Kind::kDigestRotate, k);
  }
  if (wl.operator_rotate_every.count() > 0)
    At(w + Exponential(work_rng, wl.operator_rotate_every), Ev::Kind::kOperatorRotate);
  At(w, Ev::Kind::kSample);
  At(w, Ev::Kind::kWindowStart);
  if (kMembersPollEvery <= o.warmup) At(kMembersPollEvery, Ev::Kind::kMembersPoll);
  const FaultOptions& f = o.faults;
  if (f.partition || f.one_way_partition) At(w + Exponential(fault_rng, f.partition_gap), Ev::Kind::kRandomPartition);
  if (f.crash) At(w + Exponential(fault_rng, f.crash_gap), Ev::Kind::kRandomCrash);
  if (f.pause) At(w + Exponential(fault_rng, f.pause_gap), Ev::Kind::kRandomPause);
  for (size_t k = 0; k < f.scripted.size(); ++k) At(w + f.scripted[k].at, Ev::Kind::kScripted, 0, k);
  At(o.check_every, Ev::Kind::kCheck);
  At(faults_end, Ev::Kind::kFaultsEnd);
}

void Simulator::Impl::RunStep(Ev& ev, Time at, NodeStep& step) {
  using Outcome = NodeStep::Outcome;
  step.at = at;
  step.node = ev.node;
  SimNode& s = nodes[ev.node];
  const Time local = s.clock.ToLocal(at);
  if (ev.kind == Ev::Kind::kTick) {
    if (!s.up || ev.token != s.wake_token) return;
    s.wake_at = kNever;
    if (s.paused) return;  // Resume ticks it
    step.outcome = Outcome::kTicked;
    s.node->Tick(local);
    Collect(ev.node, step.out);
    step.push = NextTick(ev.node, true, at, step.push_at, step.push_ev.token);
    step.push_ev.kind = Ev::Kind::kTick;
    step.push_ev.node = ev.node;
    return;
  }
  assert(ev.kind == Ev::Kind::kDeliver);
  const SimNode& from = nodes[ev.from];
  if (!s.up || ev.token != s.boot) return;  // host down or rebooted: frame lost
  if (ev.channel == Channel::kStream && (!from.up || from.boot != ev.from_boot)) return;  // connection broken
  if (!net.Reachable(ev.from, ev.node)) {
    step.outcome = Outcome::kPartitionDropped;  // in flight when the partition began
    return;
  }
  if (s.slow_lag > Duration(0) && !ev.lagged) {
    ev.lagged = true;
    step.outcome = Outcome::kLagged;
    step.push = true;
    step.push_at = at + s.slow_lag;
    step.push_ev = std::move(ev);
    return;
  }
  if (s.paused) {
    // A receive buffer: datagrams past its bound are dropped, as the
    // kernel would; a stream's frames wait (TCP's window holds them).
    constexpr size_t kMaxHeldDatagrams = 4096;
    const size_t held_datagrams = static_cast<size_t>(std::count_if(
        s.held.begin(), s.held.end(), [](const Ev& h) { return h.channel == Channel::kDatagram; }));
    if (ev.channel == Channel::kDatagram && held_datagrams >= kMaxHeldDatagrams) {
      step.outcome = Outcome::kPausedDropped;
      return;
    }
    step.outcome = Outcome::kHeld;
    s.held.push_back(std::move(ev));
    return;
  }
  step.outcome = Outcome::kDelivered;
  step.from = ev.from;
  step.channel = ev.channel;
  step.bytes_hash = StableHash(ev.bytes);
  s.changed_since_poll = true;
  if (ev.channel == Channel::kStream) {
    s.node->HandleStreamFrame(from.address, ev.bytes, local);
  } else {
    s.node->HandleDatagram(from.address, ev.bytes, local);
  }
  Collect(ev.node, step.out);
  step.push = NextTick(ev.node, false, at, step.push_at, step.push_ev.token);
  step.push_ev.kind = Ev::Kind::kTick;
  step.push_ev.node = ev.node;
}

void Simulator::Impl::CommitStepEffects(NodeStep& step) {
  using Outcome = NodeStep::Outcome;
  now = step.at;
  switch (step.outcome) {
    case Outcome::kNothing:
    case Outcome::kHeld:
    case Outcome::kLagged:
      return;
    case Outcome::kPartitionDropped:
      net.CountPartitionDrop();
      return;
    case Outcome::kPausedDropped:
      ++r.paused_frames_dropped;
      return;
    case Outcome::kDelivered:
      trace.Mix(step.from);
      trace.Mix(step.node);
      trace.Mix(static_cast<uint64_t>(now.count()));
      trace.Mix(static_cast<uint64_t>(step.channel));
      trace.Mix(step.bytes_hash);
      ++r.frames_delivered;
      break;
    case Outcome::kTicked:
      break;
  }
  CommitOutput(step.node, step.out);
}

void Simulator::Impl::CommitStep(NodeStep& step) {
  assert(step.created < 0);
  CommitStepEffects(step);
  if (step.push) At(step.push_at, std::move(step.push_ev));
}

void Simulator::Impl::Dispatch(Ev& ev) {
  switch (ev.kind) {
    case Ev::Kind::kTick:
    case Ev::Kind::kDeliver: {
      NodeStep step;
      RunStep(ev, now, step);
      CommitStep(step);
      return;
    }
    case Ev::Kind::kStart: {
      SimNode& s = nodes[ev.node];
      const bool created = CreateNode(ev.node, warm_members != nullptr);
      // Each node holds the list until its Start: drop ours after the last.
      if (warm_members != nullptr && --warm_starts_left == 0) warm_members.reset();
      if (!created) return;
      for (const node::FilterInfo& info : s.node->Filters(node::InfoParts::kCounts)) {
        checker.Observe(ev.node, info, now);
      }
      s.up = true;
      s.available_since = now;
      s.node->Start(Local(ev.node));
      Flush(ev.node);
      Reschedule(ev.node, false);
      return;
    }
    case Ev::Kind::kRestart: Restart(ev.node); return;
    case Ev::Kind::kHeal:
      if (faults_on) {
        net.Heal();
        partition_ended = now;
        trace.Mix(0x4ea1);
      }
      return;
    case Ev::Kind::kScripted: Scripted(o.faults.scripted[ev.token]); return;
    case Ev::Kind::kRandomPartition: RandomPartition(); return;
    case Ev::Kind::kRandomCrash: RandomCrash(); return;
    case Ev::Kind::kRandomPause: RandomPause(); return;
    case Ev::Kind::kResume: Resume(ev.node, ev.token); return;
    case Ev::Kind::kCrawlAdd: CrawlAdd(); return;
    case Ev::Kind::kContendedKey: ContendedKey(); return;
    case Ev::Kind::kContendedAdd: ContendedAdd(ev.node, ev.token); return;
    case Ev::Kind::kWait: WaitAt(); return;
    case Ev::Kind::kDigestAdd: DigestAdd(ev.node); return;
    case Ev::Kind::kDigestRotate: DigestRotate(ev.node); return;
    case Ev::Kind::kOperatorRotate: OperatorRotate(); return;
    case Ev::Kind::kSample: AddSample(); return;
    case Ev::Kind::kFreshFilter: FreshFilter(); return;
    case Ev::Kind::kPoll: Poll(); return;
    case Ev::Kind::kCheck: Check(); return;
    case Ev::Kind::kFaultsEnd: FaultsEnd(); return;
    case Ev::Kind::kConvergePoll: ConvergePoll(); return;
    case Ev::Kind::kWindowStart:
      window_open_bytes = BytesOutByType();
      window_open_cpu = std::clock();  // reported only, never traced
      window_open_wall = std::chrono::steady_clock::now();  // likewise
      return;
    case Ev::Kind::kMembersPoll: MembersPoll(); return;
  }
}

// The cold start: the first moment every node is up and lists every node
// as live. Polled, not traced (it reads, never changes, a node); stops once
// seen or when the faults begin.
void Simulator::Impl::MembersPoll() {
  bool complete = up_count() == o.nodes;
  for (uint32_t i = 0; complete && i < o.nodes; ++i) complete = nodes[i].node->LiveMemberCount() == o.nodes;
  if (complete) {
    r.members_complete_seconds = Sec(now);
    return;
  }
  const bool bounded = o.join_bound.count() > 0;
  if (bounded && now >= o.join_bound && !join_bound_failed) {
    join_bound_failed = true;  // polled on, so the summary still says when it ended
    checker.Fail(absl::StrFormat("cold start: not every node up and listing all %d live by %.1fs", o.nodes,
                                 Sec(o.join_bound)));
  }
  Time next = now + kMembersPollEvery;
  if (bounded && now < o.join_bound && next > o.join_bound) next = o.join_bound;  // judged at the bound itself
  if (next <= o.warmup) At(next, Ev::Kind::kMembersPoll);
}

RunResult Simulator::Impl::Run() {
  Setup();
  const Time hard_stop = faults_end + o.liveness_bound + std::chrono::seconds(10);
  while (!done && !queue.empty()) {
    if (windows != nullptr && RunWindow(hard_stop)) continue;
    auto entry = queue.Pop();
    now = entry.time;
    if (now > hard_stop) {
      checker.Fail("simulator: passed the hard stop without a liveness verdict");
      break;
    }
    Dispatch(entry.payload);
  }
  if (!done) checker.Fail("simulator: ran out of events before the liveness verdict");
  Finish();
  return r;
}

std::map<std::string, uint64_t> Simulator::Impl::BytesOutByType() {
  std::map<std::string, uint64_t> out;
  for (SimNode& s : nodes) {
    for (const auto& [type, bytes] : s.carried.bytes_out_by_type) out[type] += bytes;
    if (!s.up) continue;
    for (const auto& [type, bytes] : s.node->Counters().bytes_out_by_type) out[type] += bytes;
  }
  return out;
}

void Simulator::Impl::Finish() {
  r.seed = o.seed;
  r.nodes = o.nodes;
  for (size_t k = 0; k < contended.size(); ++k) {
    const Contended& c = contended[k];
    ++r.contended_keys;
    r.contended_adds += c.adds;
    if (c.answered_new > 1) {
      ++r.duplicate_new_keys;
      // A broken promise, not a measured rate (checkers.h).
      if (o.workload.routed && BrokeRoutingPromise(RoutedKeyAnswers{c.answered_new, c.fell_back, c.partial_view})) {
        ++r.stable_duplicate_new_keys;
        checker.Fail(absl::StrFormat("contended-%d answered new %d times with full views and no fallback (owner routing)", k,
                                     c.answered_new));
      }
    }
    if (c.adds > 0 && c.answered_new == 0) ++r.contended_never_new;
  }
  auto percentile_ms = [](std::vector<Duration> v, double q) {
    if (v.empty()) return -1.0;
    const size_t at = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(at), v.end());
    return Sec(v[at]) * 1e3;
  };
  r.routed_new_p50_ms = percentile_ms(routed_new_latency, 0.5);
  r.routed_new_p99_ms = percentile_ms(routed_new_latency, 0.99);
  r.routed_present_p50_ms = percentile_ms(routed_present_latency, 0.5);
  r.routed_present_p99_ms = percentile_ms(routed_present_latency, 0.99);
  r.wait_p50_ms = percentile_ms(wait_latency, 0.5);
  r.wait_p99_ms = percentile_ms(wait_latency, 0.99);
  r.wait_max_ms = percentile_ms(wait_latency, 1.0);
  r.scenario = o.scenario;
  r.faults = o.faults.Describe();
  r.fanout = o.fanout;
  r.dissemination = o.dissemination == node::NodeConfig::Dissemination::kTree ? "tree" : "flood";
  r.virtual_seconds = Sec(now);
  r.liveness_bound_seconds = Sec(o.liveness_bound);
  r.last_divergence = last_divergence;
  r.network = net.counters();
  if (windows != nullptr) {
    r.windows = windows->windows;
    r.parallel_windows = windows->parallel_windows;
  }
  node::NodeCounters total;
  for (SimNode& s : nodes) {
    AddCounters(total, s.carried);
    if (s.up) AddCounters(total, s.node->Counters());
  }
  r.delta_bits_sent = total.delta_bits_sent;
  r.rejected_by_reason = total.rejected_by_reason;
  r.node_counters = {{"adds", total.adds},
                     {"delta_bits_received", total.delta_bits_received},
                     {"anti_entropy_runs", total.anti_entropy_runs},
                     {"ranges_repaired", total.ranges_repaired},
                     {"anti_entropy_continued", total.anti_entropy_continued},
                     {"anti_entropy_resumed", total.anti_entropy_resumed},
                     {"epochs_advanced", total.epochs_advanced},
                     {"filters_replaced", total.filters_replaced},
                     {"delta_overflows", total.delta_overflows},
                     {"stale_deltas", total.stale_deltas},
                     {"unknown_filter", total.unknown_filter},
                     {"held_deltas", total.held_deltas},
                     {"held_deltas_refused", total.held_deltas_refused},
                     {"held_deltas_released", total.held_deltas_released},
                     {"held_deltas_dropped", total.held_deltas_dropped},
                     {"tree_parent_changes", total.tree_parent_changes},
                     {"tree_resends", total.tree_resends}};
  r.bytes_out_by_type = total.bytes_out_by_type;
  r.frames_out_by_type = total.frames_out_by_type;
  r.distinct_bits = checker.distinct_bits();
  r.transmissions_per_bit =
      r.distinct_bits ? static_cast<double>(r.delta_bits_sent) / static_cast<double>(r.distinct_bits) : 0;
  r.bytes_per_new_key = r.new_keys ? static_cast<double>(r.wire_bytes) / static_cast<double>(r.new_keys) : 0;
  // Dissemination frames: "gossip" (packed rounds), "tree" (tree mode) and any single "delta" frames.
  uint64_t dissemination_bytes = 0;
  for (const char* type : {"delta", "gossip", "tree"}) {
    if (auto d = r.bytes_out_by_type.find(type); d != r.bytes_out_by_type.end()) dissemination_bytes += d->second;
  }
  if (r.new_keys > 0) {
    r.delta_bytes_per_new_key = static_cast<double>(dissemination_bytes) / static_cast<double>(r.new_keys);
  }
  // The workload window alone (see window_open_bytes).
  r.window_seconds = Sec(o.duration);
  uint64_t window_total = 0;
  for (const auto& [type, bytes] : window_close_bytes) {
    auto open = window_open_bytes.find(type);
    const uint64_t in_window = bytes - (open == window_open_bytes.end() ? 0 : open->second);
    r.window_bytes_by_type[type] = in_window;
    window_total += in_window;
  }
  if (r.new_keys > 0) r.window_bytes_per_new_key = static_cast<double>(window_total) / static_cast<double>(r.new_keys);
  if (r.window_seconds > 0 && o.nodes > 0) {
    auto m = r.window_bytes_by_type.find("membership");
    r.membership_bytes_per_node_second =
        m == r.window_bytes_by_type.end() ? 0 : static_cast<double>(m->second) / (o.nodes * r.window_seconds);
  }
  if (o.nodes > 1 && r.transmissions_per_bit > 0) {
    r.relative_message_redundancy = r.transmissions_per_bit / static_cast<double>(o.nodes - 1) - 1;
  }
  for (const auto& [address, count] : unroutable) {
    checker.Fail(absl::StrFormat("node sent %d frames to unknown address '%s'", count, address));
  }
  std::vector<double> t999, t100, fresh_t100;
  for (const Sample& s : samples) {
    if (s.fresh) {
      ++r.fresh_samples;
      if (s.t100.count() >= 0) fresh_t100.push_back(Sec(s.t100));
      const bool late = s.t100.count() < 0 || s.t100 > o.workload.fresh_bound;
      if (o.workload.fresh_bound.count() > 0 && late) {
        checker.Fail(absl::StrFormat("fresh filter %s: key %s reached every live node %s after its add (bound %.1fs)",
                                     s.filter, s.key, s.t100.count() < 0 ? std::string("never") : absl::StrFormat("%.2fs", Sec(s.t100)),
                                     Sec(o.workload.fresh_bound)));
      }
      continue;
    }
    if (s.t999.count() >= 0) t999.push_back(Sec(s.t999));
    if (s.t100.count() >= 0) t100.push_back(Sec(s.t100));
  }
  std::sort(fresh_t100.begin(), fresh_t100.end());
  r.fresh_reached = static_cast<uint32_t>(fresh_t100.size());
  if (!fresh_t100.empty()) {
    r.fresh_p100_median = fresh_t100[fresh_t100.size() / 2];
    r.fresh_p100_max = fresh_t100.back();
  }
  r.samples = static_cast<uint32_t>(samples.size()) - r.fresh_samples;
  r.samples_reached = static_cast<uint32_t>(t999.size());
  std::sort(t999.begin(), t999.end());
  std::sort(t100.begin(), t100.end());
  if (!t999.empty()) {
    r.p999_median = t999[t999.size() / 2];
    r.p999_max = t999.back();
  }
  if (!t100.empty()) r.p100_median = t100[t100.size() / 2];
  r.acked = checker.acked();
  r.volatile_acks = checker.volatile_acks();
  r.failures = checker.failures();
  r.failure_count = checker.failure_count();
  r.passed = r.failure_count == 0 && r.converged;
  r.trace_hash = trace.value();
  r.trace_events = trace.count();
  r.replay_command = ReplayCommand(o);
}

Simulator::Simulator(SimOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Simulator::~Simulator() = default;
RunResult Simulator::Run() { return impl_->Run(); }

SimOptions OptionsForSeed(const SimOptions& base, uint64_t seed) {
  SimOptions o = base;
  o.seed = seed;
  if (o.swarm) {
    Rng swarm = StreamRng(seed, kSwarm);
    ApplySwarm(swarm, o);
  }
  return o;
}

std::string ReplayCommand(const SimOptions& options) {
  std::string cmd = absl::StrCat("pollen-sim --seed=", options.seed);
  for (const std::string& a : options.replay_args) absl::StrAppend(&cmd, " ", a);
  return cmd;
}

}  // namespace pollen::sim
