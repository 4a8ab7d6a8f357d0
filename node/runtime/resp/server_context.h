// ServerContext: everything the RESP server needs from the daemon, and the
// counters it exports back. The daemon owns one ServerContext for the lifetime
// of the RespServer that uses it (it is neither copyable nor movable).
//
// Threading: RESP connections run on the IoPool's event-loop threads (a
// connection always on the same one) and call, concurrently:
//   - the thread-safe client operations of `node` (Add/AddMany/Exists/
//     ExistsMany/WhoHas/Info/name);
//   - `run_on_driver` for everything else (Reserve, Rotate, Keyring*,
//     Filters/Members/Counters for INFO and POLLEN.*). It must
//     run `fn` on the node's driver thread with the driver's current time, wait
//     for it, and return its status. It is called from a RESP handler thread and
//     blocks it, so the driver must not need that thread to make progress (run
//     the driver on its own thread or io_context);
//   - `log_adds`, `snapshot`, `info_extra` (when set), from any handler thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "node/core/node.h"
#include "node/runtime/resp/bloom_settings.h"
#include "node/runtime/resp/client_table.h"
#include "node/runtime/resp/command_names.h"
#include "node/runtime/resp/command_stats.h"
#include "node/runtime/resp/exec_gate.h"
#include "node/runtime/resp/watch.h"
#include "node/core/types.h"

namespace pollen::resp {

// Bounds on what one client may make the server hold. Every limit is enforced
// before the memory is allocated.
struct ServerLimits {
  size_t max_clients = 10'000;           // further connections are refused with an error
  size_t max_args = 1'048'576;           // arguments in one command (Redis: 1024*1024)
  // One argument ("$<n>"), bytes: config proto-max-bulk-len. Above a data
  // chunk of BF.SCANDUMP (10 MiB + 44 bytes), and above Pollen's chunks
  // before they were sized to the limit (16 MiB + 44), so those dumps load.
  size_t max_bulk_bytes = 32u << 20;
  size_t max_inline_bytes = 64u << 10;   // one inline command line (Redis: 64 KiB)
  size_t max_query_bytes = 64u << 20;    // unparsed input held for one client
  size_t max_output_bytes = 64u << 20;   // replies queued for a client that does not read
  std::chrono::seconds idle_timeout{300};  // close a silent client; 0 = never
  size_t max_batch_replies = 1024;       // commands answered per write when pipelining
  // BF.RESERVE / auto-create: refuse a filter whose generations together
  // would need more memory than this, and more than max_filters filters.
  uint64_t max_filter_bytes = uint64_t{1} << 30;
  size_t max_filters = 4096;
  // BF.SCANDUMP's data chunks carry at most this many bytes of filter words
  // (RedisBloom 2.4's MAX_SCANDUMP_SIZE), fewer where max_bulk_bytes is
  // smaller: a chunk always fits the bulk limit (DumpChunkWords).
  uint64_t dump_chunk_bytes = 10u << 20;
  // A deferred reply (a routed add, WAIT, POLLEN.QEXISTS) comes within its
  // own bound (route timeouts; WAIT's 60 s at most). Past this, the client
  // gets an error and its next requests run; a late answer still finishes
  // the command's side effects, and its reply is dropped.
  std::chrono::milliseconds deferred_backstop{90'000};
};

// Monotonic counters (and two gauges) for /metrics. Relaxed atomics.
struct ServerCounters {
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> connections_rejected{0};  // max_clients reached
  std::atomic<uint64_t> connections_current{0};   // gauge
  std::atomic<uint64_t> commands_processed{0};
  std::atomic<uint64_t> error_replies{0};         // any "-..." reply
  std::atomic<uint64_t> protocol_errors{0};       // malformed requests
  std::atomic<uint64_t> auth_failures{0};         // wrong password / NOAUTH
  std::atomic<uint64_t> loadchunk_refused{0};     // BF.LOADCHUNK chunks refused (reason in the log)
  std::atomic<uint64_t> output_limit_disconnects{0};
  std::atomic<uint64_t> idle_disconnects{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> keys_added{0};            // BF.ADD/MADD/INSERT items
  std::atomic<uint64_t> keys_queried{0};          // BF.EXISTS/MEXISTS items
  std::atomic<uint64_t> batched_requests{0};      // requests executed in pipelined runs (command_run.h)
};

struct ServerContext {
  node::Node* node = nullptr;  // required

  // Runs fn(now) on the driver thread and waits for it. Required for
  // BF.RESERVE, BF.ADD/BF.INSERT auto-create, POLLEN.ROTATE and POLLEN.KEYRING;
  // when empty those commands answer "ERR driver unavailable".
  std::function<absl::Status(std::function<absl::Status(node::Time now)>)> run_on_driver;

  // Owner-routed adds (node::Node::BeginAdd): adds `keys` to a routed filter
  // without waiting; `done` gets the owners' answers on the driver thread, or
  // an error (from any thread) if the add could not start. Empty: routed
  // filters are added to like any other (each node decides alone).
  using RoutedAddDone = std::function<void(absl::StatusOr<node::RoutedAddResult>)>;
  using RoutedKeys = std::shared_ptr<const std::vector<std::string>>;  // shared with the deferred reply: one copy
  using RoutedAddHook = std::function<void(std::string filter, RoutedKeys keys, RoutedAddDone done)>;
  RoutedAddHook routed_add;

  // WAIT and POLLEN.QEXISTS: runs begin(now) on the driver thread (a
  // Node::BeginWait or BeginQuorumExists) without waiting for it; `done`
  // gets the check's answer on the driver thread, or an error (from any
  // thread) if it could not start. Empty: WAIT answers 0 at once and
  // POLLEN.QEXISTS answers an error.
  using PeerCheckBegin = std::function<absl::StatusOr<uint64_t>(node::Time now)>;
  using PeerCheckDone = std::function<void(absl::StatusOr<node::PeerCheckResult>)>;
  std::function<void(PeerCheckBegin, PeerCheckDone)> peer_check;

  // Append-only log of adds: called AFTER the node accepted the adds and
  // BEFORE the reply is sent (so durability follows appendfsync). An error is
  // reported to the client as "ERR persistence: <message>" (the adds stay in
  // memory). A call fails or succeeds as a whole, whatever its keys: a
  // pipelined run of BF.ADD requests (command_run.h) logs its keys in one
  // call and answers every request with that call's error. May be empty.
  std::function<absl::Status(std::string_view filter, std::span<const std::string_view> keys)> log_adds;

  // DEL/UNLINK: log a delete record (a tombstone) for `filter` before the
  // node applies it. Called on the driver thread, inside run_on_driver; the
  // record is durable when run_on_driver returns. May be empty.
  std::function<absl::Status(std::string_view filter, uint64_t deleted_through)> log_delete;

  // POLLEN.SNAPSHOT, and BF.LOADCHUNK once a restore is complete: asks for a
  // snapshot that begins after the call and returns without waiting for it;
  // `done` gets a one-line description (e.g. the path) or the error, once,
  // from any thread. Empty: POLLEN.SNAPSHOT answers "ERR snapshot not
  // available" and a restore takes no snapshot.
  using SnapshotDone = std::function<void(absl::StatusOr<std::string>)>;
  std::function<void(SnapshotDone done)> snapshot;

  // Extra INFO lines from the daemon for one section ("server", "persistence",
  // "pollen", ...: "key:value\r\n" lines, appended to that section). May be
  // empty.
  std::function<std::string(std::string_view section)> info_extra;

  std::string password;  // empty: no AUTH required
  CommandNames command_names;  // the table's, unless rename-command says otherwise
  ServerLimits limits;
  // Time and count each command in command_stats (Redis' latency-tracking).
  // Off: no clock read per command, and no command stats at all.
  bool latency_tracking = true;

  // What BF.ADD / BF.MADD / BF.INSERT create for a missing filter: its
  // generations, rotation and routing (FilterConfig's defaults: 2
  // generations, shared). Its capacity, rate and expansion come from `bloom`.
  // The name is filled in per filter.
  node::FilterConfig default_filter;
  // Redis 8's bf-* settings and resp3-replies (bloom_settings.h): set from
  // the config at start, changed by CONFIG SET.
  LiveBloomSettings bloom;

  std::string version = "0.1.0";  // Pollen's version, reported by INFO
  std::chrono::steady_clock::time_point start_time = std::chrono::steady_clock::now();  // INFO uptime
  std::chrono::system_clock::time_point start_wall_time = std::chrono::system_clock::now();  // LASTSAVE before any

  ServerCounters counters;
  // Calls, outcomes and durations by command (command_stats.h), recorded by
  // the connections.
  CommandStats command_stats;

  // EXEC's atomicity across RESP threads (exec_gate.h), and the writes WATCH
  // sees (watch.h).
  ExecGate exec_gate;
  TouchLog touches;

  // The RESP port, for INFO's tcp_port (set by RespServer::Start).
  std::atomic<uint16_t> tcp_port{0};
  // The time of the last snapshot written (unix seconds; 0: none), for
  // LASTSAVE and INFO persistence. May be empty (no persistence).
  std::function<int64_t()> last_save_unix;

  // The open connections, for CLIENT ID / LIST / KILL / INFO. The server
  // registers its connections here; ids come from clients.NextId().
  ClientTable clients;

  ServerContext() = default;
  ServerContext(const ServerContext&) = delete;
  ServerContext& operator=(const ServerContext&) = delete;
};

}  // namespace pollen::resp
