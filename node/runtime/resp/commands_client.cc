// CLIENT: ID, GETNAME, SETNAME, SETINFO, INFO, LIST, KILL, HELP, with Redis 7's
// replies and error strings. The open connections come from
// ServerContext::clients; a session without a ClientRecord (unit tests) is
// described from its Session fields.
#include <chrono>
#include <optional>

#include "node/runtime/resp/client_table.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

using Clock = ClientRecord::Clock;

std::string ClientLine(const Session& session) {
  const Clock::time_point now = Clock::now();
  if (session.record != nullptr) return FormatClientLine(*session.record, now);
  ClientRecord self(session.id, session.peer, "", -1, now);
  self.set_name(session.name);
  return FormatClientLine(self, now);
}

// Redis client types: Pollen's clients are all "normal". Returns nullopt for
// an unknown name, else whether the type selects Pollen's clients.
std::optional<bool> ClientTypeSelectsNormal(std::string_view type) {
  if (IEquals(type, "normal")) return true;
  if (IEquals(type, "master") || IEquals(type, "replica") || IEquals(type, "slave") || IEquals(type, "pubsub")) {
    return false;
  }
  return std::nullopt;
}

void ReplyUnknownType(std::string* out, std::string_view type) {
  AppendError(out, Cat("ERR Unknown client type '", type.substr(0, 128), "'"));
}

void ReplyClientHelp(std::string* out) {
  static constexpr std::string_view kLines[] = {
      "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "GETNAME",
      "    Return the name of the current connection.",
      "ID",
      "    Return the ID of the current connection.",
      "INFO",
      "    Return information about the current client connection.",
      "KILL <ip:port>",
      "    Kill connection made from <ip:port>.",
      "KILL <option> <value> [<option> <value> [...]]",
      "    Kill connections. Options are:",
      "    * ADDR (<ip:port>|<unixsocket>:0)",
      "      Kill connections made from the specified address",
      "    * LADDR (<ip:port>|<unixsocket>:0)",
      "      Kill connections made to specified local address",
      "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
      "      Kill connections by type.",
      "    * USER <username>",
      "      Kill connections authenticated by <username>.",
      "    * SKIPME (YES|NO)",
      "      Skip killing current connection (default: yes).",
      "    * ID <client-id>",
      "      Kill connections by client id.",
      "LIST [options ...]",
      "    Return information about client connections. Options:",
      "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
      "      Return clients of specified type.",
      "    * ID <client-id> [<client-id> ...]",
      "      Return clients of specified IDs only.",
      "SETNAME <name>",
      "    Assign the name <name> to the current connection.",
      "SETINFO <option> <value>",
      "    Accepted and ignored.",
      "HELP",
      "    Print this help.",
  };
  AppendArrayHeader(out, std::size(kLines));
  for (std::string_view l : kLines) AppendSimple(out, l);
}

// CLIENT LIST [TYPE type | ID id [id ...]]
void ClientList(CommandCall& call) {
  const auto& a = call.args;
  const Clock::time_point now = Clock::now();
  std::string text;
  if (a.size() == 4 && IEquals(a[2], "TYPE")) {
    const std::optional<bool> normal = ClientTypeSelectsNormal(a[3]);
    if (!normal.has_value()) return ReplyUnknownType(call.out, a[3]);
    if (*normal) {
      for (const auto& r : call.ctx.clients.List()) CatAppend(&text, FormatClientLine(*r, now), "\n");
    }
  } else if (a.size() > 3 && IEquals(a[2], "ID")) {
    for (size_t i = 3; i < a.size(); ++i) {
      int64_t id = 0;
      if (!ParseInt64(a[i], &id)) return AppendError(call.out, "ERR Invalid client ID");
      if (id <= 0) continue;
      if (auto r = call.ctx.clients.Find(static_cast<uint64_t>(id))) CatAppend(&text, FormatClientLine(*r, now), "\n");
    }
  } else if (a.size() != 2) {
    return AppendError(call.out, "ERR syntax error");
  } else {
    for (const auto& r : call.ctx.clients.List()) CatAppend(&text, FormatClientLine(*r, now), "\n");
  }
  AppendVerbatim(call.out, text, call.session.proto);
}

// CLIENT KILL ip:port  |  CLIENT KILL <filter> <value> [<filter> <value> ...]
void ClientKill(CommandCall& call) {
  const auto& a = call.args;
  KillFilter filter;
  const bool old_form = a.size() == 3;
  if (old_form) {
    filter.addr = std::string(a[2]);
    filter.skip_self = false;  // Redis: the old form may kill the caller
  } else {
    for (size_t i = 2; i < a.size(); i += 2) {
      const bool more = i + 1 < a.size();
      if (!more) return AppendError(call.out, "ERR syntax error");
      const std::string_view opt = a[i];
      const std::string_view val = a[i + 1];
      if (IEquals(opt, "ID")) {
        int64_t id = 0;
        if (!ParseInt64(val, &id) || id < 1) return AppendError(call.out, "ERR client-id should be greater than 0");
        filter.id = static_cast<uint64_t>(id);
      } else if (IEquals(opt, "TYPE")) {
        const std::optional<bool> normal = ClientTypeSelectsNormal(val);
        if (!normal.has_value()) return ReplyUnknownType(call.out, val);
        if (!*normal) filter.match_none = true;
      } else if (IEquals(opt, "ADDR")) {
        filter.addr = std::string(val);
      } else if (IEquals(opt, "LADDR")) {
        filter.laddr = std::string(val);
      } else if (IEquals(opt, "USER")) {
        if (val != "default") return AppendError(call.out, Cat("ERR No such user '", val.substr(0, 128), "'"));
      } else if (IEquals(opt, "SKIPME")) {
        if (IEquals(val, "yes")) {
          filter.skip_self = true;
        } else if (IEquals(val, "no")) {
          filter.skip_self = false;
        } else {
          return AppendError(call.out, "ERR syntax error");
        }
      } else {
        return AppendError(call.out, "ERR syntax error");
      }
    }
  }
  ClientTable::KillResult r = call.ctx.clients.Kill(filter, call.session.id);
  if (old_form) {
    if (r.killed == 0) {
      AppendError(call.out, "ERR No such client");
    } else {
      AppendSimple(call.out, "OK");
    }
  } else {
    AppendInteger(call.out, static_cast<int64_t>(r.killed));
  }
  // Like Redis: a client that killed itself gets its reply, then is closed.
  if (r.self_matched) call.session.close_after_reply = true;
}

}  // namespace

bool ValidClientName(std::string_view name) {
  if (name.size() > 256) return false;
  for (char c : name) {
    if (c < '!' || c > '~') return false;
  }
  return true;
}

void SetSessionName(Session& session, std::string_view name) {
  session.name.assign(name.data(), name.size());
  if (session.record != nullptr) session.record->set_name(name);
}

void SetSessionProto(Session& session, Proto proto) {
  session.proto = proto;
  if (session.record != nullptr) session.record->set_resp(static_cast<int>(proto));
}

void CmdClient(CommandCall& call) {
  const auto& a = call.args;
  const std::string_view sub = a[1];
  // Exact-arity subcommands (Redis 7's client|<sub> arities).
  static constexpr struct {
    std::string_view name;
    size_t argc;
    const char* cmd;  // what CLIENT LIST shows as cmd=
  } kFixed[] = {{"ID", 2, "client|id"},           {"GETNAME", 2, "client|getname"}, {"SETNAME", 3, "client|setname"},
                {"SETINFO", 4, "client|setinfo"}, {"INFO", 2, "client|info"},       {"HELP", 2, "client|help"},
                {"NO-EVICT", 3, "client|no-evict"}};
  for (const auto& f : kFixed) {
    if (!IEquals(sub, f.name)) continue;
    if (a.size() != f.argc) {
      return AppendError(call.out, Cat("ERR wrong number of arguments for 'client|", Lower(sub), "' command"));
    }
    if (call.session.record != nullptr) call.session.record->set_last_command(f.cmd);
    if (f.name == "ID") return AppendInteger(call.out, static_cast<int64_t>(call.session.id));
    if (f.name == "GETNAME") {
      if (call.session.name.empty()) return AppendNull(call.out, call.session.proto);
      return AppendBulk(call.out, call.session.name);
    }
    if (f.name == "SETNAME") {
      if (!ValidClientName(a[2])) {
        return AppendError(call.out, "ERR Client names cannot contain spaces, newlines or special characters.");
      }
      SetSessionName(call.session, a[2]);
      return AppendSimple(call.out, "OK");
    }
    if (f.name == "SETINFO") return AppendSimple(call.out, "OK");
    if (f.name == "NO-EVICT") {  // Pollen never evicts clients: accepted, as Redis does with maxmemory-clients 0
      if (!IEquals(a[2], "ON") && !IEquals(a[2], "OFF")) return AppendError(call.out, "ERR syntax error");
      return AppendSimple(call.out, "OK");
    }
    if (f.name == "INFO") return AppendVerbatim(call.out, Cat(ClientLine(call.session), "\n"), call.session.proto);
    return ReplyClientHelp(call.out);
  }
  if (IEquals(sub, "LIST")) {
    if (call.session.record != nullptr) call.session.record->set_last_command("client|list");
    return ClientList(call);
  }
  if (IEquals(sub, "KILL")) {
    if (a.size() < 3) return AppendError(call.out, "ERR wrong number of arguments for 'client|kill' command");
    if (call.session.record != nullptr) call.session.record->set_last_command("client|kill");
    return ClientKill(call);
  }
  AppendError(call.out, Cat("ERR unknown subcommand '", sub.substr(0, 128), "'. Try CLIENT HELP."));
}

}  // namespace pollen::resp
