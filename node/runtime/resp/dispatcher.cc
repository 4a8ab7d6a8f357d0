#include "node/runtime/resp/dispatcher.h"

#include <cassert>

#include "absl/strings/str_cat.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

// Up to the first NUL byte: Redis formats these with %s.
std::string_view CString(std::string_view s) { return s.substr(0, s.find('\0')); }

// "ERR unknown command 'x', with args beginning with: 'a' 'b' ", exactly as
// Redis 7 builds it: the name cut at 128 bytes; arguments quoted and added
// while the quoted list is under 128 bytes, each cut to what is left of 128.
std::string UnknownCommandMessage(std::span<const std::string_view> args) {
  std::string list;
  for (size_t i = 1; i < args.size() && list.size() < 128; ++i) {
    CatAppend(&list, "'", CString(args[i]).substr(0, 128 - list.size()), "' ");
  }
  return Cat("ERR unknown command '", CString(args[0]).substr(0, 128), "', with args beginning with: ", list);
}

bool ArityOk(int arity, size_t argc) {
  return arity >= 0 ? argc == static_cast<size_t>(arity) : argc >= static_cast<size_t>(-arity);
}

// Redis' rejectCommand: an error reply, and inside MULTI the transaction is
// flagged (EXEC will answer EXECABORT); a rejected EXEC answers EXECABORT with
// the reason at once (inside MULTI or not) and ends any transaction.
void Reject(Session& session, const CommandSpec* spec, std::string_view error, std::string* out) {
  if (spec != nullptr && spec->handler == CmdExec) {
    std::string_view reason = error;
    if (reason.rfind("ERR ", 0) == 0) reason.remove_prefix(4);
    AppendError(out, Cat("EXECABORT Transaction discarded because of: ", reason));
    DiscardTransaction(session);
    return;
  }
  if (session.txn.active) session.txn.dirty = true;
  AppendError(out, error);
}

// Commands that run at once inside MULTI instead of being queued.
bool RunsInsideMulti(const CommandSpec& spec) {
  return spec.handler == CmdExec || spec.handler == CmdDiscard || spec.handler == CmdMulti ||
         spec.handler == CmdWatch || spec.handler == CmdQuit || spec.handler == CmdReset;
}

void Queue(Session& session, std::span<const std::string_view> args, std::string* out) {
  Transaction& txn = session.txn;
  size_t bytes = 0;
  for (std::string_view a : args) bytes += a.size();
  if (txn.queued.size() >= Transaction::kMaxQueuedCommands || txn.queued_bytes + bytes > Transaction::kMaxQueuedBytes) {
    txn.dirty = true;
    return AppendError(out, "ERR transaction too large: at most 100000 commands and 64 MiB of arguments");
  }
  txn.queued.emplace_back(args.begin(), args.end());
  txn.queued_bytes += bytes;
  AppendSimple(out, "QUEUED");
}

}  // namespace

void Dispatch(ServerContext& context, Session& session, std::span<const std::string_view> args, std::string* out) {
  assert(!args.empty());
  assert(context.node != nullptr);
  context.counters.commands_processed.fetch_add(1, std::memory_order_relaxed);
  const size_t before = out->size();
  const CommandSpec* spec = context.command_names.Find(args[0]);
  int slot = spec == nullptr ? -1 : static_cast<int>(spec - AllCommands().data());
  CommandStats::Outcome outcome = CommandStats::Outcome::kRejected;
  if (spec == nullptr) {
    Reject(session, spec, UnknownCommandMessage(args), out);
  } else if (!context.password.empty() && !session.authenticated && !spec->no_auth) {
    Reject(session, spec, "NOAUTH Authentication required.", out);
  } else if (!ArityOk(spec->arity, args.size())) {
    Reject(session, spec, WrongArityMessage(args[0]), out);
  } else if (session.txn.active && !RunsInsideMulti(*spec)) {
    Queue(session, args, out);
    slot = -1;  // counted when EXEC runs it (as part of EXEC)
  } else {
    if (session.record != nullptr) session.record->set_last_command(spec->name.data());
    CommandCall call{context, session, args, out};
    spec->handler(call);
    outcome = CommandStats::Outcome::kOk;
  }
  assert(out->size() > before || session.deferred);
  const bool error = out->size() > before && (*out)[before] == '-';
  if (error) context.counters.error_replies.fetch_add(1, std::memory_order_relaxed);
  if (error && outcome == CommandStats::Outcome::kOk) outcome = CommandStats::Outcome::kFailed;
  // Set last: EXEC dispatches the commands it runs, which set these too.
  session.stats_slot = slot;
  session.stats_outcome = outcome;
}

void CountCommand(ServerContext& context, const Session& session, uint64_t nanos) {
  if (!context.latency_tracking || session.stats_slot < 0 || session.stats_shard < 0) return;
  context.command_stats.Record(static_cast<size_t>(session.stats_shard), static_cast<size_t>(session.stats_slot),
                               nanos, session.stats_outcome);
}

std::string_view CommandSlotName(size_t slot) {
  const auto all = AllCommands();
  return slot < all.size() ? all[slot].name : std::string_view();
}

}  // namespace pollen::resp
