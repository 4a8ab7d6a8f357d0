#include "simulation/sim_options.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pollen::sim {

namespace {

node::Duration FromSeconds(double s) { return node::Duration(static_cast<int64_t>(std::llround(s * 1e9))); }
node::Duration FromMillis(double ms) { return node::Duration(static_cast<int64_t>(std::llround(ms * 1e6))); }
double ToSeconds(node::Duration d) { return static_cast<double>(d.count()) / 1e9; }

node::Duration Uniform(node::Rng& rng, node::Duration lo, node::Duration hi) {
  return lo + node::Duration(static_cast<int64_t>(rng.Unit() * static_cast<double>((hi - lo).count())));
}

}  // namespace

std::string FaultOptions::Describe() const {
  std::string out;
  auto add = [&](const std::string& s) { absl::StrAppend(&out, out.empty() ? "" : ",", s); };
  if (loss > 0) add(absl::StrFormat("loss=%.2f", loss));
  if (duplicate > 0) add(absl::StrFormat("dup=%.2f", duplicate));
  if (reorder > 0) add(absl::StrFormat("reorder=%.2f", reorder));
  if (partition) add("partition");
  if (one_way_partition) add("one-way-partition");
  if (crash) add(absl::StrFormat("crash(keep=%.2f)", keep_state));
  if (pause) add(absl::StrFormat("pause(every %.1fs)", ToSeconds(pause_gap)));
  if (clock_drift) add(absl::StrFormat("clock-drift(%.0fppm)", max_drift * 1e6));
  for (const ScriptedFault& f : scripted) {
    const char* names[] = {"partition", "one-way", "heal", "crash", "rotate"};
    std::string name = names[static_cast<int>(f.kind)];
    if (f.kind == ScriptedFault::Kind::kCrash) name += f.keep_state ? "(keep)" : "(wipe)";
    add(absl::StrFormat("%s@%.0fs", name, ToSeconds(f.at)));
  }
  return out.empty() ? "none" : out;
}

const std::vector<std::string>& ScenarioNames() {
  static const std::vector<std::string> names = {"none",          "loss30",        "partition-heal",
                                                 "one-way",       "crash-restart", "rotate-in-partition",
                                                 "grow",          "churn",         "pause",
                                                 "fresh-filters"};
  return names;
}

absl::Status ApplyScenario(const std::string& name, SimOptions& o) {
  using K = ScriptedFault::Kind;
  FaultOptions f;  // scenarios start from no faults
  f.clock_drift = o.faults.clock_drift;
  if (name == "none") {
  } else if (name == "loss30") {
    f.loss = 0.3;
  } else if (name == "partition-heal") {
    f.scripted = {{K::kPartition, seconds(3), 0.5}, {K::kHeal, seconds(15)}};
  } else if (name == "one-way") {
    f.scripted = {{K::kOneWayPartition, seconds(3), 0.5}, {K::kHeal, seconds(15)}};
  } else if (name == "crash-restart") {
    ScriptedFault keep{K::kCrash, seconds(4), 0.2, true, seconds(6)};
    ScriptedFault wipe{K::kCrash, seconds(12), 0.2, false, seconds(6)};
    f.scripted = {keep, wipe};
  } else if (name == "rotate-in-partition") {
    // Both sides propose the next epoch: concurrent proposals of one epoch.
    f.scripted = {{K::kPartition, seconds(3), 0.5},
                  {K::kRotate, seconds(6), 0.0},
                  {K::kRotate, seconds(7), 1.0},
                  {K::kHeal, seconds(15)}};
  } else if (name == "grow") {
    // A scaling filter grows from capacity 100 past 100,000 keys (1000x,
    // ten layers) at 1000 adds/s while the cluster is partitioned, then while
    // nodes crash with and without their state: every node must end with the
    // same stack and every acknowledged key present. 1000x needs
    // --duration=150 (0.7 new keys per add); CI runs that. The add rate per gossip round (200) is twice
    // the first layer: far above that, the small layers overfill before the
    // news of the next one spreads (docs/crdt.md, "Growth in a cluster").
    o.capacity = 100;
    o.expansion = 2;
    o.workload.crawl_adds_per_sec = 1000;
    // Faults at fixed fractions of --duration, so they land while it grows.
    const auto at = [&o](double fraction) {
      return std::chrono::duration_cast<node::Duration>(o.duration * fraction);
    };
    ScriptedFault keep{K::kCrash, at(0.45), 0.2, true, at(0.1)};
    ScriptedFault wipe{K::kCrash, at(0.7), 0.1, false, at(0.1)};
    f.scripted = {{K::kPartition, at(0.05), 0.5}, {K::kHeal, at(0.4)}, keep, wipe};
  } else if (name == "churn") {
    // Issue 11: 10% of the nodes crash and rejoin per minute, each down 5-20 s,
    // half of them restarting without their state; the tree loses parents and
    // children all the time and must keep every acknowledged key everywhere.
    f.crash = true;
    f.crash_gap = FromSeconds(60.0 / (0.1 * std::max<uint32_t>(o.nodes, 1)));
    f.keep_state = 0.5;
    f.down_min = seconds(5);
    f.down_max = seconds(20);
  } else if (name == "fresh-filters") {
    // A new filter every second, its first key added at once at its creator:
    // with tree dissemination that key must reach every node within 3 s
    // (before the catalog entry rode the tree with its bits: 4.8-7.0 s at the
    // median, up to 20 s, waiting for anti-entropy). Flood dissemination
    // misses some node until anti-entropy for old filters' keys too (seed 3:
    // 7.5 s for a crawl:seen sample key), so there it is only measured.
    o.workload.fresh_filter_every = seconds(1);
    if (o.dissemination == node::NodeConfig::Dissemination::kTree) o.workload.fresh_bound = seconds(3);
  } else if (name == "pause") {
    // Issue 11, Lifeguard: a node stops for 1-6 s (a GC pause, a starved
    // CPU) every 3 s on average somewhere in the cluster; on resume its
    // timers fire before it reads what waited. Healthy nodes must not be
    // accused (RunResult::false_suspicions), by the paused ones least of all.
    f.pause = true;
    f.pause_gap = seconds(3);
    f.pause_min = seconds(1);
    f.pause_max = seconds(6);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("ERR unknown scenario '", name, "'"));
  }
  o.faults = f;
  o.scenario = name;
  return absl::OkStatus();
}

void ApplySwarm(node::Rng& rng, SimOptions& o) {
  FaultOptions f;
  if (!o.nodes_set) o.nodes = 3 + static_cast<uint32_t>(rng.Below(14));  // 3..16
  o.network.min_latency = Uniform(rng, milliseconds(0), milliseconds(5));
  o.network.tail_mean = Uniform(rng, milliseconds(1), milliseconds(30));
  if (rng.Below(2)) f.loss = rng.Unit() * 0.4;
  if (rng.Below(3) == 0) f.duplicate = rng.Unit() * 0.2;
  if (rng.Below(3) == 0) f.reorder = rng.Unit() * 0.3;
  if (rng.Below(3) == 0) f.partition = true;
  if (rng.Below(3) == 0) f.one_way_partition = true;
  f.partition_gap = Uniform(rng, seconds(4), seconds(15));
  f.partition_min = Uniform(rng, milliseconds(500), seconds(3));
  f.partition_max = f.partition_min + Uniform(rng, seconds(0), seconds(10));
  if (rng.Below(3) == 0) f.crash = true;
  f.crash_gap = Uniform(rng, seconds(3), seconds(15));
  f.keep_state = rng.Unit();
  f.down_max = f.down_min + Uniform(rng, seconds(0), seconds(10));
  if (rng.Below(3) == 0) f.pause = true;
  f.pause_gap = Uniform(rng, seconds(2), seconds(10));
  f.pause_max = f.pause_min + Uniform(rng, seconds(0), seconds(8));
  if (rng.Below(2)) f.clock_drift = true;
  f.max_drift = rng.Unit() * 2e-3;
  o.faults = f;
  if (rng.Below(3) == 0) o.workload.operator_rotate_every = Uniform(rng, seconds(3), seconds(15));
  o.workload.digest_rotate_every = rng.Below(2) ? Uniform(rng, seconds(3), seconds(20)) : node::Duration(0);
  o.workload.crawl_adds_per_sec = 5 + rng.Unit() * 45;
  if (rng.Below(4) == 0) {
    // A scaling crawl filter, 10 capacities of adds a second: about 100x its
    // capacity in a 15 s run (the grow scenario goes to 1000x).
    o.capacity = 50 + rng.Below(51);                          // 50..100
    o.expansion = 2 + static_cast<uint32_t>(rng.Below(3));  // 2..4
    o.workload.crawl_adds_per_sec = 10.0 * static_cast<double>(o.capacity);
  }
}

std::string UsageText() {
  return R"(pollen-sim: deterministic simulation of a Pollen cluster (the real node core,
a simulated network with faults, workloads and invariant checkers).

Usage: pollen-sim [flags]        (flags take --name=value or --name value)
Run:
  --seed=S                run seed (default 1)
  --seeds=N               run N seeds: S, S+1, ..., S+N-1 (default 1)
  --nodes=N               cluster size (default 10; swarm picks 3..16 unless given)
  --duration=SEC          faults + workload phase, virtual seconds (default 30)
  --warmup=SEC            join phase before the workload (default 5)
  --warm-start            every node starts at once, already listing every node as alive (no join
                          phase: a large cluster's steady state without its cold start)
  --liveness-bound=SEC    after faults stop, all live nodes must converge within this (default 120)
  --join-bound=SEC        the cold start must end by then (every node up and listing every node
                          live); at most --warmup (default 0: reported, not checked)
  --scenario=NAME         fixed scenario: none, loss30, partition-heal, one-way,
                          crash-restart, rotate-in-partition, grow, churn, pause
  --swarm                 draw each fault switch and its parameters from the seed
Faults (each off by default):
  --loss[=P]              datagram loss probability (default 0.1)
  --dup[=P]               datagram duplication probability (default 0.05)
  --reorder[=P]           datagram reordering probability (default 0.1)
  --partition             random symmetric partitions that heal
  --one-way-partition     random one-way partitions that heal
  --crash[=KEEP]          random crash/restart; KEEP = chance to keep persisted state (default 0.5)
  --pause[=SEC]           random 1-6 s pauses of one node (timers late, frames held), SEC apart on average (default 4)
  --clock-drift[=PPM]     per-node clock offset (0..5 s) and drift (default +-1000 ppm)
  --latency-min-ms=MS     minimum one-way latency (default 1)
  --latency-tail-ms=MS    mean of the exponential latency tail (default 4)
Node and workload:
  --gossip-interval-ms=MS (default 200)      --fanout=F (default 3)
  --dissemination=flood|tree  new bits: F random peers for a few rounds, or once along a spanning tree (default tree)
  --tree-push-delay-ms=MS how long a tree push waits to gather more bits before it is forwarded (default 50)
  --tree-push-gap-ms=MS   the least time between two pushes of one node; 0: none (default 200)
  --compact-refs=on|off   tree pushes name known filters by name and digest, not full parameters (default on)
  --implicit-sender=on|off  tree pushes and acks leave out the sender's address (default on)
  --filter-aliases=on|off tree pushes name known filters by a per-link number once it is acknowledged (default on)
  --bare-pushes=on|off    tree pushes leave out the version and sender name once the link has acknowledged one (default on)
  --compact-seal=on|off   tree pushes and delivery control go with the compact seal header (default on)
  --compact-membership=on|off  membership datagrams go compact to members that announce it (default on)
  --anti-entropy-ms=MS    (default 10000)    --probe-interval-ms=MS (default 1000)
  --anti-entropy-max-ms=MS  with tree dissemination, once three anti-entropy intervals pass with no sign of trouble,
                          the interval doubles at each run, up to this (default 60000; at or below
                          --anti-entropy-ms: fixed)
  --lifeguard=on|off      Lifeguard's local health awareness in membership (default on; off = plain SWIM)
  --reliable-ping=on|off  a probe that gets no direct ack also pings by stream (default on)
  --capacity=N            crawl filter capacity (default 100000)
  --expansion=N           crawl filter scales: each layer N times the last (default 0: fixed size)
  --add-rate=R            crawl adds per virtual second, cluster-wide (default 20)
  --digest-owners=N       nodes publishing a digest filter (default 3)
  --digest-rotate=SEC     digest rotation period, 0 = never (default 15)
  --rotate-every=SEC      mean gap between operator rotations, 0 = never (default 0)
  --sample-every=SEC      add a tracked sample key this often (default 2)
  --contended-rate=R      new keys per virtual second that several nodes add at once (default 0)
  --contended-copies=C    nodes adding each contended key (default 3)
  --contended-spread-ms=MS  those adds fall within this window (default 100)
  --routed                the crawl filter is owner-routed: each new key is decided by its owner node
  --route-timeout-ms=MS   how long an asker waits for an owner's answer before asking again (default 100)
  --wait-every-ms=MS      this often a node calls WAIT over the crawl keys added there (default 0: never)
  --wait-replicas=K       WAIT's numreplicas (default 2)
  --wait-timeout-ms=MS    WAIT's timeout, 0 = none (default 1000)
  --fresh-filter-every=SEC  this often a node creates a filter and adds a tracked key to it at once (default 0: never)
Output:
  --json                  one JSON object per seed instead of the text summary
  --quiet                 only the one-line result per seed
  --progress              report virtual time on stderr every 5 virtual seconds
  --threads=N             run node events on N threads (default 1): the same run, bit for bit (same
                          trace hash), faster from ~N=1000 up when N cores are free; not with --wait-every-ms
  --huge-pages=on|off     back the heap with transparent huge pages: the same run, ~8-18% less CPU from N=1000
                          up, ~1-6% more memory (default off; pollen-sim restarts itself once, which
                          heaptrack and valgrind do not follow)
  --help
  --version
Exit status: 0 when every run passed its checkers, 1 on a checker failure, 2 on bad flags.
)";
}

absl::StatusOr<SimOptions> ParseFlags(const std::vector<std::string>& args) {
  SimOptions o;
  std::string scenario;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) return absl::InvalidArgumentError(absl::StrCat("ERR unexpected argument '", arg, "'"));
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    static const std::map<std::string, bool> kTakesValue = {
        {"seed", true},        {"seeds", true},           {"nodes", true},
        {"duration", true},    {"warmup", true},          {"liveness-bound", true}, {"join-bound", true},
        {"scenario", true},    {"latency-min-ms", true},  {"latency-tail-ms", true},
        {"gossip-interval-ms", true}, {"fanout", true},   {"anti-entropy-ms", true}, {"dissemination", true},
        {"anti-entropy-max-ms", true},
        {"probe-interval-ms", true},  {"capacity", true}, {"add-rate", true}, {"expansion", true},
        {"digest-owners", true}, {"digest-rotate", true}, {"rotate-every", true},
        {"sample-every", true},  {"fresh-filter-every", true},  {"lifeguard", true}, {"reliable-ping", true}, {"pause", false}, {"warm-start", false},
        {"contended-rate", true}, {"contended-copies", true}, {"contended-spread-ms", true}, {"routed", false}, {"route-timeout-ms", true},
        {"tree-push-delay-ms", true}, {"tree-push-gap-ms", true}, {"compact-refs", true}, {"implicit-sender", true},
        {"filter-aliases", true}, {"bare-pushes", true}, {"compact-seal", true},
        {"compact-membership", true},
        {"wait-every-ms", true}, {"wait-replicas", true}, {"wait-timeout-ms", true},
        {"swarm", false}, {"loss", false}, {"dup", false}, {"reorder", false},
        {"partition", false}, {"one-way-partition", false}, {"crash", false},
        {"clock-drift", false}, {"json", false}, {"quiet", false}, {"progress", false}, {"threads", true}, {"huge-pages", true}, {"help", false}, {"version", false}};
    auto known = kTakesValue.find(name);
    if (known == kTakesValue.end()) return absl::InvalidArgumentError(absl::StrCat("ERR unknown flag '--", name, "'"));
    if (known->second && !has_value) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("ERR flag '--", name, "' needs a value"));
      value = args[++i];
      has_value = true;
    }
    auto number = [&](double lo, double hi) -> absl::StatusOr<double> {
      double d = 0;
      if (!absl::SimpleAtod(value, &d) || !std::isfinite(d) || d < lo || d > hi) {
        return absl::InvalidArgumentError(
            absl::StrCat("ERR invalid value '", value, "' for '--", name, "' (range ", lo, "..", hi, ")"));
      }
      return d;
    };
#define POLLEN_NUM(var, lo, hi)            \
  auto var##_or = number(lo, hi);          \
  if (!var##_or.ok()) return var##_or.status(); \
  const double var = *var##_or;
    if (name != "seed" && name != "seeds") {
      o.replay_args.push_back(has_value ? absl::StrCat("--", name, "=", value) : absl::StrCat("--", name));
    }
    if (name == "seed") {
      uint64_t s = 0;
      if (!absl::SimpleAtoi(value, &s)) return absl::InvalidArgumentError(absl::StrCat("ERR invalid seed '", value, "'"));
      o.seed = s;
    } else if (name == "seeds") {
      POLLEN_NUM(v, 1, 1e6) o.seeds = static_cast<uint32_t>(v);
    } else if (name == "threads") {
      POLLEN_NUM(v, 1, 64) o.threads = static_cast<uint32_t>(v);
    } else if (name == "nodes") {
      POLLEN_NUM(v, 1, 100000) o.nodes = static_cast<uint32_t>(v);
      o.nodes_set = true;
    } else if (name == "duration") {
      POLLEN_NUM(v, 0, 1e6) o.duration = FromSeconds(v);
    } else if (name == "warmup") {
      POLLEN_NUM(v, 0, 1e6) o.warmup = FromSeconds(v);
    } else if (name == "join-bound") {
      POLLEN_NUM(v, 0, 1e6) o.join_bound = FromSeconds(v);
    } else if (name == "liveness-bound") {
      POLLEN_NUM(v, 0.001, 1e6) o.liveness_bound = FromSeconds(v);
    } else if (name == "scenario") {
      scenario = value;
    } else if (name == "latency-min-ms") {
      POLLEN_NUM(v, 0, 1e5) o.network.min_latency = FromMillis(v);
    } else if (name == "latency-tail-ms") {
      POLLEN_NUM(v, 0, 1e5) o.network.tail_mean = FromMillis(v);
    } else if (name == "gossip-interval-ms") {
      POLLEN_NUM(v, 1, 1e6) o.gossip_interval = FromMillis(v);
    } else if (name == "fanout") {
      POLLEN_NUM(v, 1, 1000) o.fanout = static_cast<uint32_t>(v);
    } else if (name == "dissemination") {
      if (value == "flood") {
        o.dissemination = node::NodeConfig::Dissemination::kFlood;
      } else if (value == "tree") {
        o.dissemination = node::NodeConfig::Dissemination::kTree;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("ERR --dissemination must be flood or tree, not '", value, "'"));
      }
    } else if (name == "anti-entropy-ms") {
      POLLEN_NUM(v, 1, 1e8) o.anti_entropy_interval = FromMillis(v);
    } else if (name == "anti-entropy-max-ms") {
      POLLEN_NUM(v, 1, 1e9) o.anti_entropy_max_interval = FromMillis(v);
    } else if (name == "probe-interval-ms") {
      POLLEN_NUM(v, 1, 1e8) o.probe_interval = FromMillis(v);
    } else if (name == "capacity") {
      POLLEN_NUM(v, 1, 1e9) o.capacity = static_cast<uint64_t>(v);
    } else if (name == "expansion") {
      POLLEN_NUM(v, 0, 65536) o.expansion = static_cast<uint32_t>(v);
    } else if (name == "add-rate") {
      POLLEN_NUM(v, 0, 1e6) o.workload.crawl_adds_per_sec = v;
    } else if (name == "digest-owners") {
      POLLEN_NUM(v, 0, 1e5) o.workload.digest_owners = static_cast<uint32_t>(v);
    } else if (name == "digest-rotate") {
      POLLEN_NUM(v, 0, 1e6) o.workload.digest_rotate_every = FromSeconds(v);
    } else if (name == "rotate-every") {
      POLLEN_NUM(v, 0, 1e6) o.workload.operator_rotate_every = FromSeconds(v);
    } else if (name == "contended-rate") {
      POLLEN_NUM(v, 0, 1e6) o.workload.contended_keys_per_sec = v;
      if (v > 0 && v < 1e-3) {  // PerSecond(v) would overflow
        return absl::InvalidArgumentError(absl::StrCat("ERR invalid value '", value, "' for '--", name,
                                                       "' (0 = off, else 0.001..1e6)"));
      }
    } else if (name == "contended-copies") {
      POLLEN_NUM(v, 1, 1000) o.workload.contended_copies = static_cast<uint32_t>(v);
    } else if (name == "contended-spread-ms") {
      POLLEN_NUM(v, 0, 1e7) o.workload.contended_spread = FromMillis(v);
    } else if (name == "routed") {
      o.workload.routed = true;
    } else if (name == "tree-push-delay-ms") {
      POLLEN_NUM(v, 0, 10000) o.tree_push_delay = FromMillis(v);
    } else if (name == "tree-push-gap-ms") {
      POLLEN_NUM(v, 0, 10000) o.tree_push_gap = FromMillis(v);
    } else if (name == "route-timeout-ms") {
      POLLEN_NUM(v, 1, 1e6) o.workload.route_timeout = FromMillis(v);
    } else if (name == "wait-every-ms") {
      POLLEN_NUM(v, 0, 1e7) o.workload.wait_every = FromMillis(v);
    } else if (name == "wait-replicas") {
      POLLEN_NUM(v, 0, 1e6) o.workload.wait_replicas = static_cast<uint32_t>(v);
    } else if (name == "wait-timeout-ms") {
      POLLEN_NUM(v, 0, 1e7) o.workload.wait_timeout = FromMillis(v);
    } else if (name == "fresh-filter-every") {
      POLLEN_NUM(v, 0, 1e6) o.workload.fresh_filter_every = FromSeconds(v);
    } else if (name == "sample-every") {
      POLLEN_NUM(v, 0.01, 1e6) o.workload.sample_every = FromSeconds(v);
    } else if (name == "loss") {
      if (!has_value) value = "0.1";
      POLLEN_NUM(v, 0, 0.99) o.faults.loss = v;
    } else if (name == "dup") {
      if (!has_value) value = "0.05";
      POLLEN_NUM(v, 0, 1) o.faults.duplicate = v;
    } else if (name == "reorder") {
      if (!has_value) value = "0.1";
      POLLEN_NUM(v, 0, 1) o.faults.reorder = v;
    } else if (name == "partition") {
      o.faults.partition = true;
    } else if (name == "warm-start") {
      o.warm_start = true;
    } else if (name == "one-way-partition") {
      o.faults.one_way_partition = true;
    } else if (name == "crash") {
      o.faults.crash = true;
      if (has_value) {
        POLLEN_NUM(v, 0, 1) o.faults.keep_state = v;
      }
    } else if (name == "pause") {
      o.faults.pause = true;
      if (has_value) {
        POLLEN_NUM(v, 0.1, 1e6) o.faults.pause_gap = FromSeconds(v);
      }
    } else if (name == "lifeguard" || name == "compact-refs" || name == "implicit-sender" || name == "reliable-ping" ||
               name == "huge-pages" || name == "filter-aliases" || name == "bare-pushes" || name == "compact-seal" ||
               name == "compact-membership") {
      bool& flag = name == "lifeguard"         ? o.lifeguard
                   : name == "compact-refs"    ? o.compact_refs
                   : name == "implicit-sender" ? o.implicit_sender
                   : name == "filter-aliases"  ? o.filter_aliases
                   : name == "bare-pushes"     ? o.bare_pushes
                   : name == "compact-seal"    ? o.compact_seal
                   : name == "compact-membership" ? o.compact_membership
                   : name == "huge-pages"   ? o.huge_pages
                                            : o.reliable_ping;
      if (value == "on") {
        flag = true;
      } else if (value == "off") {
        flag = false;
      } else {
        return absl::InvalidArgumentError(absl::StrCat("ERR --", name, " must be on or off, not '", value, "'"));
      }
    } else if (name == "clock-drift") {
      o.faults.clock_drift = true;
      if (has_value) {
        POLLEN_NUM(v, 0, 100000) o.faults.max_drift = v * 1e-6;
      }
    } else if (name == "swarm") {
      o.swarm = true;
    } else if (name == "json") {
      o.json = true;
    } else if (name == "quiet") {
      o.quiet = true;
    } else if (name == "progress") {
      o.progress = true;
    } else if (name == "help") {
      o.help = true;
    } else if (name == "version") {
      o.version = true;
    }
#undef POLLEN_NUM
  }
  if (o.join_bound > o.warmup) return absl::InvalidArgumentError("ERR --join-bound must not exceed --warmup");
  if (o.join_bound.count() > 0 && o.join_bound < std::chrono::milliseconds(100)) {
    return absl::InvalidArgumentError("ERR --join-bound must be 0 (unchecked) or at least 0.1 (the poll period)");
  }
  if (o.join_bound.count() > 0 && o.warm_start) {
    return absl::InvalidArgumentError("ERR --join-bound checks a cold start: not with --warm-start");
  }
  if (!scenario.empty()) {
    if (o.swarm) return absl::InvalidArgumentError("ERR --scenario and --swarm are exclusive");
    if (auto s = ApplyScenario(scenario, o); !s.ok()) return s;
  }
  return o;
}

}  // namespace pollen::sim
