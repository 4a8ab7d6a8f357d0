#include "node/runtime/config.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "crdt/generations.h"
#include "node/runtime/net_address.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;
constexpr size_t kMaxLines = 100000;
constexpr size_t kMaxFilters = 1024;
constexpr size_t kMaxSeeds = 256;
constexpr size_t kMaxValueBytes = 4096;

enum class Where : uint8_t { kAnywhere, kNoFlag, kFlagEnvOnly };

struct Option {
  const char* name;
  const char* default_value;
  const char* help;
  Where where;
  std::function<absl::Status(DaemonConfig&, std::string_view)> set;
};

absl::Status Bad(std::string_view what, std::string_view value) {
  return absl::InvalidArgumentError(Cat(what, ", got '", value, "'"));
}

absl::Status SetU32(uint32_t* out, std::string_view v, uint32_t lo, uint32_t hi) {
  uint32_t x = 0;
  if (!ParseUnsigned(v, &x) || x < lo || x > hi) {
    return Bad(Cat("expected an integer in [", lo, ", ", hi, "]"), v);
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status SetU64(uint64_t* out, std::string_view v, uint64_t lo, uint64_t hi) {
  uint64_t x = 0;
  if (!ParseUnsigned(v, &x) || x < lo || x > hi) {
    return Bad(Cat("expected an integer in [", lo, ", ", hi, "]"), v);
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status SetDouble(double* out, std::string_view v, double lo, double hi, bool open_low) {
  double x = 0;
  if (!ParseDouble(v, &x) || !std::isfinite(x) || x > hi || x < lo || (open_low && x == lo)) {
    return Bad(Cat("expected a number in ", open_low ? "(" : "[", lo, ", ", hi, "]"), v);
  }
  *out = x;
  return absl::OkStatus();
}

absl::Status SetDur(node::Duration* out, std::string_view v, node::Duration lo, node::Duration hi) {
  auto d = ParseDuration(v);
  if (!d.ok() || *d < lo || *d > hi) {
    return Bad(Cat("expected a duration in [", FormatDuration(lo), ", ", FormatDuration(hi),
                            "] like 250ms, 10s, 5m"),
               v);
  }
  *out = *d;
  return absl::OkStatus();
}

absl::Status SetBytes(uint64_t* out, std::string_view v, uint64_t lo, uint64_t hi) {
  absl::StatusOr<uint64_t> x = ParseByteSize(v);
  if (!x.ok() || *x < lo || *x > hi) {
    return Bad(Cat("expected a size in [", FormatByteSize(lo), ", ", FormatByteSize(hi), "] like 512mb or 1gb"), v);
  }
  *out = *x;
  return absl::OkStatus();
}

absl::Status SetBytesOrAuto(uint64_t* out, std::string_view v) {
  if (absl::AsciiStrToLower(AV(v)) == "auto") {
    *out = DaemonConfig::kAutoSize;
    return absl::OkStatus();
  }
  return SetBytes(out, v, 0, uint64_t{1} << 50);
}

absl::Status SetBool(bool* out, std::string_view v) {
  std::string l = absl::AsciiStrToLower(AV(v));
  if (l == "true" || l == "yes" || l == "on" || l == "1") {
    *out = true;
  } else if (l == "false" || l == "no" || l == "off" || l == "0") {
    *out = false;
  } else {
    return Bad("expected true or false", v);
  }
  return absl::OkStatus();
}

absl::Status SetHostPort(std::string* out, std::string_view v, bool allow_empty) {
  if (v.empty() && allow_empty) {
    out->clear();
    return absl::OkStatus();
  }
  auto hp = ParseHostPort(v);
  if (!hp.ok()) return Bad("expected host:port or [ipv6]:port with a numeric IP", v);
  *out = std::string(v);
  return absl::OkStatus();
}

absl::Status SetName(std::string* out, std::string_view v) {
  if (v.empty() || v.size() > 128) return Bad("expected 1 to 128 characters", v);
  for (char c : v) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return Bad("expected letters, digits, '-', '_' or '.'", v);
    }
  }
  *out = std::string(v);
  return absl::OkStatus();
}

// The Bloom settings share CONFIG SET's parser (resp::SetBloomSetting).
absl::Status SetBloom(DaemonConfig& c, std::string_view name, std::string_view v) {
  absl::Status s = resp::SetBloomSetting(name, v, &c.bloom);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(std::string(s.message()));
}

using Dur = node::Duration;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<Option>& Options() {
  static const auto* options = new std::vector<Option>{
      {"config", "", "Config file path (flag or POLLEN_CONFIG only; default: the embedded config)",
       Where::kFlagEnvOnly, [](DaemonConfig& c, std::string_view v) {
         c.config_file = std::string(v);
         return absl::OkStatus();
       }},
      {"node-name", "pollen-1", "Unique member name (letters, digits, - _ .)", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetName(&c.node_name, v); }},
      {"gossip-bind", "127.0.0.1:7946", "UDP and TCP gossip bind address (same port for both)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetHostPort(&c.gossip_bind, v, false); }},
      {"advertise", "", "Address peers use to reach this node (default: gossip-bind)", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetHostPort(&c.advertise, v, true); }},
      {"seeds", "", "Comma-separated host:port gossip addresses to join through", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) -> absl::Status {
         std::vector<std::string> seeds;
         for (absl::string_view piece : absl::StrSplit(AV(v), ',', absl::SkipWhitespace())) {
           std::string_view s = Strip(SV(piece));
           if (s.empty()) continue;
           if (!ParseHostPort(s).ok()) return Bad("expected a comma-separated list of host:port", v);
           seeds.emplace_back(s);
         }
         if (seeds.size() > kMaxSeeds) return Bad(Cat("expected at most ", kMaxSeeds, " seeds"), v);
         c.seeds = std::move(seeds);
         return absl::OkStatus();
       }},
      {"tcp-only", "false", "Send all gossip over TCP (for networks that block UDP)", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetBool(&c.tcp_only, v); }},
      {"cluster-label", "pollen", "Label bound into every frame; nodes with different labels ignore each other",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) -> absl::Status {
         if (v.size() > 64) return Bad("expected at most 64 bytes", v);
         c.cluster_label = std::string(v);
         return absl::OkStatus();
       }},
      {"secret-file", "", "File holding the 32-byte cluster secret (hex or base64); or set POLLEN_SECRET",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) {
         c.secret_file = std::string(v);
         return absl::OkStatus();
       }},
      {"resp-bind", "127.0.0.1:6380", "RESP (Redis protocol) listen address", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetHostPort(&c.resp_bind, v, false); }},
      {"resp-password", "", "Password for AUTH (file or POLLEN_RESP_PASSWORD only; empty = no AUTH)",
       Where::kNoFlag, [](DaemonConfig& c, std::string_view v) -> absl::Status {
         if (v.size() > 512) return absl::InvalidArgumentError("expected at most 512 bytes");
         c.resp_password = std::string(v);
         return absl::OkStatus();
       }},
      {"rename-command", "",
       "Redis' rename-command: comma-separated NAME=NEWNAME pairs; an empty NEWNAME disables the command "
       "(FLUSHALL=,FLUSHDB=)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) -> absl::Status {
         if (v.size() > 4096) return absl::InvalidArgumentError("expected at most 4096 bytes");
         c.rename_command = std::string(v);
         return absl::OkStatus();
       }},
      {"bf-error-rate", "0.01",
       "Error rate of a filter BF.ADD/BF.MADD/BF.INSERT create, and BF.INSERT's default ERROR (Redis 8's setting; "
       "above 0.25 taken as 0.25)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBloom(c, "bf-error-rate", v); }},
      {"bf-initial-size", "1000000",
       "Capacity of a filter BF.ADD/BF.MADD/BF.INSERT create, and BF.INSERT's default CAPACITY (Redis 8's "
       "setting; Redis' default is 100)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBloom(c, "bf-initial-size", v); }},
      {"bf-expansion-factor", "2",
       "EXPANSION of BF.RESERVE, BF.INSERT and created filters when none is given; 0 = NONSCALING (Redis 8's "
       "setting)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBloom(c, "bf-expansion-factor", v); }},
      {"resp3-replies", "redisbloom-2.4",
       "RESP3 replies of BF.ADD/MADD/EXISTS/MEXISTS/INSERT and BF.INFO: redisbloom-2.4 (integers, arrays) or "
       "redis-8 (booleans, a map)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBloom(c, "resp3-replies", v); }},
      {"resp-threads", "1", "Threads serving RESP clients", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetU32(&c.resp_threads, v, 1, 64); }},
      {"resp-busy-poll-us", "50",
       "Microseconds a RESP thread keeps polling after a request before it sleeps (0 = sleep at once)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetU32(&c.resp_busy_poll_us, v, 0, 10000); }},
      {"resp-latency-tracking", "true",
       "Time every RESP command (pollen_resp_command_duration_seconds, INFO commandstats), as Redis' "
       "latency-tracking; false saves a clock read per command and keeps no command stats",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBool(&c.resp_latency_tracking, v); }},
      {"resp-max-clients", "10000", "Most concurrent RESP connections", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetU32(&c.resp_max_clients, v, 1, 1000000); }},
      {"proto-max-bulk-len", "32mb",
       "Largest RESP argument accepted, as Redis' proto-max-bulk-len (1mb to 512mb); BF.SCANDUMP sizes its "
       "chunks to fit it",
       Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) {
         return SetBytes(&c.proto_max_bulk_len, v, uint64_t{1} << 20, uint64_t{512} << 20);
       }},
      {"resp-idle-timeout", "300s", "Close RESP connections idle this long (0 = never)", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetDur(&c.resp_idle_timeout, v, Dur(0), hours(24 * 7)); }},
      {"http-bind", "127.0.0.1:9464", "HTTP address for the status page (/) and /metrics, /healthz, /readyz (empty = off)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetHostPort(&c.http_bind, v, true); }},
      {"max-memory", "auto",
       "Memory all filters of this node may take, as Redis' maxmemory: a filter that would pass it is refused "
       "(BF.RESERVE gets an error; a peer's filter is not held here and the others serve it). auto: 75% of the "
       "machine's memory or cgroup limit; 0: no limit",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBytesOrAuto(&c.max_memory, v); }},
      {"max-filter-bytes", "auto",
       "Memory one filter's generations may take (BF.RESERVE, a peer's filter, a restore). auto: max-memory; 0: no "
       "limit",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBytesOrAuto(&c.max_filter_bytes, v); }},
      {"huge-pages", "true",
       "Ask for transparent huge pages for filters of 2 MiB and more (MADV_HUGEPAGE): fewer TLB misses on big "
       "filters, a slower first touch of their memory (docs/web-scale.md)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBool(&c.huge_pages, v); }},
      {"data-dir", "", "Directory for snapshots and the add log (empty = no persistence)", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) {
         c.data_dir = std::string(v);
         return absl::OkStatus();
       }},
      {"appendfsync", "everysec", "Add-log fsync policy: none, everysec or always (as in Redis)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) -> absl::Status {
         if (v == "none" || v == "no") {
           c.appendfsync = AppendFsync::kNone;
         } else if (v == "everysec") {
           c.appendfsync = AppendFsync::kEverySec;
         } else if (v == "always") {
           c.appendfsync = AppendFsync::kAlways;
         } else {
           return Bad("expected none, everysec or always", v);
         }
         return absl::OkStatus();
       }},
      {"snapshot-interval", "60s", "Time between snapshots of every filter", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetDur(&c.snapshot_interval, v, seconds(1), hours(24)); }},
      {"gossip-interval", "200ms", "Time between delta gossip rounds", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) {
         return SetDur(&c.gossip_interval, v, milliseconds(10), seconds(60));
       }},
      {"fanout", "3", "Peers each gossip round sends to", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetU32(&c.fanout, v, 1, 64); }},
      {"dissemination", "tree", "How new bits spread: tree (once along a spanning tree) or flood (fanout peers, a few rounds)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) -> absl::Status {
         if (v == "tree") {
           c.dissemination = node::NodeConfig::Dissemination::kTree;
         } else if (v == "flood") {
           c.dissemination = node::NodeConfig::Dissemination::kFlood;
         } else {
           return Bad("expected tree or flood", v);
         }
         return absl::OkStatus();
       }},
      {"probe-interval", "1s", "Time between membership probes", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetDur(&c.probe_interval, v, milliseconds(50), seconds(60)); }},
      {"probe-timeout", "500ms", "Wait this long for a probe's ack", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetDur(&c.probe_timeout, v, milliseconds(10), seconds(60)); }},
      {"route-timeout", "100ms",
       "Owner-routed filters: wait this long for a key's owner to answer before asking again (1ms to 2s; "
       "docs/routing.md)",
       Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetDur(&c.route_timeout, v, milliseconds(1), seconds(2)); }},
      {"indirect-probes", "3", "Members asked to probe indirectly", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetU32(&c.indirect_probes, v, 0, 16); }},
      {"suspicion-multiplier", "4", "Suspicion timeout = mult * log10(N+1) * probe-interval", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetDouble(&c.suspicion_multiplier, v, 1, 100, false); }},
      {"lifeguard", "true",
       "Lifeguard local health awareness: a slow node stretches its own probing and suspicions need confirming "
       "(false: plain SWIM)",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) { return SetBool(&c.lifeguard, v); }},
      {"anti-entropy-interval", "10s", "Time between anti-entropy exchanges", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) {
         return SetDur(&c.anti_entropy_interval, v, milliseconds(100), hours(1));
       }},
      {"anti-entropy-max-interval", "60s",
       "Longest time between anti-entropy exchanges: with tree dissemination, once three intervals pass with no "
       "sign of trouble the interval doubles at each exchange, up to this, and drops back at the first sign (at "
       "or below anti-entropy-interval: fixed)",
       Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) {
         return SetDur(&c.anti_entropy_max_interval, v, milliseconds(100), hours(24));
       }},
      {"dead-reconnect-interval", "30s", "Time between attempts to reach dead members", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) {
         return SetDur(&c.dead_reconnect_interval, v, milliseconds(100), hours(1));
       }},
      {"max-datagram-bytes", "1200", "Largest UDP datagram sent (below the path MTU)", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetU32(&c.max_datagram_bytes, v, 512, 65000); }},
      {"join-timeout", "10s", "Report ready after this long even if no seed answered", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) { return SetDur(&c.join_timeout, v, Dur(0), hours(1)); }},
      {"stream-queue-bytes", "16777216", "Most bytes queued per TCP peer before frames are dropped",
       Where::kAnywhere, [](DaemonConfig& c, std::string_view v) {
         return SetU64(&c.stream_queue_bytes, v, 65536, uint64_t{1} << 32);
       }},
      {"log-level", "info", "trace, debug, info, warn, error or off", Where::kAnywhere,
       [](DaemonConfig& c, std::string_view v) -> absl::Status {
         if (v != "trace" && v != "debug" && v != "info" && v != "warn" && v != "error" && v != "off") {
           return Bad("expected trace, debug, info, warn, error or off", v);
         }
         c.log_level = std::string(v);
         return absl::OkStatus();
       }},
  };
  return *options;
}

const Option* FindOption(std::string_view name) {
  for (const Option& o : Options()) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

absl::Status Prefix(const absl::Status& s, std::string_view prefix) {
  return absl::InvalidArgumentError(Cat(prefix, s.message()));
}

// A filter section's expansion until its keys are read (then the default).
constexpr uint32_t kUnsetExpansion = ~uint32_t{0};

absl::Status ApplyFilterKey(node::FilterConfig* f, std::string_view key, std::string_view v) {
  if (key == "capacity") {
    return SetU64(&f->capacity, v, 1, uint64_t{1} << 36);
  } else if (key == "fpr") {
    return SetDouble(&f->fpr, v, 0, 0.5, true);
  } else if (key == "generations") {
    return SetU32(&f->generations, v, 1, crdt::kMaxGenerations);
  } else if (key == "scope") {
    if (v == "shared") {
      f->scope = node::Scope::kShared;
    } else if (v == "digest") {
      f->scope = node::Scope::kDigest;
    } else {
      return Bad("expected shared or digest", v);
    }
    return absl::OkStatus();
  } else if (key == "owner") {
    return SetName(&f->owner, v);
  } else if (key == "rotate-fill") {
    return SetDouble(&f->rotate_fill, v, 0, 1, false);
  } else if (key == "rotate-interval") {
    return SetDur(&f->rotate_interval, v, Dur(0), hours(24 * 365));
  } else if (key == "expansion") {
    return SetU32(&f->expansion, v, 0, crdt::kMaxExpansion);
  } else if (key == "routed") {
    return SetBool(&f->routed, v);
  } else if (key == "layout") {
    if (v == "split") {
      f->hash_scheme = crdt::kHashSchemeSipSplit3;
    } else if (v == "one-block") {
      f->hash_scheme = crdt::kHashSchemeSipBlocked2;
    } else {
      return Bad("expected split or one-block", v);
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "unknown filter key (expected capacity, fpr, generations, scope, owner, rotate-fill, rotate-interval, expansion, "
      "routed, layout)");
}

bool ValidFilterName(std::string_view name) {
  if (name.empty() || name.size() > crdt::kMaxFilterNameBytes) return false;
  for (char c : name) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

std::string EnvName(std::string_view option) {
  std::string s = "POLLEN_";
  for (char c : option) s += c == '-' ? '_' : absl::ascii_toupper(static_cast<unsigned char>(c));
  return s;
}

}  // namespace

std::string_view AppendFsyncName(AppendFsync mode) {
  switch (mode) {
    case AppendFsync::kNone: return "none";
    case AppendFsync::kEverySec: return "everysec";
    case AppendFsync::kAlways: return "always";
  }
  return "?";
}

const char kEmbeddedConfig[] =
    "# pollend embedded default config: used when no --config is given.\n"
    "# Every option not set here has its built-in default (see pollend --help).\n"
    "log-level = info\n"
    "appendfsync = everysec\n"
    "\n"
    "# The crawl-dedup demo filter: one union across the cluster.\n"
    "[filter crawl:seen]\n"
    "capacity = 1000000\n"
    "fpr = 0.01\n"
    "generations = 2\n"
    "scope = shared\n"
    "layout = split\n";

absl::StatusOr<node::Duration> ParseDuration(std::string_view text) {
  text = Strip(text);
  if (text == "0") return node::Duration(0);
  size_t i = 0;
  while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 12) return absl::InvalidArgumentError("bad duration");
  uint64_t n = 0;
  if (!ParseUnsigned(text.substr(0, i), &n)) return absl::InvalidArgumentError("bad duration");
  std::string_view unit = text.substr(i);
  uint64_t unit_ms = 0;
  if (unit == "ms") unit_ms = 1;
  if (unit == "s") unit_ms = 1000;
  if (unit == "m") unit_ms = 60'000;
  if (unit == "h") unit_ms = 3'600'000;
  if (unit_ms == 0) return absl::InvalidArgumentError("bad duration unit");
  // At most about 100 years: 12 digits of hours would overflow the
  // nanosecond count (found by fuzz_runtime_config_parse).
  constexpr uint64_t kMaxDurationMs = uint64_t{100} * 365 * 24 * 3'600'000;
  if (n > kMaxDurationMs / unit_ms) return absl::InvalidArgumentError("duration too long");
  return node::Duration(std::chrono::milliseconds(n * unit_ms));
}

uint64_t MachineMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  // cgroup v2, then v1: "max" or a number far above RAM means no limit.
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    uint64_t limit = 0;
    if (in >> text && absl::SimpleAtoi(text, &limit) && limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  }
  return bytes;
}

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  text = Strip(text);
  size_t i = 0;
  while (i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 20) return absl::InvalidArgumentError("bad size");
  uint64_t n = 0;
  if (!ParseUnsigned(text.substr(0, i), &n)) return absl::InvalidArgumentError("bad size");
  const std::string unit = absl::AsciiStrToLower(AV(text.substr(i)));
  uint64_t scale = 0;
  if (unit.empty()) scale = 1;
  if (unit == "k") scale = 1000;
  if (unit == "kb") scale = uint64_t{1} << 10;
  if (unit == "m") scale = 1000'000;
  if (unit == "mb") scale = uint64_t{1} << 20;
  if (unit == "g") scale = 1000'000'000;
  if (unit == "gb") scale = uint64_t{1} << 30;
  if (scale == 0) return absl::InvalidArgumentError("bad size unit");
  if (n > std::numeric_limits<uint64_t>::max() / scale) return absl::InvalidArgumentError("size too large");
  return n * scale;
}

std::string FormatByteSize(uint64_t bytes) {
  if (bytes != 0 && bytes % (uint64_t{1} << 30) == 0) return Cat(bytes >> 30, "gb");
  if (bytes != 0 && bytes % (uint64_t{1} << 20) == 0) return Cat(bytes >> 20, "mb");
  if (bytes != 0 && bytes % (uint64_t{1} << 10) == 0) return Cat(bytes >> 10, "kb");
  return Cat(bytes);
}

std::string FormatDuration(node::Duration d) {
  using namespace std::chrono;
  const int64_t ms = duration_cast<milliseconds>(d).count();
  if (ms == 0) return "0";
  if (ms % 3600000 == 0) return Cat(ms / 3600000, "h");
  if (ms % 60000 == 0) return Cat(ms / 60000, "m");
  if (ms % 1000 == 0) return Cat(ms / 1000, "s");
  return Cat(ms, "ms");
}

absl::Status ApplyOption(std::string_view name, std::string_view value, std::string_view origin,
                         DaemonConfig* config) {
  const Option* o = FindOption(name);
  if (o == nullptr) return absl::InvalidArgumentError(Cat(origin, ": unknown option '", name, "'"));
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(Cat(origin, ": option '", name, "': value longer than ",
                                                   kMaxValueBytes, " bytes"));
  }
  absl::Status s = o->set(*config, value);
  if (!s.ok()) return Prefix(s, Cat(origin, ": option '", name, "': "));
  return absl::OkStatus();
}

absl::Status ApplyConfigText(std::string_view text, std::string_view source, DaemonConfig* config) {
  if (text.size() > kMaxConfigBytes) {
    return absl::InvalidArgumentError(Cat(source, ": file larger than ", kMaxConfigBytes, " bytes"));
  }
  std::vector<node::FilterConfig> filters;
  node::FilterConfig* current = nullptr;
  size_t line_no = 0;
  for (absl::string_view raw_piece : absl::StrSplit(AV(text), '\n')) {
    const std::string_view raw = SV(raw_piece);
    ++line_no;
    if (line_no > kMaxLines) return absl::InvalidArgumentError(Cat(source, ": too many lines"));
    const std::string where = Cat(source, ":", line_no);
    std::string_view line = Strip(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      if (line.back() != ']') return absl::InvalidArgumentError(Cat(where, ": section header without ']'"));
      std::string_view inner = Strip(line.substr(1, line.size() - 2));
      if (!ConsumePrefix(&inner, "filter") || inner.empty() || !absl::ascii_isspace(inner[0])) {
        return absl::InvalidArgumentError(Cat(where, ": expected a section like [filter NAME]"));
      }
      inner = Strip(inner);
      if (!ValidFilterName(inner)) {
        return absl::InvalidArgumentError(
            Cat(where, ": filter name '", inner, "': expected 1 to ", crdt::kMaxFilterNameBytes,
                         " printable characters without spaces"));
      }
      for (const auto& f : filters) {
        if (f.name == inner) return absl::InvalidArgumentError(Cat(where, ": filter '", inner, "' declared twice"));
      }
      if (filters.size() >= kMaxFilters) return absl::InvalidArgumentError(Cat(where, ": too many filters"));
      filters.emplace_back();
      filters.back().name = std::string(inner);
      filters.back().expansion = kUnsetExpansion;
      // A declared filter keeps the layout of the version that declared it
      // unless its section says `layout = split`: a node upgraded in place
      // must read the filters its files and its peers already hold.
      filters.back().hash_scheme = crdt::kHashSchemeSipBlocked2;
      current = &filters.back();
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(Cat(where, ": expected 'option = value'"));
    }
    std::string_view key = Strip(line.substr(0, eq));
    std::string_view value = Strip(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (current != nullptr) {
      absl::Status s = ApplyFilterKey(current, key, value);
      if (!s.ok()) {
        return Prefix(s, Cat(where, ": filter '", current->name, "' option '", key, "': "));
      }
      continue;
    }
    const Option* o = FindOption(key);
    if (o != nullptr && o->where == Where::kFlagEnvOnly) {
      return absl::InvalidArgumentError(Cat(where, ": option '", key, "' is not allowed in a config file"));
    }
    if (absl::Status s = ApplyOption(key, value, where, config); !s.ok()) return s;
  }
  // Filters scale by default (expansion 2, as RedisBloom), except those that
  // rotate by fill: the two are exclusive (node/core/catalog.cc).
  for (node::FilterConfig& f : filters) {
    if (f.expansion == kUnsetExpansion) f.expansion = f.rotate_fill > 0 ? 0 : 2;
  }
  config->filters = std::move(filters);
  return absl::OkStatus();
}

absl::Status ValidateConfig(const DaemonConfig& c) {
  auto err = [](std::string_view opt, std::string_view msg) {
    return absl::InvalidArgumentError(Cat("option '", opt, "': ", msg));
  };
  const std::string& adv = c.advertise.empty() ? c.gossip_bind : c.advertise;
  auto hp = ParseHostPort(adv);
  if (!hp.ok()) return err(c.advertise.empty() ? "gossip-bind" : "advertise", "not a host:port");
  if (hp->port == 0 || IsUnspecifiedHost(hp->host)) {
    return err("advertise", "must be a concrete address and port (set it when gossip-bind is 0.0.0.0, :: or port 0)");
  }
  for (const auto& [opt, value] : {std::pair<const char*, const std::string*>{"gossip-bind", &c.gossip_bind},
                                    {"resp-bind", &c.resp_bind}, {"http-bind", &c.http_bind}}) {
    if (value->empty()) continue;
    auto b = ParseHostPort(*value);
    if (!b.ok() || !b->numeric) return err(opt, "a bind address needs a numeric IPv4 or [IPv6] address");
  }
  if (c.probe_timeout >= c.probe_interval) return err("probe-timeout", "must be shorter than probe-interval");
  for (const auto& f : c.filters) {
    if (f.scope == node::Scope::kDigest && f.owner.empty()) {
      return err("filter " + f.name, "scope digest needs an owner");
    }
    if (f.scope == node::Scope::kShared && !f.owner.empty()) {
      return err("filter " + f.name, "owner is only for scope digest");
    }
  }
  return absl::OkStatus();
}

namespace {

// max-memory auto: 75% of the machine's memory, leaving the rest to the
// process (RESP buffers, a restore being assembled) and the system.
void ResolveAutoSizes(DaemonConfig* c) {
  if (c->max_memory == DaemonConfig::kAutoSize) c->max_memory = MachineMemoryBytes() / 4 * 3;
  if (c->max_filter_bytes == DaemonConfig::kAutoSize) c->max_filter_bytes = c->max_memory;
}

absl::Status ApplyDefaults(DaemonConfig* config) {
  for (const Option& o : Options()) {
    if (absl::Status s = o.set(*config, o.default_value); !s.ok()) return s;  // a bug: defaults are valid
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(Cat("cannot open config file '", path, "'"));
  std::string data;
  char buf[8192];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<size_t>(in.gcount()));
    if (data.size() > kMaxConfigBytes) {
      return absl::InvalidArgumentError(Cat(path, ": file larger than ", kMaxConfigBytes, " bytes"));
    }
  }
  return data;
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv, GetEnvFn getenv_fn) {
  if (getenv_fn == nullptr) getenv_fn = [](const char* n) -> const char* { return std::getenv(n); };
  CommandLine cl;
  if (absl::Status s = ApplyDefaults(&cl.config); !s.ok()) return s;

  // Pass 1: split flags into (name, value) pairs.
  std::vector<std::pair<std::string, std::string>> flags;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      cl.help = true;
      continue;
    }
    if (arg == "--version") {
      cl.version = true;
      continue;
    }
    if (arg == "--print-config") {
      cl.print_config = true;
      continue;
    }
    if (!ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(Cat("unexpected argument '", arg, "' (options start with --)"));
    }
    std::string name, value;
    const size_t eq = arg.find('=');
    if (eq != std::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      name = std::string(arg);
      if (name == "tcp-only") {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(Cat("--", name, ": missing value"));
      }
    }
    if (name == "secret") {
      return absl::InvalidArgumentError(
          "--secret: the cluster secret is never taken from a flag (it would show in ps); "
          "use --secret-file or POLLEN_SECRET");
    }
    const Option* o = FindOption(name);
    if (o == nullptr) return absl::InvalidArgumentError(Cat("--", name, ": unknown option (see --help)"));
    if (o->where == Where::kNoFlag) {
      return absl::InvalidArgumentError(Cat("--", name, ": not accepted as a flag (it would show in ps); ",
                                                     "use the config file or ", EnvName(name)));
    }
    flags.emplace_back(std::move(name), std::move(value));
  }
  if (cl.help || cl.version) return cl;

  // The config file: flag, else environment, else the embedded default.
  std::string config_path;
  if (const char* e = getenv_fn("POLLEN_CONFIG"); e != nullptr) config_path = e;
  for (const auto& [n, v] : flags) {
    if (n == "config") config_path = v;
  }
  if (config_path.empty()) {
    if (absl::Status s = ApplyConfigText(kEmbeddedConfig, "<embedded config>", &cl.config); !s.ok()) return s;
  } else {
    auto text = ReadSmallFile(config_path);
    if (!text.ok()) return absl::InvalidArgumentError(Cat("option 'config': ", text.status().message()));
    if (absl::Status s = ApplyConfigText(*text, config_path, &cl.config); !s.ok()) return s;
  }
  cl.config.config_file = config_path;

  // Environment.
  for (const Option& o : Options()) {
    if (std::string_view(o.name) == "config") continue;
    const std::string env = EnvName(o.name);
    if (const char* e = getenv_fn(env.c_str()); e != nullptr) {
      if (absl::Status s = ApplyOption(o.name, e, env, &cl.config); !s.ok()) return s;
    }
  }
  // Flags.
  for (const auto& [n, v] : flags) {
    if (absl::Status s = ApplyOption(n, v, "--" + n, &cl.config); !s.ok()) return s;
  }
  ResolveAutoSizes(&cl.config);
  if (absl::Status s = ValidateConfig(cl.config); !s.ok()) return s;
  return cl;
}

std::string HelpText() {
  std::ostringstream out;
  out << "Usage: pollend [--option value | --option=value]...\n"
         "\n"
         "Pollen node daemon: a replicated Bloom-filter cache node speaking RESP.\n"
         "Precedence: flags override environment (POLLEN_<OPTION>, '-' -> '_'), which overrides\n"
         "the config file (--config), which overrides the built-in defaults. Without --config\n"
         "the embedded default config is used (it declares the filter 'crawl:seen').\n"
         "The cluster secret (32 bytes, hex or base64) comes from --secret-file or POLLEN_SECRET,\n"
         "never from a flag. Signals: SIGTERM/SIGINT shut down cleanly, SIGUSR1 takes a snapshot.\n"
         "\nOptions (default in brackets):\n";
  for (const Option& o : Options()) {
    std::string flag = Cat("  --", o.name);
    if (o.where == Where::kNoFlag) flag = Cat("  ", o.name, " (file/env only)");
    out << flag;
    if (flag.size() < 30) out << std::string(30 - flag.size(), ' ');
    else out << "\n" << std::string(30, ' ');
    out << o.help << " [" << o.default_value << "]\n";
  }
  out << "  --help                      This text\n"
         "  --version                   Print the version\n"
         "  --print-config              Print the effective configuration (no secrets) and exit\n"
         "\nFilter sections in the config file:\n"
         "  [filter NAME]  capacity = 1000000, fpr = 0.01, generations = 2, scope = shared|digest,\n"
         "                 owner = NODE (digest only), rotate-fill = 0 (off), rotate-interval = 0 (off),\n"
         "                 expansion = 2 (0: fixed size, refuses new keys when full; default 0 with rotate-fill),\n"
         "                 routed = false (true: each new key is decided by its owner node, docs/routing.md),\n"
         "                 layout = one-block|split (split: ~30% fewer bytes per key at low rates, and a\n"
         "                 reserved scaling filter the size of RedisBloom's; a new filter only: docs/crdt.md)\n";
  return out.str();
}

std::string RenderConfig(const DaemonConfig& c) {
  std::ostringstream out;
  out << "node-name = " << c.node_name << "\n"
      << "gossip-bind = " << c.gossip_bind << "\n"
      << "advertise = " << c.advertise << "\n"
      << "seeds = " << absl::StrJoin(c.seeds, ",") << "\n"
      << "tcp-only = " << (c.tcp_only ? "true" : "false") << "\n"
      << "cluster-label = " << c.cluster_label << "\n"
      << "secret-file = " << c.secret_file << "\n"
      << "resp-bind = " << c.resp_bind << "\n"
      << "resp-password = " << (c.resp_password.empty() ? "" : "(set)") << "\n"
      << "rename-command = " << c.rename_command << "\n"
      << "bf-error-rate = " << *resp::BloomSettingValue("bf-error-rate", c.bloom) << "\n"
      << "bf-initial-size = " << c.bloom.initial_size << "\n"
      << "bf-expansion-factor = " << c.bloom.expansion << "\n"
      << "resp3-replies = " << *resp::BloomSettingValue("resp3-replies", c.bloom) << "\n"
      << "resp-threads = " << c.resp_threads << "\n"
      << "resp-busy-poll-us = " << c.resp_busy_poll_us << "\n"
      << "resp-latency-tracking = " << (c.resp_latency_tracking ? "true" : "false") << "\n"
      << "resp-max-clients = " << c.resp_max_clients << "\n"
      << "proto-max-bulk-len = " << FormatByteSize(c.proto_max_bulk_len) << "\n"
      << "max-memory = " << (c.max_memory == DaemonConfig::kAutoSize ? "auto" : FormatByteSize(c.max_memory)) << "\n"
      << "max-filter-bytes = "
      << (c.max_filter_bytes == DaemonConfig::kAutoSize ? "auto" : FormatByteSize(c.max_filter_bytes)) << "\n"
      << "resp-idle-timeout = " << FormatDuration(c.resp_idle_timeout) << "\n"
      << "http-bind = " << c.http_bind << "\n"
      << "huge-pages = " << (c.huge_pages ? "true" : "false") << "\n"
      << "data-dir = " << c.data_dir << "\n"
      << "appendfsync = " << AppendFsyncName(c.appendfsync) << "\n"
      << "snapshot-interval = " << FormatDuration(c.snapshot_interval) << "\n"
      << "gossip-interval = " << FormatDuration(c.gossip_interval) << "\n"
      << "fanout = " << c.fanout << "\n"
      << "dissemination = " << (c.dissemination == node::NodeConfig::Dissemination::kTree ? "tree" : "flood") << "\n"
      << "probe-interval = " << FormatDuration(c.probe_interval) << "\n"
      << "probe-timeout = " << FormatDuration(c.probe_timeout) << "\n"
      << "route-timeout = " << FormatDuration(c.route_timeout) << "\n"
      << "indirect-probes = " << c.indirect_probes << "\n"
      << "suspicion-multiplier = " << c.suspicion_multiplier << "\n"
      << "lifeguard = " << (c.lifeguard ? "true" : "false") << "\n"
      << "anti-entropy-interval = " << FormatDuration(c.anti_entropy_interval) << "\n"
      << "anti-entropy-max-interval = " << FormatDuration(c.anti_entropy_max_interval) << "\n"
      << "dead-reconnect-interval = " << FormatDuration(c.dead_reconnect_interval) << "\n"
      << "max-datagram-bytes = " << c.max_datagram_bytes << "\n"
      << "join-timeout = " << FormatDuration(c.join_timeout) << "\n"
      << "stream-queue-bytes = " << c.stream_queue_bytes << "\n"
      << "log-level = " << c.log_level << "\n";
  for (const auto& f : c.filters) {
    out << "\n[filter " << f.name << "]\n"
        << "capacity = " << f.capacity << "\n"
        << "fpr = " << f.fpr << "\n"
        << "generations = " << f.generations << "\n"
        << "scope = " << (f.scope == node::Scope::kDigest ? "digest" : "shared") << "\n";
    if (!f.owner.empty()) out << "owner = " << f.owner << "\n";
    out << "rotate-fill = " << f.rotate_fill << "\n"
        << "rotate-interval = " << FormatDuration(f.rotate_interval) << "\n"
        << "expansion = " << f.expansion << "\n";
    if (f.routed) out << "routed = true\n";
    out << "layout = " << (f.hash_scheme == crdt::kHashSchemeSipSplit3 ? "split" : "one-block") << "\n";
  }
  return out.str();
}

}  // namespace pollen::runtime
