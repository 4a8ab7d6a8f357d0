// Internal to the dispatcher: the command table and the handlers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/server_context.h"

namespace pollen::resp {

struct CommandCall {
  ServerContext& ctx;
  Session& session;
  std::span<const std::string_view> args;
  std::string* out;
};

using CommandHandler = void (*)(CommandCall&);

struct CommandSpec {
  std::string_view name;   // lower case, as COMMAND reports it; a string literal (NUL-terminated)
  int arity;               // Redis convention: n exact, -n at least n
  std::string_view flags;  // space-separated Redis command flags
  int first_key, last_key, key_step;
  std::string_view group;
  std::string_view summary;
  bool no_auth;            // allowed before AUTH
  CommandHandler handler;
};

// All commands, sorted by name.
std::span<const CommandSpec> AllCommands();
// Case-insensitive lookup; nullptr when unknown.
const CommandSpec* FindCommand(std::string_view name);

// String building that accepts std::string_view (Debian's Abseil has its own
// absl::string_view, so absl::StrCat does not take std::string_view).
namespace cat_internal {
inline void One(std::string* s, std::string_view v) { s->append(v); }
inline void One(std::string* s, const char* v) { s->append(v); }
inline void One(std::string* s, const std::string& v) { s->append(v); }
inline void One(std::string* s, char v) { s->push_back(v); }
template <class T>
  requires std::is_arithmetic_v<T>
void One(std::string* s, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    s->append(absl::StrCat(v));
  } else {
    s->append(std::to_string(v));
  }
}
}  // namespace cat_internal
template <class... A>
void CatAppend(std::string* s, const A&... a) {
  (cat_internal::One(s, a), ...);
}
template <class... A>
std::string Cat(const A&... a) {
  std::string s;
  CatAppend(&s, a...);
  return s;
}
// Splits on `sep`, dropping empty pieces.
std::vector<std::string_view> SplitSkipEmpty(std::string_view s, char sep);
std::string ToStd(absl::string_view s);

// Argument helpers (strict: the whole string must parse).
bool ParseInt64(std::string_view s, int64_t* out);
bool ParseUint64(std::string_view s, uint64_t* out);
bool ParseRedisDouble(std::string_view s, double* out);  // Redis' strtod rules (inf allowed, NaN not)
bool IEquals(std::string_view a, std::string_view b);
std::string Lower(std::string_view s);

// CLIENT SETNAME's rule: at most 256 bytes, printable ASCII without spaces.
bool ValidClientName(std::string_view name);
// Sets the session's name and its ClientRecord's (CLIENT SETNAME, HELLO SETNAME).
void SetSessionName(Session& session, std::string_view name);
// Sets the session's protocol and its ClientRecord's (HELLO, RESET).
void SetSessionProto(Session& session, Proto proto);

// "ERR wrong number of arguments for '<cmd>' command"
std::string WrongArityMessage(std::string_view command);
void ReplyWrongArity(CommandCall& call);
// Ends the session's MULTI block and forgets its WATCHes.
void DiscardTransaction(Session& session);
// NotFound -> "ERR not found", AlreadyExists -> "ERR item exists", else
// "ERR <message>".
void ReplyStatus(std::string* out, const absl::Status& status);
// The filter's node::FilterVersion::incarnation, 0 when it does not exist.
uint64_t IncarnationOf(const node::Node& node, std::string_view filter);
// Runs fn on the driver thread via the context hook.
absl::Status RunOnDriver(ServerContext& ctx, std::function<absl::Status(node::Time)> fn);
// Asks ctx.snapshot (which must be set) for a snapshot and waits for it: for
// a command inside EXEC, whose reply cannot be deferred (its RESP thread
// waits, as Redis' SAVE does).
absl::StatusOr<std::string> SnapshotAndWait(ServerContext& ctx);
// Asks call.ctx.snapshot (which must be set) for a snapshot and answers the
// command with reply_with(its result) once it is written: deferred, so the
// RESP thread serves its other clients meanwhile, or waiting as
// SnapshotAndWait does where the reply cannot be deferred (inside EXEC).
using SnapshotReply = void (*)(const absl::StatusOr<std::string>& snapshot, std::string* out);
void ReplyAfterSnapshot(CommandCall& call, SnapshotReply reply_with);

// Node::Filters/Members/Counters are driver-thread calls (node.h lists only
// Add/AddMany/Exists/ExistsMany/WhoHas/Info as thread-safe), so they go
// through the driver hook too.
struct NodeView {
  std::vector<node::FilterInfo> filters;
  std::vector<node::Node::RefusedFilter> refused;  // in the catalog, over this node's memory budget
  std::vector<node::MemberInfo> members;
  node::NodeCounters counters;
};
absl::StatusOr<NodeView> CollectNodeView(ServerContext& ctx);

// Handlers.
void CmdBfReserve(CommandCall& call);
void CmdBfAdd(CommandCall& call);
void CmdBfMadd(CommandCall& call);
void CmdBfInsert(CommandCall& call);
void CmdBfExists(CommandCall& call);
// A run of BF.ADD (BF.EXISTS) requests on one filter, one item each
// (command_run.h): appends one reply per item, each what that request
// would get alone, and returns how many of them are errors. RunBfAdds
// returns nullopt, having changed nothing, when the filter is routed (its
// owners decide each add: the requests must run one by one).
std::optional<size_t> RunBfAdds(ServerContext& ctx, Session& session, std::string_view filter,
                                std::span<const std::string_view> items, std::string* out);
size_t RunBfExists(ServerContext& ctx, const Session& session, std::string_view filter,
                   std::span<const std::string_view> items, std::string* out);
void CmdBfMexists(CommandCall& call);
void CmdBfCard(CommandCall& call);
void CmdBfDebug(CommandCall& call);
void CmdBfInfo(CommandCall& call);
void CmdBfScandump(CommandCall& call);
void CmdBfLoadchunk(CommandCall& call);

void CmdPing(CommandCall& call);
void CmdEcho(CommandCall& call);
void CmdQuit(CommandCall& call);
void CmdSelect(CommandCall& call);
void CmdAuth(CommandCall& call);
void CmdHello(CommandCall& call);
void CmdClient(CommandCall& call);
void CmdConfig(CommandCall& call);
void CmdInfo(CommandCall& call);
void CmdCommand(CommandCall& call);

void CmdExists(CommandCall& call);
void CmdDel(CommandCall& call);  // and UNLINK
void CmdFlushall(CommandCall& call);  // and FLUSHDB
void CmdCopy(CommandCall& call);
void CmdRename(CommandCall& call);  // and RENAMENX
// A copy of filter `src` named `dst` (which must not exist), made on this
// node from its live bits and replicated as a new filter; it keeps the
// source's identity, so its bits answer for the same keys (commands_dump.cc).
// NotFound without `src`; a limit's error (max-filter-bytes, max-memory);
// Aborted if the source rotated, grew or went meanwhile (nothing changed).
absl::Status CopyFilter(ServerContext& ctx, std::string_view src, std::string_view dst);
void CmdType(CommandCall& call);
void CmdDbsize(CommandCall& call);
void CmdKeys(CommandCall& call);
void CmdScan(CommandCall& call);
void CmdObject(CommandCall& call);
void CmdMemory(CommandCall& call);
void CmdOtherType(CommandCall& call);
void CmdTime(CommandCall& call);
void CmdWait(CommandCall& call);  // commands_wait.cc
void CmdRole(CommandCall& call);
void CmdLastsave(CommandCall& call);
void CmdModule(CommandCall& call);

void CmdMulti(CommandCall& call);
void CmdExec(CommandCall& call);
void CmdDiscard(CommandCall& call);
void CmdWatch(CommandCall& call);
void CmdUnwatch(CommandCall& call);
void CmdReset(CommandCall& call);

void CmdPollenStatus(CommandCall& call);
void CmdPollenMembers(CommandCall& call);
void CmdPollenFilters(CommandCall& call);
void CmdPollenFalsePositive(CommandCall& call);
void CmdPollenRotate(CommandCall& call);
void CmdPollenWhoHas(CommandCall& call);
void CmdPollenQExists(CommandCall& call);  // commands_wait.cc
void CmdPollenKeyring(CommandCall& call);
void CmdPollenSnapshot(CommandCall& call);

}  // namespace pollen::resp
