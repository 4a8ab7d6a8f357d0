// Transactions: MULTI EXEC DISCARD WATCH UNWATCH, and RESET. Redis 7's rules
// and replies:
//   - inside MULTI every command but EXEC, DISCARD, MULTI, WATCH, QUIT and
//     RESET is queued (+QUEUED); one that fails to queue (unknown command,
//     wrong arity, NOAUTH) flags the transaction, and EXEC then answers
//     EXECABORT and discards it (the queuing itself is in dispatcher.cc);
//   - EXEC runs the queued commands with no other client's command in between
//     (ServerContext::exec_gate), replying with an array of their replies
//     (errors included); or, if a WATCHed filter changed since WATCH (a bit
//     set by any client or by replication, a rotation, a creation or a
//     replacement: node::FilterVersion), a null array and nothing runs;
//   - EXEC and DISCARD forget the WATCHes.
// A write command counts as a change even when it sets no bit (watch.h).
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/fast_clock.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {

void DiscardTransaction(Session& session) {
  session.txn = Transaction{};
  session.watched.Clear();
}

void CmdMulti(CommandCall& call) {
  if (call.session.txn.active) return AppendError(call.out, "ERR MULTI calls can not be nested");
  call.session.txn.active = true;
  AppendSimple(call.out, "OK");
}

void CmdDiscard(CommandCall& call) {
  if (!call.session.txn.active) return AppendError(call.out, "ERR DISCARD without MULTI");
  DiscardTransaction(call.session);
  AppendSimple(call.out, "OK");
}

void CmdExec(CommandCall& call) {
  Session& session = call.session;
  if (!session.txn.active) return AppendError(call.out, "ERR EXEC without MULTI");
  if (session.txn.dirty) {
    DiscardTransaction(session);
    return AppendError(call.out, "EXECABORT Transaction discarded because of previous errors.");
  }
  Transaction txn = std::move(session.txn);
  session.txn = Transaction{};
  // Nothing inside EXEC waits for peers (it holds every RESP thread's gate):
  // WAIT answers at once, as Redis' does inside MULTI.
  std::function<DeferredReply()> defer = std::move(session.defer);
  session.defer = nullptr;
  call.ctx.exec_gate.RunExclusive(session.gate_stripe, [&] {
    if (!session.watched.Unchanged(*call.ctx.node)) return AppendNullArray(call.out, session.proto);
    AppendArrayHeader(call.out, txn.queued.size());
    std::vector<std::string_view> args;
    for (const std::vector<std::string>& command : txn.queued) {
      args.assign(command.begin(), command.end());
      // Each counts in commandstats under its own name, as Redis' (and
      // EXEC then counts the whole).
      const uint64_t started = FastNanos();
      Dispatch(call.ctx, session, args, call.out);
      const uint64_t ended = FastNanos();
      CountCommand(call.ctx, session, ended > started ? ended - started : 0);
    }
  });
  session.defer = std::move(defer);
  session.watched.Clear();
}

void CmdWatch(CommandCall& call) {
  if (call.session.txn.active) return AppendError(call.out, "ERR WATCH inside MULTI is not allowed");
  for (size_t i = 1; i < call.args.size(); ++i) call.session.watched.Add(call.ctx.touches, *call.ctx.node, call.args[i]);
  AppendSimple(call.out, "OK");
}

void CmdUnwatch(CommandCall& call) {
  call.session.watched.Clear();
  AppendSimple(call.out, "OK");
}

// Redis 7's RESET, for what Pollen has: ends MULTI, forgets WATCHes, back to
// RESP2, clears the name, and requires AUTH again when a password is set.
void CmdReset(CommandCall& call) {
  Session& session = call.session;
  DiscardTransaction(session);
  SetSessionProto(session, Proto::kResp2);
  SetSessionName(session, "");
  if (!call.ctx.password.empty()) session.authenticated = false;
  AppendSimple(call.out, "RESET");
}

}  // namespace pollen::resp
