// Workloads (crawl dedup, digest publishing, rotations, sample keys) and the
// periodic safety checks.
#include "simulation/sim_impl.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pollen::sim {

void Simulator::Impl::CrawlAdd() {
  if (!workload_on) return;
  const int i = RandomUp(work_rng);
  if (i >= 0) {
    std::string url;
    if (!crawl_history.empty() && work_rng.Unit() < o.workload.repeat_fraction) {
      url = crawl_history[work_rng.Below(crawl_history.size())];
    } else {
      url = absl::StrCat("https://site", work_rng.Below(1000), ".example/page/", url_counter++);
      if (crawl_history.size() < 100000) crawl_history.push_back(url);
    }
    ClientAdd(static_cast<uint32_t>(i), kCrawlFilter, url);
  }
  At(now + Exponential(work_rng, PerSecond(o.workload.crawl_adds_per_sec)), Ev::Kind::kCrawlAdd);
}

void Simulator::Impl::ContendedKey() {
  if (!workload_on) return;
  const WorkloadOptions& wl = o.workload;
  std::vector<uint32_t> up;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].up && !nodes[i].paused) up.push_back(i);
  }
  // A key whose adds could fall after the workload window is not drawn: it
  // would count with fewer adds than asked, biasing the rate low.
  if (!up.empty() && now + wl.contended_spread <= faults_end) {
    const uint64_t key = contended.size();
    contended.emplace_back();
    for (size_t pick : node::PickDistinct(work_rng, up.size(), std::min<size_t>(wl.contended_copies, up.size()))) {
      At(now + Uniform(work_rng, Duration(0), wl.contended_spread), Ev::Kind::kContendedAdd, up[pick], key);
    }
  }
  At(now + Exponential(work_rng, PerSecond(wl.contended_keys_per_sec)), Ev::Kind::kContendedKey);
}

void Simulator::Impl::ContendedAdd(uint32_t i, uint64_t key) {
  assert(key < contended.size());
  // A node that went down or paused since the key was drawn: that crawler is gone.
  if (!workload_on || !nodes[i].up || nodes[i].paused) return;
  ClientAdd(i, kCrawlFilter, absl::StrCat("contended-", key), static_cast<int64_t>(key));
}

void Simulator::Impl::ContendedAnswer(uint64_t key, bool added, bool fell_back, bool partial_view) {
  assert(key < contended.size());
  Contended& c = contended[key];
  c.fell_back = c.fell_back || fell_back;
  c.partial_view = c.partial_view || partial_view;
  ++c.adds;
  if (added) {
    // new_keys counts distinct new keys (bytes per new key divides by it):
    // a second "new" for the same key is a duplicate, not another key.
    if (c.answered_new > 0) --r.new_keys;
    ++c.answered_new;
  }
}

void Simulator::Impl::WaitAt() {
  if (!workload_on) return;
  std::vector<uint32_t> ready;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const NodeWaits& w = waits[i];
    if (nodes[i].up && !nodes[i].paused && !w.in_flight && w.added.size() > w.confirmed) ready.push_back(i);
  }
  if (!ready.empty()) {
    const uint32_t i = ready[work_rng.Below(ready.size())];
    NodeWaits& w = waits[i];
    node::KeyBatch batch{kCrawlFilter, std::vector<std::string>(w.added.begin() + w.confirmed, w.added.end())};
    auto ticket = nodes[i].node->BeginWait({std::move(batch)}, o.workload.wait_replicas, o.workload.wait_timeout, Local(i));
    trace.Mix(0x3a17);
    trace.Mix(i);
    if (!ticket.ok()) {
      checker.Fail(absl::StrFormat("WAIT failed: node %d: %s", i, ticket.status().ToString()));
    } else {
      w.in_flight = true;
      w.ticket = *ticket;
      w.keys = w.added.size();
      w.began = now;
      w.crashes = r.crashes;
      w.rotations = r.rotations;
      AfterClientOp(i);
    }
  }
  At(now + o.workload.wait_every, Ev::Kind::kWait);
}

void Simulator::Impl::WaitAnswered(uint32_t i, node::PeerCheckResult done) {
  NodeWaits& w = waits[i];
  if (!w.in_flight || w.ticket != done.ticket) {
    checker.Fail(absl::StrFormat("node %d answered unknown WAIT ticket %d", i, done.ticket));
    return;
  }
  w.in_flight = false;
  trace.Mix(0x3a18);
  trace.Mix(i);
  trace.Mix(done.peers_acked);
  ++r.waits;
  if (done.peers_acked < o.workload.wait_replicas) ++r.waits_short;
  wait_latency.push_back(now - w.began);
  // The count against the truth: nodes other than i holding every key the
  // WAIT covered (those added since i's last WAIT that every live peer
  // acknowledged). A crash or a rotation meanwhile may have taken bits an
  // acknowledging peer held: then the WAIT is not judged. (Keys confirmed
  // earlier are not judged: a peer that restarted empty since, or was out
  // of the view then, may lack them; docs/routing.md, "WAIT".)
  if (r.crashes == w.crashes && r.rotations == w.rotations) {
    uint32_t holders = 0;
    for (uint32_t j = 0; j < nodes.size(); ++j) {
      if (j == i || !nodes[j].up) continue;
      bool all = true;
      for (size_t k = w.confirmed; k < w.keys && all; ++k) {
        auto present = nodes[j].node->Exists(kCrawlFilter, w.added[k]);
        all = present.ok() && *present;
      }
      holders += all ? 1 : 0;
    }
    if (BrokeWaitPromise(done.peers_acked, holders)) {
      checker.Fail(absl::StrFormat("WAIT at node %d counted %d peers, but only %d hold its %d keys", i,
                                   done.peers_acked, holders, w.keys));
    }
  } else {
    ++r.waits_unjudged;
  }
  if (done.every_live_peer) w.confirmed = w.keys;
}

void Simulator::Impl::DigestAdd(uint32_t owner) {
  if (!workload_on) return;
  if (nodes[owner].up && !nodes[owner].paused) {  // a paused node serves no client
    ClientAdd(owner, absl::StrCat("digest:", nodes[owner].name),
              absl::StrCat("object/", nodes[owner].name, "/", object_counter++));
  }
  At(now + Exponential(work_rng, PerSecond(o.workload.digest_adds_per_sec)), Ev::Kind::kDigestAdd, owner);
}

void Simulator::Impl::DigestRotate(uint32_t owner) {
  if (!workload_on) return;
  if (nodes[owner].up && !nodes[owner].paused) RotateAt(owner, absl::StrCat("digest:", nodes[owner].name));
  At(now + o.workload.digest_rotate_every, Ev::Kind::kDigestRotate, owner);
}

void Simulator::Impl::OperatorRotate() {
  if (!workload_on) return;
  const int i = RandomUp(work_rng);
  if (i >= 0) RotateAt(static_cast<uint32_t>(i), kCrawlFilter);
  At(now + Exponential(work_rng, o.workload.operator_rotate_every), Ev::Kind::kOperatorRotate);
}

void Simulator::Impl::TrackSample(Sample s) {
  s.added = now;
  s.seen.assign(o.nodes, false);
  samples.push_back(std::move(s));
  if (!poll_pending) {
    poll_pending = true;
    At(now, Ev::Kind::kPoll);
  }
}

void Simulator::Impl::AddSample() {
  if (!workload_on) return;
  const int i = RandomUp(work_rng);
  if (i >= 0) {
    Sample s;
    s.filter = kCrawlFilter;
    s.key = absl::StrCat("sample-key-", samples.size());
    if (ClientAdd(static_cast<uint32_t>(i), kCrawlFilter, s.key)) TrackSample(std::move(s));
  }
  At(now + o.workload.sample_every, Ev::Kind::kSample);
}

void Simulator::Impl::FreshFilter() {
  if (!workload_on) return;
  const int i = RandomUp(work_rng);
  if (i >= 0) {
    node::FilterConfig f;
    f.name = absl::StrCat("fresh:", fresh_filters);
    f.capacity = 1000;
    f.fpr = o.fpr;
    trace.Mix(0xf7e5);
    trace.Mix(static_cast<uint64_t>(i));
    trace.Mix(f.name);
    const absl::Status st = nodes[static_cast<uint32_t>(i)].node->Reserve(f, Local(static_cast<uint32_t>(i)));
    if (absl::IsResourceExhausted(st)) return;  // the catalog is full (1024 filters): no more fresh ones
    if (!st.ok()) {
      checker.Fail(absl::StrFormat("reserve failed: node %d filter %s: %s", i, f.name, st.ToString()));
    } else {
      Sample s;
      s.filter = f.name;
      s.key = absl::StrCat("fresh-key-", fresh_filters);
      s.fresh = true;
      if (ClientAdd(static_cast<uint32_t>(i), f.name, s.key)) TrackSample(std::move(s));
    }
    ++fresh_filters;
  }
  At(now + o.workload.fresh_filter_every, Ev::Kind::kFreshFilter);
}

void Simulator::Impl::Poll() {
  poll_pending = false;
  const uint32_t live = up_count();
  const uint32_t target999 = static_cast<uint32_t>(std::ceil(0.999 * live));
  bool any_active = false;
  for (Sample& s : samples) {
    if (!s.active) continue;
    uint32_t seen_live = 0;
    for (uint32_t i = 0; i < o.nodes; ++i) {
      if (!nodes[i].up) continue;
      // A node that took no frame, add or restart since the last poll holds
      // what it held then (reading all N every 10 ms per sample was 13% of
      // pollen-sim's CPU at N=1000; perf).
      if (!s.seen[i] && (!s.polled || nodes[i].changed_since_poll)) {
        auto present = nodes[i].node->Exists(s.filter, s.key);
        s.seen[i] = present.ok() && *present;
      }
      seen_live += s.seen[i] ? 1 : 0;
    }
    s.polled = true;
    const Duration age = now - s.added;
    if (s.t999.count() < 0 && seen_live >= target999) s.t999 = age;
    if (s.t100.count() < 0 && seen_live >= live) s.t100 = age;
    if (s.t100.count() >= 0 || age > o.workload.sample_timeout) s.active = false;
    any_active = any_active || s.active;
  }
  for (SimNode& n : nodes) n.changed_since_poll = false;
  if (any_active) {
    poll_pending = true;
    At(now + o.workload.sample_poll, Ev::Kind::kPoll);
  }
}

void Simulator::Impl::Check() {
  // Bit counts of at most kObservePerCheck nodes per check, round robin.
  constexpr uint32_t kObservePerCheck = 16;
  for (uint32_t i = 0; i < o.nodes; ++i) {
    if (!nodes[i].up) continue;
    const bool observe = o.nodes <= kObservePerCheck || (i + o.nodes - observe_cursor) % o.nodes < kObservePerCheck;
    CheckNode(i, observe);
  }
  observe_cursor = (observe_cursor + kObservePerCheck) % o.nodes;
  if (o.on_progress && now >= next_progress) {
    int64_t listing_all = -1;
    if (!o.warm_start && r.members_complete_seconds < 0) {  // the cold start is on: O(N), every 5 s
      listing_all = 0;
      for (uint32_t i = 0; i < o.nodes; ++i) listing_all += nodes[i].up && nodes[i].node->LiveMemberCount() == o.nodes;
    }
    o.on_progress(Sec(now), listing_all);
    next_progress = now + std::chrono::seconds(5);
  }
  if (!done) At(now + o.check_every, Ev::Kind::kCheck);
}

}  // namespace pollen::sim
