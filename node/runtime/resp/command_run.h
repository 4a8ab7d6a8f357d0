// Pipelined runs: a client's consecutive BF.ADD requests on one filter (or
// BF.EXISTS requests on one filter), executed as one batch.
//
// Promise: DispatchRun appends, request by request, the reply Dispatch would
// append for each request alone, and changes what those requests would
// change (the filter, persistence, the session's WAIT record, counters); no
// other request of this client runs in between, as with one Dispatch each.
// What differs: the run looks its filter up once, hashes and probes its keys
// as one batch (prefetching blocks, as BF.MADD), logs them as one record for
// persistence and touches the filter once for WATCH (which compares touch
// counts for equality only). Each request counts in the command stats with
// the run's time divided by its length: the requests ran together, so each
// one's share is the only per-request time there is.
//
// Why: at pipeline 16 with 8 clients, BF.ADD one request at a time spent
// about half of the server's user time on per-request work (two filter
// lookups, each a grace-period section and a shared_ptr copy; five vector
// allocations; a cache miss per key with nothing to overlap it). Figures:
// node/runtime/resp/README.md, "Pipelined runs".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/server_context.h"

namespace pollen::resp {

enum class RunKind : uint8_t { kNone, kAdd, kExists };

// At most this many requests per run: bounds the run's reply and its batch
// buffers, and keeps one client's run from holding the thread long.
inline constexpr size_t kMaxRunRequests = 256;

// The run `args` (one whole request) can start: kAdd for BF.ADD key item,
// kExists for BF.EXISTS key item, kNone for anything Dispatch must see alone
// (any other command or arity, inside MULTI, before AUTH).
RunKind RunKindOf(const ServerContext& ctx, const Session& session, std::span<const std::string_view> args);

// Whether a run of `kind` on `filter` may execute as a batch: not the adds
// of a routed filter, whose owners decide (each such add defers its reply).
// Asked once a second request continues the run, so a lone request (no
// pipeline) pays nothing for it.
bool RunMayBatch(ServerContext& ctx, RunKind kind, std::string_view filter);

// Whether request `next` continues the run that request `first` started:
// the same command name (byte for byte) on the same filter, one item.
bool ContinuesRun(std::span<const std::string_view> first, std::span<const std::string_view> next);

struct RunResult {
  size_t requests = 0;
  size_t errors = 0;  // requests answered with an error
};

// Executes a run of items.size() requests (>= 1) of `kind` on `filter`:
// items[i] is request i's item. Counts them as Dispatch would count each.
// nullopt, with nothing changed and nothing appended, when the run's adds
// turn out to need the owners of a routed filter (RunMayBatch said yes, but
// the filter was made routed since): Dispatch them one by one.
std::optional<RunResult> DispatchRun(ServerContext& ctx, Session& session, RunKind kind, std::string_view filter,
                                     std::span<const std::string_view> items, std::string* out);

// CountCommand for a run that took `nanos` in all.
void CountRun(ServerContext& ctx, const Session& session, RunKind kind, const RunResult& run, uint64_t nanos);

}  // namespace pollen::resp
