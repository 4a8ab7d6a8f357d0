// The keyspace as Redis clients see it: every filter is a key of type
// MBbloom-- (RedisBloom's type name) in database 0. DEL UNLINK EXISTS TYPE
// DBSIZE KEYS SCAN OBJECT MEMORY, and the read commands of other data types, which answer
// as a Redis holding only Bloom keys would (WRONGTYPE on a filter, the empty
// reply on a missing key).
//
// SCAN's cursor is a position in a fixed order of names, not an index: the
// names sorted by h(name) = (FilterIdForName(name) >> 12) | 1, and the cursor
// is the h of the next name to return (0: start, and end). h has 52 bits so a
// cursor survives clients that hold it in a double (node-redis parses it with
// Number(): a 64-bit cursor came back rounded and the scan skipped names). So a name present for the
// whole iteration is returned exactly once however the set changes around it,
// which is Redis' guarantee (at least once) and more. Names with equal h are
// never split across calls.
#include <algorithm>

#include "crdt/keyed_hash.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/glob.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

constexpr std::string_view kBloomType = "MBbloom--";

uint64_t ScanOrder(std::string_view name) { return (crdt::FilterIdForName(name) >> 12) | 1; }

bool Exists(const CommandCall& call, std::string_view name) { return call.ctx.node->Version(name).has_value(); }

// Redis' cursor parsing (strtoull: "-1" is 2^64-1).
bool ParseCursor(std::string_view s, uint64_t* out) {
  if (ParseUint64(s, out)) return true;
  int64_t v = 0;
  if (!ParseInt64(s, &v)) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

}  // namespace

void CmdExists(CommandCall& call) {
  int64_t n = 0;
  for (size_t i = 1; i < call.args.size(); ++i) n += Exists(call, call.args[i]);
  AppendInteger(call.out, n);
}

namespace {

// Deletes each filter of `names` that exists here: a tombstone in the
// replicated catalog (node/core/catalog.h). The delete record is logged
// before the node applies the deletion (write-ahead, so a replay knows which
// adds went to the deleted filter) and is durable under appendfsync always
// before this returns (the daemon's run_on_driver waits). Returns how many
// existed.
absl::StatusOr<int64_t> DeleteFilters(CommandCall& call, std::span<const std::string_view> names) {
  ServerContext& ctx = call.ctx;
  int64_t deleted = 0;
  const absl::Status s = RunOnDriver(ctx, [&](node::Time now) -> absl::Status {
    for (const std::string_view name : names) {
      absl::StatusOr<node::FilterInfo> info = ctx.node->Info(name, node::InfoParts::kEpochsOnly);
      if (!info.ok()) continue;  // missing (or deleted by an earlier argument)
      if (ctx.log_delete) {
        if (absl::Status logged = ctx.log_delete(name, info->stamp); !logged.ok()) return logged;
      }
      absl::StatusOr<bool> gone = ctx.node->Delete(name, now);
      if (!gone.ok()) return gone.status();
      deleted += *gone ? 1 : 0;
    }
    return absl::OkStatus();
  });
  for (const std::string_view name : names) ctx.touches.Touch(name);
  if (!s.ok()) return s;
  return deleted;
}

}  // namespace

// DEL / UNLINK: deletes filters cluster-wide and answers how many existed
// here. UNLINK is DEL: a filter's memory is released when its last reader is
// done, off the command's path either way.
void CmdDel(CommandCall& call) {
  const absl::StatusOr<int64_t> deleted = DeleteFilters(call, call.args.subspan(1));
  if (!deleted.ok()) return ReplyStatus(call.out, deleted.status());
  AppendInteger(call.out, *deleted);
}

// FLUSHALL / FLUSHDB [ASYNC|SYNC]: every filter the node lists, deleted as
// DEL deletes them (tombstones that reach the whole cluster). A filter a
// peer creates meanwhile, not yet in this node's catalog, is not deleted.
// rename-command disables them (CommandNames).
void CmdFlushall(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() > 2 || (a.size() == 2 && !IEquals(a[1], "async") && !IEquals(a[1], "sync"))) {
    return AppendError(call.out, "ERR syntax error");
  }
  const std::vector<std::string> names = call.ctx.node->FilterNames();
  const std::vector<std::string_view> views(names.begin(), names.end());
  const absl::StatusOr<int64_t> deleted = DeleteFilters(call, views);
  if (!deleted.ok()) return ReplyStatus(call.out, deleted.status());
  AppendSimple(call.out, "OK");
}

// COPY / RENAME / RENAMENX, with Redis' replies and errors. A copy's bits
// did not come through the add log, so, as a restored filter's, they are
// durable once a snapshot holds them: COPY answers after one, and RENAME
// waits for it before it deletes the source (a crash in between leaves both
// names, never neither). RENAME is a copy, then DEL of the source: adds to
// the source that reach this node after the copy are not in it (on other
// nodes, those of about the last gossip round).

void CmdCopy(CommandCall& call) {
  const auto& a = call.args;
  bool replace = false;
  int64_t db = 0;
  for (size_t i = 3; i < a.size(); ++i) {
    if (IEquals(a[i], "REPLACE")) {
      replace = true;
    } else if (IEquals(a[i], "DB") && i + 1 < a.size()) {
      if (!ParseInt64(a[++i], &db)) return AppendError(call.out, "ERR value is not an integer or out of range");
    } else {
      return AppendError(call.out, "ERR syntax error");
    }
  }
  if (a[1] == a[2] && db == 0) return AppendError(call.out, "ERR source and destination objects are the same");
  if (!Exists(call, a[1])) return AppendInteger(call.out, 0);
  if (db != 0) return AppendError(call.out, "ERR DB index is out of range");  // one database
  if (Exists(call, a[2])) {
    if (!replace) return AppendInteger(call.out, 0);
    const std::string_view dst[] = {a[2]};
    if (absl::StatusOr<int64_t> s = DeleteFilters(call, dst); !s.ok()) return ReplyStatus(call.out, s.status());
  }
  if (absl::Status s = CopyFilter(call.ctx, a[1], a[2]); !s.ok()) return ReplyStatus(call.out, s);
  call.ctx.touches.Touch(a[2]);
  if (!call.ctx.snapshot) return AppendInteger(call.out, 1);
  ReplyAfterSnapshot(call, [](const absl::StatusOr<std::string>& snap, std::string* out) {
    if (!snap.ok()) return AppendError(out, Cat("ERR persistence: ", ToStd(snap.status().message())));
    AppendInteger(out, 1);
  });
}

void CmdRename(CommandCall& call) {
  const auto& a = call.args;
  const bool nx = IEquals(a[0], "renamenx");
  if (!Exists(call, a[1])) return AppendError(call.out, "ERR no such key");
  if (a[1] == a[2]) return nx ? AppendInteger(call.out, 0) : AppendSimple(call.out, "OK");
  if (Exists(call, a[2])) {
    if (nx) return AppendInteger(call.out, 0);
    const std::string_view dst[] = {a[2]};
    if (absl::StatusOr<int64_t> s = DeleteFilters(call, dst); !s.ok()) return ReplyStatus(call.out, s.status());
  }
  if (absl::Status s = CopyFilter(call.ctx, a[1], a[2]); !s.ok()) return ReplyStatus(call.out, s);
  if (call.ctx.snapshot) {  // the copy durable before the source goes (waits, as SAVE)
    absl::StatusOr<std::string> snap = SnapshotAndWait(call.ctx);
    if (!snap.ok()) return AppendError(call.out, Cat("ERR persistence: ", ToStd(snap.status().message())));
  }
  const std::string_view src[] = {a[1]};
  if (absl::StatusOr<int64_t> s = DeleteFilters(call, src); !s.ok()) return ReplyStatus(call.out, s.status());
  call.ctx.touches.Touch(a[2]);
  return nx ? AppendInteger(call.out, 1) : AppendSimple(call.out, "OK");
}

void CmdType(CommandCall& call) { AppendSimple(call.out, Exists(call, call.args[1]) ? kBloomType : "none"); }

void CmdDbsize(CommandCall& call) { AppendInteger(call.out, static_cast<int64_t>(call.ctx.node->FilterNames().size())); }

void CmdKeys(CommandCall& call) {
  std::vector<std::string> names = call.ctx.node->FilterNames();
  std::erase_if(names, [&](const std::string& n) { return !GlobMatch(call.args[1], n); });
  AppendArrayHeader(call.out, names.size());
  for (const std::string& n : names) AppendBulk(call.out, n);
}

void CmdScan(CommandCall& call) {
  const auto& a = call.args;
  uint64_t cursor = 0;
  if (!ParseCursor(a[1], &cursor)) return AppendError(call.out, "ERR invalid cursor");
  std::optional<std::string_view> pattern, type;
  int64_t count = 10;
  for (size_t i = 2; i < a.size(); i += 2) {
    if (i + 1 >= a.size()) return AppendError(call.out, "ERR syntax error");
    if (IEquals(a[i], "COUNT")) {
      if (!ParseInt64(a[i + 1], &count)) return AppendError(call.out, "ERR value is not an integer or out of range");
      if (count < 1) return AppendError(call.out, "ERR syntax error");
    } else if (IEquals(a[i], "MATCH")) {
      pattern = a[i + 1];
    } else if (IEquals(a[i], "TYPE")) {
      type = a[i + 1];
    } else {
      return AppendError(call.out, "ERR syntax error");
    }
  }
  std::vector<std::pair<uint64_t, std::string>> order;
  for (std::string& n : call.ctx.node->FilterNames()) order.emplace_back(ScanOrder(n), std::move(n));
  std::sort(order.begin(), order.end());
  auto it = std::lower_bound(order.begin(), order.end(), cursor,
                             [](const auto& e, uint64_t c) { return e.first < c; });
  std::vector<std::string_view> batch;
  int64_t visited = 0;
  for (; it != order.end(); ++it) {
    if (visited >= count && it->first != std::prev(it)->first) break;  // never split equal orders
    ++visited;
    if (type && !IEquals(*type, kBloomType)) continue;
    if (pattern && !GlobMatch(*pattern, it->second)) continue;
    batch.push_back(it->second);
  }
  AppendArrayHeader(call.out, 2);
  AppendBulk(call.out, std::to_string(it == order.end() ? 0 : it->first));
  AppendArrayHeader(call.out, batch.size());
  for (std::string_view n : batch) AppendBulk(call.out, n);
}

void CmdObject(CommandCall& call) {
  const auto& a = call.args;
  const Proto proto = call.session.proto;
  if (IEquals(a[1], "HELP")) {
    static constexpr std::string_view kHelp[] = {
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help."};
    AppendArrayHeader(call.out, std::size(kHelp));
    for (std::string_view line : kHelp) AppendSimple(call.out, line);
    return;
  }
  const bool known = IEquals(a[1], "ENCODING") || IEquals(a[1], "REFCOUNT") || IEquals(a[1], "IDLETIME") ||
                     IEquals(a[1], "FREQ");
  if (!known) return AppendError(call.out, Cat("ERR unknown subcommand '", a[1].substr(0, 128), "'. Try OBJECT HELP."));
  if (a.size() != 3) return AppendError(call.out, WrongArityMessage(Cat("object|", a[1])));
  if (!Exists(call, a[2])) return AppendNull(call.out, proto);
  if (IEquals(a[1], "ENCODING")) return AppendBulk(call.out, "raw");
  if (IEquals(a[1], "REFCOUNT")) return AppendInteger(call.out, 1);
  if (IEquals(a[1], "IDLETIME")) return AppendInteger(call.out, 0);  // Pollen keeps no access times
  AppendError(call.out,
              "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when "
              "switching between policies at runtime LRU and LFU data will take some time to adjust.");
}

void CmdMemory(CommandCall& call) {
  const auto& a = call.args;
  if (!IEquals(a[1], "USAGE")) {
    return AppendError(call.out, Cat("ERR unknown subcommand '", a[1].substr(0, 128), "'. Try MEMORY HELP."));
  }
  if (a.size() != 3 && !(a.size() == 5 && IEquals(a[3], "SAMPLES"))) {
    return AppendError(call.out, a.size() < 3 ? WrongArityMessage("memory|usage") : "ERR syntax error");
  }
  int64_t samples = 0;
  if (a.size() == 5 && !ParseInt64(a[4], &samples)) {
    return AppendError(call.out, "ERR value is not an integer or out of range");
  }
  absl::StatusOr<node::FilterInfo> info = call.ctx.node->Info(a[2], node::InfoParts::kEpochsOnly);
  if (!info.ok()) return AppendNull(call.out, call.session.proto);
  AppendInteger(call.out, static_cast<int64_t>(info->memory_bytes + a[2].size()));
}

// GET, HGET, LLEN, ... (the read commands of other types in the command
// table): a Redis with only Bloom keys answers WRONGTYPE for a filter and the
// command's empty reply for a missing key. Their writes (SET, HSET, ...) are
// unknown commands: Pollen stores nothing else.
void CmdOtherType(CommandCall& call) {
  const std::string cmd = Lower(call.args[0]);
  int64_t unused = 0;
  if ((cmd == "lrange" || cmd == "getrange") &&
      (!ParseInt64(call.args[2], &unused) || !ParseInt64(call.args[3], &unused))) {
    return AppendError(call.out, "ERR value is not an integer or out of range");  // checked before the key
  }
  const size_t last_key = cmd == "pfcount" ? call.args.size() - 1 : 1;  // PFCOUNT takes keys only
  for (size_t i = 1; i <= last_key; ++i) {
    if (Exists(call, call.args[i])) {
      return AppendError(call.out, "WRONGTYPE Operation against a key holding the wrong kind of value");
    }
  }
  const Proto proto = call.session.proto;
  if (cmd == "get" || cmd == "hget" || cmd == "lindex" || cmd == "zscore") return AppendNull(call.out, proto);
  if (cmd == "hgetall") return AppendMapHeader(call.out, 0, proto);
  if (cmd == "smembers") return AppendSetHeader(call.out, 0, proto);
  if (cmd == "lrange" || cmd == "hkeys" || cmd == "hvals") return AppendArrayHeader(call.out, 0);
  if (cmd == "getrange") return AppendBulk(call.out, "");
  if (cmd == "hmget") {
    AppendArrayHeader(call.out, call.args.size() - 2);
    for (size_t i = 2; i < call.args.size(); ++i) AppendNull(call.out, proto);
    return;
  }
  AppendInteger(call.out, 0);  // strlen hlen hexists llen scard sismember zcard xlen pfcount
}

}  // namespace pollen::resp
