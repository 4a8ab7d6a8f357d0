// Connection and server commands: PING ECHO QUIT SELECT AUTH HELLO CONFIG
// INFO COMMAND (CLIENT is in commands_client.cc).
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

// The Redis version clients are told (HELLO, INFO redis_version): the command
// surface is Redis 7 compatible for what Pollen implements.
constexpr std::string_view kRedisCompatVersion = "7.0.0";

// Constant-time comparison, so the reply time does not reveal a prefix.
bool PasswordMatches(std::string_view given, std::string_view want) {
  unsigned char diff = given.size() == want.size() ? 0 : 1;
  const size_t n = std::max(given.size(), want.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char w = i < want.size() ? static_cast<unsigned char>(want[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ w);
  }
  return diff == 0;
}

// Checks user/password; on success marks the session authenticated.
bool TryAuth(CommandCall& call, std::string_view user, std::string_view password) {
  const bool ok = IEquals(user, "default") &&
                  (call.ctx.password.empty() || PasswordMatches(password, call.ctx.password));
  if (ok) {
    call.session.authenticated = true;
  } else {
    call.ctx.counters.auth_failures.fetch_add(1, std::memory_order_relaxed);
  }
  return ok;
}

constexpr std::string_view kWrongPass = "WRONGPASS invalid username-password pair or user is disabled.";

void AppendCommandInfo(std::string* out, const CommandSpec& c) {
  AppendArrayHeader(out, 10);
  AppendBulk(out, c.name);
  AppendInteger(out, c.arity);
  std::vector<std::string_view> flags = SplitSkipEmpty(c.flags, ' ');
  AppendArrayHeader(out, flags.size());
  for (std::string_view f : flags) AppendSimple(out, f);
  AppendInteger(out, c.first_key);
  AppendInteger(out, c.last_key);
  AppendInteger(out, c.key_step);
  AppendArrayHeader(out, 0);  // ACL categories
  AppendArrayHeader(out, 0);  // tips
  AppendArrayHeader(out, 0);  // key specs
  AppendArrayHeader(out, 0);  // subcommands
}

void AppendCommandDocs(std::string* out, const CommandSpec& c) {
  AppendBulk(out, c.name);
  AppendArrayHeader(out, 6);
  AppendBulk(out, "summary");
  AppendBulk(out, c.summary);
  AppendBulk(out, "since");
  AppendBulk(out, "0.1.0");
  AppendBulk(out, "group");
  AppendBulk(out, c.group);
}

std::string InfoSection(CommandCall& call, std::string_view section, const absl::StatusOr<NodeView>& view) {
  ServerContext& ctx = call.ctx;
  ServerCounters& k = ctx.counters;
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  if (section == "server") {
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - ctx.start_time);
    return Cat("# Server\r\nredis_version:", kRedisCompatVersion, "\r\npollen_version:", ctx.version,
                        "\r\nredis_mode:standalone\r\nprocess_id:", static_cast<int64_t>(getpid()),
                        "\r\nnode_name:", ctx.node->name(), "\r\nuptime_in_seconds:", up.count(), "\r\n");
  }
  if (section == "clients") {
    return Cat("# Clients\r\nconnected_clients:", load(k.connections_current),
                        "\r\nmaxclients:", ctx.limits.max_clients, "\r\n");
  }
  if (section == "stats") {
    return Cat("# Stats\r\ntotal_connections_received:", load(k.connections_accepted),
                        "\r\ntotal_commands_processed:", load(k.commands_processed),
                        "\r\nrejected_connections:", load(k.connections_rejected),
                        "\r\ntotal_error_replies:", load(k.error_replies),
                        "\r\nprotocol_errors:", load(k.protocol_errors),
                        "\r\nauth_failures:", load(k.auth_failures),
                        "\r\nclient_output_limit_disconnections:", load(k.output_limit_disconnects),
                        "\r\nclient_idle_disconnections:", load(k.idle_disconnects),
                        "\r\ntotal_net_input_bytes:", load(k.bytes_in),
                        "\r\ntotal_net_output_bytes:", load(k.bytes_out),
                        "\r\nkeys_added:", load(k.keys_added), "\r\nkeys_queried:", load(k.keys_queried), "\r\n");
  }
  if ((section == "pollen" || section == "keyspace") && !view.ok()) {
    return Cat("# ", section == "pollen" ? "Pollen" : "Keyspace", "\r\nerror:", ToStd(view.status().message()), "\r\n");
  }
  if (section == "pollen") {
    const std::vector<node::MemberInfo>& members = view->members;
    size_t alive = 0;
    for (const auto& m : members) alive += m.state == node::MemberState::kAlive;
    const node::NodeCounters& nc = view->counters;
    std::string s = Cat("# Pollen\r\nmembers:", members.size(), "\r\nmembers_alive:", alive,
                                 "\r\nadds:", nc.adds, "\r\nqueries:", nc.queries, "\r\nhits:", nc.hits,
                                 "\r\ndelta_bits_sent:", nc.delta_bits_sent,
                                 "\r\ndelta_bits_received:", nc.delta_bits_received,
                                 "\r\nanti_entropy_runs:", nc.anti_entropy_runs, "\r\n");
    const std::vector<node::FilterInfo>& filters = view->filters;
    CatAppend(&s, "filters:", filters.size(), "\r\n");
    for (const node::FilterInfo& f : filters) {
      std::string name = f.config.name;
      for (char& c : name) {
        if (c == '\r' || c == '\n' || c == ':' || c == ',') c = '_';
      }
      double items = 0, fill = 0;
      for (const auto& g : f.generations) items += g.estimated_items;
      if (!f.generations.empty()) fill = f.generations.back().fill_ratio;
      CatAppend(&s, "filter_", name, ":capacity=", f.config.capacity, ",fpr=", f.config.fpr,
                      ",epoch=", f.epoch, ",generations=", f.generations.size(), ",fill_ratio=", fill,
                      ",estimated_items=", static_cast<uint64_t>(items), ",memory_bytes=", f.memory_bytes, "\r\n");
    }
    return s;
  }
  if (section == "keyspace") {
    return Cat("# Keyspace\r\ndb0:keys=", view->filters.size(), ",expires=0,avg_ttl=0\r\n");
  }
  return "";
}

}  // namespace

void CmdPing(CommandCall& call) {
  if (call.args.size() > 2) return ReplyWrongArity(call);
  if (call.args.size() == 2) return AppendBulk(call.out, call.args[1]);
  AppendSimple(call.out, "PONG");
}

void CmdEcho(CommandCall& call) { AppendBulk(call.out, call.args[1]); }

void CmdQuit(CommandCall& call) {
  call.session.close_after_reply = true;
  AppendSimple(call.out, "OK");
}

void CmdSelect(CommandCall& call) {
  int64_t db = 0;
  if (!ParseInt64(call.args[1], &db)) return AppendError(call.out, "ERR value is not an integer or out of range");
  if (db != 0) return AppendError(call.out, "ERR DB index is out of range");
  AppendSimple(call.out, "OK");
}

void CmdAuth(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() > 3) return AppendError(call.out, "ERR syntax error");
  if (a.size() == 2 && call.ctx.password.empty()) {
    return AppendError(call.out,
                       "ERR AUTH <password> called without any password configured for the default user. "
                       "Are you sure your configuration is correct?");
  }
  const std::string_view user = a.size() == 3 ? a[1] : std::string_view("default");
  if (!TryAuth(call, user, a.back())) return AppendError(call.out, kWrongPass);
  AppendSimple(call.out, "OK");
}

void CmdHello(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() >= 2) {
    int64_t proto = 0;
    if (!ParseInt64(a[1], &proto)) {
      return AppendError(call.out, "ERR Protocol version is not an integer or out of range");
    }
    if (proto != 2) return AppendError(call.out, "NOPROTO unsupported protocol version");
  }
  std::string_view setname;
  bool has_setname = false;
  for (size_t i = 2; i < a.size(); ++i) {
    if (IEquals(a[i], "AUTH") && i + 2 < a.size()) {
      if (!TryAuth(call, a[i + 1], a[i + 2])) return AppendError(call.out, kWrongPass);
      i += 2;
    } else if (IEquals(a[i], "SETNAME") && i + 1 < a.size()) {
      setname = a[++i];
      has_setname = true;
    } else {
      return AppendError(call.out, Cat("ERR Syntax error in HELLO option '", a[i].substr(0, 64), "'"));
    }
  }
  if (!call.ctx.password.empty() && !call.session.authenticated) {
    return AppendError(call.out,
                       "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
                       "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the "
                       "RESP protocol version at the same time");
  }
  if (has_setname) {
    if (!ValidClientName(setname)) {
      return AppendError(call.out, "ERR Client names cannot contain spaces, newlines or special characters.");
    }
    SetSessionName(call.session, setname);
  }
  std::string* out = call.out;
  AppendArrayHeader(out, 14);
  AppendBulk(out, "server"), AppendBulk(out, "redis");
  AppendBulk(out, "version"), AppendBulk(out, kRedisCompatVersion);
  AppendBulk(out, "proto"), AppendInteger(out, 2);
  AppendBulk(out, "id"), AppendInteger(out, static_cast<int64_t>(call.session.id));
  AppendBulk(out, "mode"), AppendBulk(out, "standalone");
  AppendBulk(out, "role"), AppendBulk(out, "master");
  AppendBulk(out, "modules"), AppendArrayHeader(out, 0);
}

void CmdConfig(CommandCall& call) {
  if (IEquals(call.args[1], "GET")) {
    if (call.args.size() < 3) return AppendError(call.out, "ERR wrong number of arguments for 'config|get' command");
    // Pollen has no Redis configuration; redis-benchmark asks for these two,
    // and Redis' own RDB/AOF persistence is indeed off.
    static constexpr std::pair<std::string_view, std::string_view> kParams[] = {{"appendonly", "no"}, {"save", ""}};
    std::vector<std::pair<std::string_view, std::string_view>> hits;
    for (const auto& p : kParams) {
      for (size_t i = 2; i < call.args.size(); ++i) {
        if (call.args[i] == "*" || IEquals(call.args[i], p.first)) {
          hits.push_back(p);
          break;
        }
      }
    }
    AppendArrayHeader(call.out, hits.size() * 2);
    for (const auto& [k, v] : hits) AppendBulk(call.out, k), AppendBulk(call.out, v);
    return;
  }
  AppendError(call.out, Cat("ERR unknown subcommand '", call.args[1].substr(0, 128), "'. Try CONFIG HELP."));
}

void CmdInfo(CommandCall& call) {
  static constexpr std::string_view kAll[] = {"server", "clients", "stats", "pollen", "keyspace"};
  std::vector<std::string> wanted;
  bool all = call.args.size() == 1;
  for (size_t i = 1; i < call.args.size(); ++i) {
    const std::string s = Lower(call.args[i]);
    if (s == "all" || s == "everything" || s == "default") {
      all = true;
    } else {
      wanted.push_back(s);
    }
  }
  auto want = [&](std::string_view s) { return all || std::find(wanted.begin(), wanted.end(), s) != wanted.end(); };
  absl::StatusOr<NodeView> view = absl::UnavailableError("not collected");
  if (want("pollen") || want("keyspace")) view = CollectNodeView(call.ctx);
  std::string text;
  for (std::string_view section : kAll) {
    if (want(section)) {
      if (!text.empty()) text += "\r\n";
      text += InfoSection(call, section, view);
    }
  }
  if (all && call.ctx.info_text) {
    std::string extra = call.ctx.info_text();
    if (!extra.empty()) {
      if (!text.empty()) text += "\r\n";
      text += extra;
    }
  }
  AppendBulk(call.out, text);
}

void CmdCommand(CommandCall& call) {
  const auto& a = call.args;
  const auto all = AllCommands();
  if (a.size() == 1) {
    AppendArrayHeader(call.out, all.size());
    for (const CommandSpec& c : all) AppendCommandInfo(call.out, c);
    return;
  }
  const std::string_view sub = a[1];
  if (IEquals(sub, "COUNT") && a.size() == 2) return AppendInteger(call.out, static_cast<int64_t>(all.size()));
  if (IEquals(sub, "LIST") && a.size() == 2) {
    AppendArrayHeader(call.out, all.size());
    for (const CommandSpec& c : all) AppendBulk(call.out, c.name);
    return;
  }
  if (IEquals(sub, "INFO")) {
    if (a.size() == 2) {
      AppendArrayHeader(call.out, all.size());
      for (const CommandSpec& c : all) AppendCommandInfo(call.out, c);
      return;
    }
    AppendArrayHeader(call.out, a.size() - 2);
    for (size_t i = 2; i < a.size(); ++i) {
      const CommandSpec* c = FindCommand(a[i]);
      if (c == nullptr) {
        AppendNullBulk(call.out);
      } else {
        AppendCommandInfo(call.out, *c);
      }
    }
    return;
  }
  if (IEquals(sub, "DOCS")) {
    std::vector<const CommandSpec*> picked;
    if (a.size() == 2) {
      for (const CommandSpec& c : all) picked.push_back(&c);
    } else {
      for (size_t i = 2; i < a.size(); ++i) {
        if (const CommandSpec* c = FindCommand(a[i])) picked.push_back(c);
      }
    }
    AppendArrayHeader(call.out, picked.size() * 2);
    for (const CommandSpec* c : picked) AppendCommandDocs(call.out, *c);
    return;
  }
  AppendError(call.out, Cat("ERR unknown subcommand or wrong number of arguments for '", sub.substr(0, 128),
                                     "'. Try COMMAND HELP."));
}

}  // namespace pollen::resp
