// DaemonConfig: every pollend setting, and how it is assembled.
//
// Sources, lowest precedence first:
//   1. the built-in defaults (each option's default below),
//   2. a config file (--config / POLLEN_CONFIG; when none is given, the embedded
//      default config kEmbeddedConfig, which declares the demo filter),
//   3. the environment (POLLEN_<OPTION> with '-' -> '_' and upper case),
//   4. command-line flags (--option value or --option=value).
// So a flag overrides the environment, which overrides the file.
//
// File format (documented in docs/configuration.md):
//   # comment             blank lines are ignored
//   option = value        any option below except the flag/env-only ones
//   [filter NAME]         starts a filter section; keys: capacity, fpr,
//                         generations, scope, owner, rotate-fill, rotate-interval
// Every error names the option (and the file line), e.g.
//   "pollen.conf:7: option 'fanout': expected an integer in [1, 64], got 'x'".
//
// Secrets: the cluster secret comes only from --secret-file (a path) or the
// POLLEN_SECRET environment variable, never from a flag value. The RESP
// password (resp-password) is accepted from the file and the environment only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "node/core/node.h"
#include "node/core/types.h"
#include "node/runtime/resp/bloom_settings.h"

namespace pollen::runtime {

enum class AppendFsync : uint8_t { kNone, kEverySec, kAlways };
std::string_view AppendFsyncName(AppendFsync mode);

struct DaemonConfig {
  std::string config_file;   // where the file layer came from ("" = embedded)
  std::string node_name;
  std::string gossip_bind;   // host:port, UDP and TCP on the same port
  std::string advertise;     // host:port peers use; "" = gossip_bind
  std::vector<std::string> seeds;
  bool tcp_only = false;
  std::string cluster_label;
  std::string secret_file;

  std::string resp_bind;
  std::string resp_password;  // never logged
  std::string rename_command;  // NAME=NEWNAME,... (resp::CommandNames::Parse)
  resp::BloomSettings bloom;   // bf-error-rate, bf-initial-size, bf-expansion-factor, resp3-replies
  uint32_t resp_threads = 1;
  uint32_t resp_busy_poll_us = 50;
  bool resp_latency_tracking = true;
  uint32_t resp_max_clients = 0;
  uint64_t proto_max_bulk_len = 0;  // bytes in one RESP argument (Redis' proto-max-bulk-len)
  node::Duration resp_idle_timeout{0};

  std::string http_bind;     // "" = HTTP disabled

  // Memory budget (NodeConfig::max_memory_bytes, max_filter_bytes; 0 = no
  // limit). "auto" (the default) resolves after every layer is applied:
  // max-memory to 75% of the machine's memory (or of the cgroup's limit),
  // max-filter-bytes to max-memory.
  static constexpr uint64_t kAutoSize = ~uint64_t{0};
  uint64_t max_memory = kAutoSize;
  uint64_t max_filter_bytes = kAutoSize;
  bool huge_pages = true;  // crdt::SetHugePages, before any filter is made

  std::string data_dir;      // "" = no persistence
  AppendFsync appendfsync = AppendFsync::kEverySec;
  node::Duration snapshot_interval{0};

  node::Duration gossip_interval{0};
  uint32_t fanout = 0;
  node::NodeConfig::Dissemination dissemination = node::NodeConfig::Dissemination::kTree;
  node::Duration probe_interval{0};
  node::Duration probe_timeout{0};
  node::Duration route_timeout{0};  // NodeConfig::route_timeout
  uint32_t indirect_probes = 0;
  double suspicion_multiplier = 0;
  bool lifeguard = true;
  node::Duration anti_entropy_interval{0};
  node::Duration anti_entropy_max_interval{0};  // NodeConfig::anti_entropy_max_interval
  node::Duration dead_reconnect_interval{0};
  uint32_t max_datagram_bytes = 0;
  node::Duration join_timeout{0};
  uint64_t stream_queue_bytes = 0;  // per-peer TCP send queue bound

  std::string log_level;

  std::vector<node::FilterConfig> filters;
};

// The embedded default config file (used when no --config is given).
extern const char kEmbeddedConfig[];

// Parses a config file's text into `config` (which holds earlier layers).
// `source` names the file in errors. Filters in the text replace any earlier
// filter list.
absl::Status ApplyConfigText(std::string_view text, std::string_view source, DaemonConfig* config);

// Sets one option by its name (as in the file; "--" and "POLLEN_" forms are the
// caller's business). `origin` prefixes errors ("--fanout", "POLLEN_FANOUT").
absl::Status ApplyOption(std::string_view name, std::string_view value, std::string_view origin,
                         DaemonConfig* config);

// Cross-option checks after all layers (names the offending option).
absl::Status ValidateConfig(const DaemonConfig& config);

// What main() gets from argv + environment.
struct CommandLine {
  bool help = false;
  bool version = false;
  bool print_config = false;
  DaemonConfig config;
};

// Builds the full configuration: defaults, file (from --config or
// POLLEN_CONFIG, read from disk), environment (via `getenv`), flags.
// `getenv` is injectable for tests; pass nullptr for ::getenv.
using GetEnvFn = const char* (*)(const char*);
absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv, GetEnvFn getenv);

// --help text: every option with its default.
std::string HelpText();

// The effective configuration as file text, without secrets.
std::string RenderConfig(const DaemonConfig& config);

// Parses durations like "250ms", "10s", "5m", "1h", "0".
absl::StatusOr<node::Duration> ParseDuration(std::string_view text);
std::string FormatDuration(node::Duration d);

// Physical memory, or the cgroup's memory limit when lower (0 if unknown).
uint64_t MachineMemoryBytes();

// Parses sizes as Redis' config does: a byte count, or an integer with k, m, g
// (10^3, 10^6, 10^9) or kb, mb, gb (2^10, 2^20, 2^30), any case.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);
// The shortest exact form ParseByteSize reads back: "32mb", "1000", "3gb".
std::string FormatByteSize(uint64_t bytes);

}  // namespace pollen::runtime
