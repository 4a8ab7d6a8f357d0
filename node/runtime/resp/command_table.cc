#include <algorithm>
#include <cassert>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <future>
#include <iterator>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

// Sorted by name (checked by a test through AllCommands()). The BF.* entries
// copy what RedisBloom registers (arity -1, its flags): their handlers check
// their own arity, so inside MULTI a BF command with the wrong arity is queued
// and fails in EXEC's reply, as with RedisBloom, instead of aborting EXEC.
constexpr CommandSpec kCommands[] = {
    {"auth", -2, "noscript loading stale fast no_auth", 0, 0, 0, "connection", "Authenticates the connection.", true, CmdAuth},
    {"bf.add", -1, "write denyoom module", 1, 1, 1, "bf", "Adds an item to a Bloom filter (creating it if missing).", false, CmdBfAdd},
    {"bf.card", -1, "readonly module fast", 1, 1, 1, "bf", "Estimated number of items in a Bloom filter.", false, CmdBfCard},
    {"bf.debug", -1, "readonly module fast", 1, 1, 1, "bf", "Per-sub-filter sizes of a Bloom filter (RedisBloom's BF.DEBUG shape).", false, CmdBfDebug},
    {"bf.exists", -1, "readonly module fast", 1, 1, 1, "bf", "Whether an item may be in a Bloom filter.", false, CmdBfExists},
    {"bf.info", -1, "readonly module fast", 1, 1, 1, "bf", "Information about a Bloom filter.", false, CmdBfInfo},
    {"bf.insert", -1, "write denyoom module", 1, 1, 1, "bf", "Adds items, creating the filter with the given parameters if missing.", false, CmdBfInsert},
    {"bf.loadchunk", -1, "write denyoom module", 1, 1, 1, "bf", "Restores a filter from BF.SCANDUMP chunks.", false, CmdBfLoadchunk},
    {"bf.madd", -1, "write denyoom module", 1, 1, 1, "bf", "Adds items to a Bloom filter (creating it if missing).", false, CmdBfMadd},
    {"bf.mexists", -1, "readonly module fast", 1, 1, 1, "bf", "Whether items may be in a Bloom filter.", false, CmdBfMexists},
    {"bf.reserve", -1, "write denyoom module", 1, 1, 1, "bf", "Creates a Bloom filter with a capacity and error rate.", false, CmdBfReserve},
    {"bf.scandump", -1, "readonly module fast", 1, 1, 1, "bf", "Dumps a filter in chunks (for BF.LOADCHUNK).", false, CmdBfScandump},
    {"client", -2, "admin noscript loading stale", 0, 0, 0, "connection", "Connection management: ID, GETNAME, SETNAME, SETINFO, INFO, LIST, KILL, HELP.", false, CmdClient},
    {"command", -1, "loading stale", 0, 0, 0, "server", "Details about the commands.", false, CmdCommand},
    {"config", -2, "admin noscript loading stale", 0, 0, 0, "server", "CONFIG GET (save, appendonly, proto-max-bulk-len, the bf-* settings, resp3-replies); CONFIG SET of the bf-* settings and resp3-replies.", false, CmdConfig},
    {"copy", -3, "write denyoom", 1, 2, 1, "keyspace", "COPY source destination [DB 0] [REPLACE]: a filter under another name, keeping its identity (its hash keys).", false, CmdCopy},
    {"dbsize", 1, "readonly fast", 0, 0, 0, "keyspace", "Number of keys (filters).", false, CmdDbsize},
    {"del", -2, "write", 1, -1, 1, "keyspace", "Deletes filters cluster-wide (a replicated tombstone).", false, CmdDel},
    {"discard", 1, "noscript loading stale fast allow_busy", 0, 0, 0, "transactions", "Discards a transaction.", false, CmdDiscard},
    {"echo", 2, "fast", 0, 0, 0, "connection", "Returns the given string.", false, CmdEcho},
    {"exec", 1, "noscript loading stale skip_slowlog", 0, 0, 0, "transactions", "Executes a transaction.", false, CmdExec},
    {"exists", -2, "readonly fast", 1, -1, 1, "keyspace", "Number of the given keys (filters) that exist.", false, CmdExists},
    {"flushall", -1, "write", 0, 0, 0, "server", "Deletes every filter cluster-wide, as DEL does (ASYNC and SYNC are the same).", false, CmdFlushall},
    {"flushdb", -1, "write", 0, 0, 0, "server", "Deletes every filter cluster-wide, as FLUSHALL (Pollen has one database).", false, CmdFlushall},
    {"get", 2, "readonly fast", 1, 1, 1, "string", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"getrange", 4, "readonly", 1, 1, 1, "string", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"hello", -1, "noscript loading stale fast no_auth", 0, 0, 0, "connection", "Handshake: RESP2 or RESP3, AUTH, SETNAME.", true, CmdHello},
    {"hexists", 3, "readonly fast", 1, 1, 1, "hash", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"hget", 3, "readonly fast", 1, 1, 1, "hash", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"hgetall", 2, "readonly fast", 1, 1, 1, "hash", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"hkeys", 2, "readonly fast", 1, 1, 1, "hash", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"hlen", 2, "readonly fast", 1, 1, 1, "hash", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"hmget", -3, "readonly fast", 1, 1, 1, "hash", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"hvals", 2, "readonly fast", 1, 1, 1, "hash", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"info", -1, "loading stale", 0, 0, 0, "server", "Information and statistics about the server.", false, CmdInfo},
    {"keys", 2, "readonly", 0, 0, 0, "keyspace", "Keys (filters) matching a glob pattern.", false, CmdKeys},
    {"lastsave", 1, "loading stale fast", 0, 0, 0, "server", "Unix time of the last snapshot.", false, CmdLastsave},
    {"lindex", 3, "readonly fast", 1, 1, 1, "list", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"llen", 2, "readonly fast", 1, 1, 1, "list", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"lrange", 4, "readonly fast", 1, 1, 1, "list", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"memory", -2, "readonly", 0, 0, 0, "server", "MEMORY USAGE key: bytes a filter uses.", false, CmdMemory},
    {"module", -2, "admin noscript", 0, 0, 0, "server", "MODULE LIST: the built-in bf module.", false, CmdModule},
    {"multi", 1, "noscript loading stale fast allow_busy", 0, 0, 0, "transactions", "Starts a transaction.", false, CmdMulti},
    {"object", -2, "readonly", 2, 2, 1, "keyspace", "OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key.", false, CmdObject},
    {"pfcount", -2, "readonly", 1, -1, 1, "hyperloglog", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"ping", -1, "fast", 0, 0, 0, "connection", "Returns PONG or the given message.", false, CmdPing},
    {"pollen.falsepositive", -2, "fast", 1, 1, 1, "pollen", "Reports that keys the filter answered present for were absent (observed false-positive rate).", false, CmdPollenFalsePositive},
    {"pollen.filters", 1, "readonly", 0, 0, 0, "pollen", "The filters of the cluster catalog and their state.", false, CmdPollenFilters},
    {"pollen.keyring", -2, "admin", 0, 0, 0, "pollen", "INSTALL <base64 key> | USE <id> | REMOVE <id> | LIST.", false, CmdPollenKeyring},
    {"pollen.members", 1, "readonly", 0, 0, 0, "pollen", "The cluster members as this node sees them.", false, CmdPollenMembers},
    {"pollen.qexists", -4, "readonly", 1, 1, 1, "pollen", "BF.MEXISTS that also asks up to `replicas` live peers.", false, CmdPollenQExists},
    {"pollen.rotate", 2, "write", 0, 0, 0, "pollen", "Proposes the next epoch (new generation) of a filter.", false, CmdPollenRotate},
    {"pollen.snapshot", 1, "admin", 0, 0, 0, "pollen", "Writes a snapshot now.", false, CmdPollenSnapshot},
    {"pollen.status", 1, "readonly", 0, 0, 0, "pollen", "Summary of this node.", false, CmdPollenStatus},
    {"pollen.whohas", 3, "readonly", 0, 0, 0, "pollen", "Owners of digest filters that may hold a key.", false, CmdPollenWhoHas},
    {"quit", -1, "noscript loading stale fast no_auth", 0, 0, 0, "connection", "Closes the connection.", true, CmdQuit},
    {"rename", 3, "write", 1, 2, 1, "keyspace", "Renames a filter cluster-wide: a copy under the new name, then DEL of the old.", false, CmdRename},
    {"renamenx", 3, "write fast", 1, 2, 1, "keyspace", "RENAME unless the new name exists.", false, CmdRename},
    {"reset", 1, "noscript loading stale fast no_auth allow_busy", 0, 0, 0, "connection", "Resets the connection.", true, CmdReset},
    {"role", 1, "noscript loading stale fast", 0, 0, 0, "server", "Replication role: always master.", false, CmdRole},
    {"scan", -2, "readonly", 0, 0, 0, "keyspace", "Iterates the keys (filters).", false, CmdScan},
    {"scard", 2, "readonly fast", 1, 1, 1, "set", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"select", 2, "loading stale fast", 0, 0, 0, "connection", "Only database 0 exists.", false, CmdSelect},
    {"sismember", 3, "readonly fast", 1, 1, 1, "set", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"smembers", 2, "readonly fast", 1, 1, 1, "set", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"strlen", 2, "readonly fast", 1, 1, 1, "string", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"time", 1, "loading stale fast", 0, 0, 0, "server", "The server time.", false, CmdTime},
    {"type", 2, "readonly fast", 1, 1, 1, "keyspace", "Type of a key: MBbloom-- or none.", false, CmdType},
    {"unlink", -2, "write fast", 1, -1, 1, "keyspace", "Deletes filters cluster-wide, like DEL.", false, CmdDel},
    {"unwatch", 1, "noscript loading stale fast allow_busy", 0, 0, 0, "transactions", "Forgets all WATCHed keys.", false, CmdUnwatch},
    {"wait", 3, "noscript", 0, 0, 0, "generic", "Waits until numreplicas peers hold every key this connection added (or the timeout).", false, CmdWait},
    {"watch", -2, "noscript loading stale fast allow_busy", 1, -1, 1, "transactions", "Aborts the next EXEC if the keys change.", false, CmdWatch},
    {"xlen", 2, "readonly fast", 1, 1, 1, "stream", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"zcard", 2, "readonly fast", 1, 1, 1, "sorted_set", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
    {"zscore", 3, "readonly fast", 1, 1, 1, "sorted_set", "Read of another data type: WRONGTYPE on a filter, empty when missing.", false, CmdOtherType},
};

}  // namespace

static_assert(std::size(kCommands) <= CommandStats::kMaxCommands, "CommandStats needs a slot per command");

std::span<const CommandSpec> AllCommands() { return kCommands; }

const CommandSpec* FindCommand(std::string_view name) {
  if (name.empty() || name.size() > 32) return nullptr;
  char lower[32];
  for (size_t i = 0; i < name.size(); ++i) lower[i] = absl::ascii_tolower(static_cast<unsigned char>(name[i]));
  const std::string_view key(lower, name.size());
  const auto it = std::lower_bound(std::begin(kCommands), std::end(kCommands), key,
                                   [](const CommandSpec& c, std::string_view k) { return c.name < k; });
  if (it == std::end(kCommands) || it->name != key) return nullptr;
  return &*it;
}

std::vector<std::string_view> SplitSkipEmpty(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string ToStd(absl::string_view s) { return std::string(s.data(), s.size()); }

// Redis' string2ll: an optional '-', then digits without leading zeros ("0"
// itself is fine, "-0", "007", "+1" and " 1" are not), within int64.
bool ParseInt64(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  if (s == "0") {
    *out = 0;
    return true;
  }
  const size_t digits = s[0] == '-' ? 1 : 0;
  if (digits >= s.size() || s[digits] < '1' || s[digits] > '9') return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// Redis' string2d (strtod): decimal, hex and "inf" forms; not empty, no
// leading space, nothing after the number, not NaN, no overflow or underflow.
bool ParseRedisDouble(std::string_view s, double* out) {
  if (s.empty() || s.size() > 256 || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  const std::string copy(s);  // strtod needs a terminator
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || std::isnan(v)) return false;
  if (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || v == 0)) return false;
  *out = v;
  return true;
}

bool ParseUint64(std::string_view s, uint64_t* out) {
  if (s.empty() || s[0] == '-' || s[0] == '+') return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(a[i])) != absl::ascii_tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = absl::ascii_tolower(static_cast<unsigned char>(c));
  return out;
}

std::string WrongArityMessage(std::string_view command) {
  return Cat("ERR wrong number of arguments for '", Lower(command.substr(0, 128)), "' command");
}

void ReplyWrongArity(CommandCall& call) { AppendError(call.out, WrongArityMessage(call.args[0])); }

void ReplyStatus(std::string* out, const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      AppendError(out, "ERR not found");
      return;
    case absl::StatusCode::kAlreadyExists:
      AppendError(out, "ERR item exists");
      return;
    default: {
      std::string msg(status.message().data(), status.message().size());
      if (msg.rfind("ERR ", 0) == 0) msg.erase(0, 4);
      if (msg.empty()) msg = absl::StatusCodeToString(status.code());
      AppendError(out, "ERR " + msg);
    }
  }
}

absl::Status RunOnDriver(ServerContext& ctx, std::function<absl::Status(node::Time)> fn) {
  if (!ctx.run_on_driver) return absl::UnavailableError("driver unavailable");
  return ctx.run_on_driver(std::move(fn));
}

absl::StatusOr<std::string> SnapshotAndWait(ServerContext& ctx) {
  assert(ctx.snapshot);
  auto result = std::make_shared<std::promise<absl::StatusOr<std::string>>>();
  std::future<absl::StatusOr<std::string>> answer = result->get_future();
  ctx.snapshot([result](absl::StatusOr<std::string> r) { result->set_value(std::move(r)); });
  return answer.get();
}

void ReplyAfterSnapshot(CommandCall& call, SnapshotReply reply_with) {
  assert(call.ctx.snapshot && reply_with != nullptr);
  if (!call.session.defer) return reply_with(SnapshotAndWait(call.ctx), call.out);
  DeferredReply reply = call.session.defer();
  call.ctx.snapshot([reply, reply_with](absl::StatusOr<std::string> snapshot) {
    reply([reply_with, snapshot = std::move(snapshot)](Session&, std::string* out) { reply_with(snapshot, out); });
  });
}

absl::StatusOr<NodeView> CollectNodeView(ServerContext& ctx) {
  NodeView view;
  absl::Status s = RunOnDriver(ctx, [&ctx, &view](node::Time) {
    view.refused = ctx.node->RefusedFilters();
    view.members = ctx.node->Members();
    view.counters = ctx.node->Counters();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  view.filters = ctx.node->Filters();  // scans: on this thread, not the driver's (Driver::Collect)
  return view;
}

}  // namespace pollen::resp
