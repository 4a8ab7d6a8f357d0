#include "node/runtime/resp/command_run.h"

#include <cassert>

#include "node/runtime/resp/commands.h"

namespace pollen::resp {

RunKind RunKindOf(const ServerContext& ctx, const Session& session, std::span<const std::string_view> args) {
  if (args.size() != 3 || session.txn.active) return RunKind::kNone;
  if (!ctx.password.empty() && !session.authenticated) return RunKind::kNone;
  if (!ctx.command_names.renames_none()) {  // BF.ADD or BF.EXISTS may answer to another name, or to none
    const CommandSpec* spec = ctx.command_names.Find(args[0]);
    if (spec == nullptr) return RunKind::kNone;
    if (spec->name == "bf.add") return RunKind::kAdd;
    return spec->name == "bf.exists" ? RunKind::kExists : RunKind::kNone;
  }
  if (IEquals(args[0], "bf.add")) return RunKind::kAdd;
  if (IEquals(args[0], "bf.exists")) return RunKind::kExists;
  return RunKind::kNone;
}

bool RunMayBatch(ServerContext& ctx, RunKind kind, std::string_view filter) {
  if (kind != RunKind::kAdd || !ctx.routed_add) return true;
  if (ctx.node->IsRouted(filter)) return false;
  // A missing filter is created by the first add, routed if the default is.
  return !ctx.default_filter.routed || ctx.node->Version(filter).has_value();
}

bool ContinuesRun(std::span<const std::string_view> first, std::span<const std::string_view> next) {
  return next.size() == 3 && next[0] == first[0] && next[1] == first[1];
}

std::optional<RunResult> DispatchRun(ServerContext& ctx, Session& session, RunKind kind, std::string_view filter,
                                     std::span<const std::string_view> items, std::string* out) {
  assert(kind != RunKind::kNone && !items.empty() && items.size() <= kMaxRunRequests);
  RunResult run{items.size(), 0};
  if (kind == RunKind::kAdd) {
    const std::optional<size_t> errors = RunBfAdds(ctx, session, filter, items, out);
    if (!errors.has_value()) return std::nullopt;
    run.errors = *errors;
  } else {
    run.errors = RunBfExists(ctx, session, filter, items, out);
  }
  if (session.record != nullptr) session.record->set_last_command(kind == RunKind::kAdd ? "bf.add" : "bf.exists");
  ctx.counters.commands_processed.fetch_add(items.size(), std::memory_order_relaxed);
  if (items.size() > 1) ctx.counters.batched_requests.fetch_add(items.size(), std::memory_order_relaxed);
  if (run.errors > 0) ctx.counters.error_replies.fetch_add(run.errors, std::memory_order_relaxed);
  return run;
}

void CountRun(ServerContext& ctx, const Session& session, RunKind kind, const RunResult& run, uint64_t nanos) {
  if (!ctx.latency_tracking || session.stats_shard < 0 || run.requests == 0) return;
  static const size_t add_slot = static_cast<size_t>(FindCommand("bf.add") - AllCommands().data());
  static const size_t exists_slot = static_cast<size_t>(FindCommand("bf.exists") - AllCommands().data());
  const size_t slot = kind == RunKind::kAdd ? add_slot : exists_slot;
  const uint64_t each = nanos / run.requests;
  const auto shard = static_cast<size_t>(session.stats_shard);
  for (size_t i = 0; i < run.requests; ++i) {
    const auto outcome = i < run.errors ? CommandStats::Outcome::kFailed : CommandStats::Outcome::kOk;
    ctx.command_stats.Record(shard, slot, each, outcome);
  }
}

}  // namespace pollen::resp
