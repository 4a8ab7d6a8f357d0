// Connection and server commands: PING ECHO QUIT SELECT AUTH HELLO CONFIG
// INFO COMMAND TIME ROLE LASTSAVE MODULE (CLIENT is in commands_client.cc).
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "node/core/printable_name.h"
#include "node/runtime/resp/commands.h"
#include "node/runtime/resp/glob.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

// The Redis version clients are told (HELLO, INFO redis_version): the command
// surface is Redis 7 compatible for what Pollen implements.
constexpr std::string_view kRedisCompatVersion = "7.0.0";

// RedisBloom's module version scheme (major*10000 + minor*100 + patch): the
// RedisBloom release whose commands and replies Pollen follows, 2.4.23.
constexpr int64_t kBloomModuleVersion = 20423;

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

// MODULE LIST's reply (and HELLO's modules): one module, RedisBloom's "bf".
void AppendModuleList(std::string* out, Proto p) {
  AppendArrayHeader(out, 1);
  AppendMapHeader(out, 4, p);
  AppendBulk(out, "name"), AppendBulk(out, "bf");
  AppendBulk(out, "ver"), AppendInteger(out, kBloomModuleVersion);
  AppendBulk(out, "path"), AppendBulk(out, "pollend");
  AppendBulk(out, "args"), AppendArrayHeader(out, 0);
}

// The key spec Redis derives for a module command with one key at index 1 (what
// COMMAND INFO shows for RedisBloom's commands).
void AppendModuleKeySpec(std::string* out, Proto p) {
  AppendArrayHeader(out, 1);
  AppendMapHeader(out, 3, p);
  AppendBulk(out, "flags");
  AppendArrayHeader(out, 3), AppendSimple(out, "RW"), AppendSimple(out, "access"), AppendSimple(out, "update");
  AppendBulk(out, "begin_search");
  AppendMapHeader(out, 2, p);
  AppendBulk(out, "type"), AppendBulk(out, "index");
  AppendBulk(out, "spec"), AppendMapHeader(out, 1, p), AppendBulk(out, "index"), AppendInteger(out, 1);
  AppendBulk(out, "find_keys");
  AppendMapHeader(out, 2, p);
  AppendBulk(out, "type"), AppendBulk(out, "range");
  AppendBulk(out, "spec"), AppendMapHeader(out, 3, p);
  AppendBulk(out, "lastkey"), AppendInteger(out, 0);
  AppendBulk(out, "keystep"), AppendInteger(out, 1);
  AppendBulk(out, "limit"), AppendInteger(out, 0);
}

void AppendCommandInfo(std::string* out, const CommandSpec& c, Proto p) {
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
  if (c.flags.find("module") != std::string_view::npos) {
    AppendModuleKeySpec(out, p);
  } else {
    AppendArrayHeader(out, 0);  // key specs
  }
  AppendArrayHeader(out, 0);  // subcommands
}

void AppendCommandDocs(std::string* out, const CommandSpec& c, Proto p) {
  AppendBulk(out, c.name);
  AppendMapHeader(out, 3, p);
  AppendBulk(out, "summary");
  AppendBulk(out, c.summary);
  AppendBulk(out, "since");
  AppendBulk(out, "0.1.0");
  AppendBulk(out, "group");
  AppendBulk(out, c.group);
}

std::string HumanBytes(uint64_t n) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%lluB", static_cast<unsigned long long>(n));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f%s", v, units[u]);
  }
  return buf;
}

// Resident set size of this process, bytes (0 if /proc is unreadable).
uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

double Seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; }

// The last snapshot's time, or the start time before any (as Redis reports
// its start time before the first save).
int64_t LastSave(const ServerContext& ctx) {
  const int64_t t = ctx.last_save_unix ? ctx.last_save_unix() : 0;
  if (t != 0) return t;
  return std::chrono::duration_cast<std::chrono::seconds>(ctx.start_wall_time.time_since_epoch()).count();
}

std::string ModuleLine() {
  return Cat("module:name=bf,ver=", kBloomModuleVersion, ",api=1,filters=0,usedby=[],using=[],options=[]\r\n");
}

// A 40-hex-digit id fixed for the life of the process (Redis' run_id).
const std::string& RunId() {
  static const std::string id = [] {
    std::string out;
    uint64_t x = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL ^
                 static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int i = 0; i < 40; ++i) {
      x ^= x >> 31, x *= 0xbf58476d1ce4e5b9ULL, x ^= x >> 27;
      out.push_back("0123456789abcdef"[x & 15]);
    }
    return out;
  }();
  return id;
}

std::string InfoSection(CommandCall& call, std::string_view section, const absl::StatusOr<NodeView>& view) {
  ServerContext& ctx = call.ctx;
  ServerCounters& k = ctx.counters;
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  const std::string extra = ctx.info_extra ? ctx.info_extra(section) : std::string();
  if (section == "server") {
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - ctx.start_time);
    const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    utsname u{};
    ::uname(&u);
    return Cat("# Server\r\nredis_version:", kRedisCompatVersion, "\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0",
               "\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:", u.sysname, " ", u.release, " ", u.machine,
               "\r\narch_bits:", sizeof(void*) * 8, "\r\nmultiplexing_api:epoll\r\nprocess_id:",
               static_cast<int64_t>(getpid()), "\r\nprocess_supervised:no\r\nrun_id:", RunId(),
               "\r\ntcp_port:", ctx.tcp_port.load(), "\r\nserver_time_usec:", now_us.count(),
               "\r\nuptime_in_seconds:", up.count(), "\r\nuptime_in_days:", up.count() / 86400,
               "\r\nhz:10\r\nconfigured_hz:10\r\nio_threads_active:0\r\npollen_version:", ctx.version,
               "\r\nnode_name:", ctx.node->name(), "\r\n", extra);
  }
  if (section == "clients") {
    return Cat("# Clients\r\nconnected_clients:", load(k.connections_current),
               "\r\ncluster_connections:0\r\nmaxclients:", ctx.limits.max_clients,
               "\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:0",
               "\r\ntracking_clients:0\r\nclients_in_timeout_table:0\r\n", extra);
  }
  if (section == "memory") {
    uint64_t filters = 0;
    for (const std::string& name : ctx.node->FilterNames()) {
      if (auto info = ctx.node->Info(name, node::InfoParts::kEpochsOnly); info.ok()) filters += info->memory_bytes;
    }
    const uint64_t rss = ResidentBytes();
    const uint64_t used = std::max(rss, filters);
    return Cat("# Memory\r\nused_memory:", used, "\r\nused_memory_human:", HumanBytes(used),
               "\r\nused_memory_rss:", rss, "\r\nused_memory_rss_human:", HumanBytes(rss),
               "\r\nused_memory_dataset:", filters, "\r\nmaxmemory:0\r\nmaxmemory_human:0B",
               "\r\nmaxmemory_policy:noeviction\r\nmem_allocator:libc\r\npollen_filter_memory_bytes:", filters, "\r\n",
               extra);
  }
  if (section == "persistence") {
    return Cat("# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0",
               "\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:", LastSave(ctx),
               "\r\nrdb_last_bgsave_status:ok\r\nrdb_saves:0\r\naof_rewrite_in_progress:0",
               "\r\naof_rewrite_scheduled:0\r\naof_last_bgrewrite_status:ok\r\naof_last_write_status:ok\r\n", extra);
  }
  if (section == "stats") {
    return Cat("# Stats\r\ntotal_connections_received:", load(k.connections_accepted),
               "\r\ntotal_commands_processed:", load(k.commands_processed),
               "\r\nrejected_connections:", load(k.connections_rejected),
               "\r\nexpired_keys:0\r\nevicted_keys:0\r\ntotal_error_replies:", load(k.error_replies),
               "\r\nprotocol_errors:", load(k.protocol_errors), "\r\nauth_failures:", load(k.auth_failures),
               "\r\nclient_output_limit_disconnections:", load(k.output_limit_disconnects),
               "\r\nclient_idle_disconnections:", load(k.idle_disconnects),
               "\r\ntotal_net_input_bytes:", load(k.bytes_in), "\r\ntotal_net_output_bytes:", load(k.bytes_out),
               "\r\nkeys_added:", load(k.keys_added), "\r\nkeys_queried:", load(k.keys_queried),
               "\r\nbatched_requests:", load(k.batched_requests), "\r\n", extra);
  }
  if (section == "replication") {
    // A Redis master with no replicas; Pollen's own replication (gossip
    // between peers) is in pollen_* lines.
    std::string s = Cat("# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover",
                        "\r\nmaster_replid:", RunId(), "\r\nmaster_replid2:0000000000000000000000000000000000000000",
                        "\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0",
                        "\r\nrepl_backlog_size:0\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n");
    if (view.ok()) {
      size_t alive = 0;
      for (const auto& m : view->members) alive += m.state == node::MemberState::kAlive;
      CatAppend(&s, "pollen_members:", view->members.size(), "\r\npollen_members_alive:", alive, "\r\n");
    }
    return s + extra;
  }
  if (section == "cpu") {
    rusage self{}, children{}, thread{};
    ::getrusage(RUSAGE_SELF, &self);
    ::getrusage(RUSAGE_CHILDREN, &children);
    ::getrusage(RUSAGE_THREAD, &thread);
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "# CPU\r\nused_cpu_sys:%.6f\r\nused_cpu_user:%.6f\r\nused_cpu_sys_children:%.6f\r\n"
                  "used_cpu_user_children:%.6f\r\nused_cpu_sys_main_thread:%.6f\r\nused_cpu_user_main_thread:%.6f\r\n",
                  Seconds(self.ru_stime), Seconds(self.ru_utime), Seconds(children.ru_stime),
                  Seconds(children.ru_utime), Seconds(thread.ru_stime), Seconds(thread.ru_utime));
    return buf + extra;
  }
  if (section == "modules") return "# Modules\r\n" + ModuleLine() + extra;
  if (section == "keyspace") {
    const size_t keys = ctx.node->FilterNames().size();
    if (keys == 0) return "# Keyspace\r\n" + extra;  // Redis omits an empty db
    return Cat("# Keyspace\r\ndb0:keys=", keys, ",expires=0,avg_ttl=0\r\n", extra);
  }
  if (section == "pollen" && !view.ok()) return Cat("# Pollen\r\nerror:", ToStd(view.status().message()), "\r\n");
  if (section == "pollen") {
    const std::vector<node::MemberInfo>& members = view->members;
    size_t alive = 0;
    for (const auto& m : members) alive += m.state == node::MemberState::kAlive;
    const node::NodeCounters& nc = view->counters;
    std::string s = Cat("# Pollen\r\nmembers:", members.size(), "\r\nmembers_alive:", alive, "\r\nadds:", nc.adds,
                        "\r\nqueries:", nc.queries, "\r\nhits:", nc.hits, "\r\ndelta_bits_sent:", nc.delta_bits_sent,
                        "\r\ndelta_bits_received:", nc.delta_bits_received,
                        "\r\nanti_entropy_runs:", nc.anti_entropy_runs,
                        "\r\nfilters_replaced:", nc.filters_replaced, "\r\nfilters_deleted:", nc.filters_deleted,
                        "\r\ntombstones_dropped:", nc.tombstones_dropped, "\r\n");
    const std::vector<node::FilterInfo>& filters = view->filters;
    CatAppend(&s, "filters:", filters.size(), "\r\n");
    for (const node::FilterInfo& f : filters) {
      // INFO's "key:value" lines: the name printable (node/core/printable_name.h),
      // with ':' and ',' (the line's separators) as '_'.
      std::string name = node::PrintableName(f.config.name);
      for (char& c : name) {
        if (c == ':' || c == ',') c = '_';
      }
      double items = 0, fill = 0;
      for (const auto& g : f.generations) items += g.estimated_items;
      if (!f.generations.empty()) fill = f.generations.back().fill_ratio;
      CatAppend(&s, "filter_", name, ":capacity=", f.config.capacity, ",fpr=", f.config.fpr, ",epoch=", f.epoch,
                ",generations=", f.generations.size(), ",fill_ratio=", fill,
                ",estimated_items=", static_cast<uint64_t>(items), ",memory_bytes=", f.memory_bytes, "\r\n");
    }
    return s + extra;
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
  if (db < INT32_MIN || db > INT32_MAX) {
    return AppendError(call.out, "ERR value is out of range, value must between -2147483648 and 2147483647");
  }
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
    if (proto != 2 && proto != 3) return AppendError(call.out, "NOPROTO unsupported protocol version");
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
  if (a.size() >= 2) SetSessionProto(call.session, a[1] == "3" ? Proto::kResp3 : Proto::kResp2);
  std::string* out = call.out;
  const Proto p = call.session.proto;
  AppendMapHeader(out, 7, p);
  AppendBulk(out, "server"), AppendBulk(out, "redis");
  AppendBulk(out, "version"), AppendBulk(out, kRedisCompatVersion);
  AppendBulk(out, "proto"), AppendInteger(out, p == Proto::kResp3 ? 3 : 2);
  AppendBulk(out, "id"), AppendInteger(out, static_cast<int64_t>(call.session.id));
  AppendBulk(out, "mode"), AppendBulk(out, "standalone");
  AppendBulk(out, "role"), AppendBulk(out, "master");
  AppendBulk(out, "modules"), AppendModuleList(out, p);
}

namespace {

void ConfigGet(CommandCall& call) {
  if (call.args.size() < 3) return AppendError(call.out, "ERR wrong number of arguments for 'config|get' command");
  // Pollen has little of Redis' configuration: redis-benchmark asks for
  // appendonly and save (Redis' own RDB/AOF persistence is indeed off), and
  // backup tools for proto-max-bulk-len (the largest LOADCHUNK argument).
  // Then Redis 8's Bloom settings and resp3-replies (bloom_settings.h).
  std::vector<std::pair<std::string_view, std::string>> params = {
      {"appendonly", "no"}, {"save", ""}, {"proto-max-bulk-len", std::to_string(call.ctx.limits.max_bulk_bytes)}};
  const BloomSettings bloom = call.ctx.bloom.Get();
  for (std::string_view name : kBloomSettingNames) params.emplace_back(name, *BloomSettingValue(name, bloom));
  // Redis 7 echoes a name asked for exactly as typed, and gives a pattern's
  // matches their own names.
  std::vector<std::pair<std::string_view, std::string_view>> hits;
  for (const auto& [name, value] : params) {
    for (size_t i = 2; i < call.args.size(); ++i) {
      if (IEquals(call.args[i], name)) {
        hits.emplace_back(call.args[i], value);
        break;
      }
      if (GlobMatch(Lower(call.args[i]), name)) {
        hits.emplace_back(name, value);
        break;
      }
    }
  }
  AppendMapHeader(call.out, hits.size(), call.session.proto);
  for (const auto& [k, v] : hits) AppendBulk(call.out, k), AppendBulk(call.out, v);
}

// CONFIG SET name value [name value ...]: the settings of bloom_settings.h,
// all or none, with Redis 7's errors. Applies to this node only, until it
// restarts (as Redis without CONFIG REWRITE).
void ConfigSet(CommandCall& call) {
  const auto& a = call.args;
  if (a.size() < 4) return AppendError(call.out, "ERR wrong number of arguments for 'config|set' command");
  if (a.size() % 2 != 0) return AppendError(call.out, "ERR syntax error");
  std::vector<std::string> names;
  for (size_t i = 2; i < a.size(); i += 2) {
    std::string name = Lower(a[i]);
    if (std::find(kBloomSettingNames.begin(), kBloomSettingNames.end(), name) == kBloomSettingNames.end()) {
      return AppendError(call.out,
                         Cat("ERR Unknown option or number of arguments for CONFIG SET - '", a[i].substr(0, 128), "'"));
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return AppendError(call.out, Cat("ERR CONFIG SET failed (possibly related to argument '", a[i].substr(0, 128),
                                       "') - duplicate parameter"));
    }
    names.push_back(std::move(name));
  }
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  for (size_t i = 0; i < names.size(); ++i) pairs.emplace_back(names[i], a[3 + 2 * i]);
  size_t failed = 0;
  if (absl::Status s = call.ctx.bloom.Set(pairs, &failed); !s.ok()) {
    return AppendError(call.out, Cat("ERR CONFIG SET failed (possibly related to argument '",
                                     a[2 + 2 * failed].substr(0, 128), "') - ", ToStd(s.message())));
  }
  AppendSimple(call.out, "OK");
}

}  // namespace

void CmdConfig(CommandCall& call) {
  if (IEquals(call.args[1], "GET")) return ConfigGet(call);
  if (IEquals(call.args[1], "SET")) return ConfigSet(call);
  AppendError(call.out, Cat("ERR unknown subcommand '", call.args[1].substr(0, 128), "'. Try CONFIG HELP."));
}

// Redis' "# Commandstats": a cmdstat_<name> line per command that has run.
// As Redis, `calls` and `usec` count the calls that ran (not the rejected).
std::string CommandstatsSection(const CommandStats& stats) {
  std::string text = "# Commandstats\r\n";
  for (size_t slot = 0; slot < CommandStats::kMaxCommands; ++slot) {
    const std::string_view name = CommandSlotName(slot);
    if (name.empty()) continue;
    const CommandStats::Totals t = stats.Read(slot);
    if (t.calls + t.rejected == 0) continue;
    const uint64_t calls = t.calls;
    const uint64_t usec = t.nanos / 1000;
    char per_call[32];
    std::snprintf(per_call, sizeof(per_call), "%.2f",
                  calls > 0 ? static_cast<double>(usec) / static_cast<double>(calls) : 0.0);
    CatAppend(&text, "cmdstat_", name, ":calls=", calls, ",usec=", usec, ",usec_per_call=", per_call,
              ",rejected_calls=", t.rejected, ",failed_calls=", t.failed, "\r\n");
  }
  return text;
}

// Redis 7's sections: "default" (and no argument) is every section below but
// commandstats; "all" and "everything" add commandstats (latencystats and
// errorstats Pollen does not have); "pollen" is Pollen's own. Sections are
// separated by an empty line; a RESP3 client gets the text as a verbatim
// string.
void CmdInfo(CommandCall& call) {
  static constexpr std::string_view kSections[] = {"server",      "clients", "memory",  "persistence", "stats",
                                                    "replication", "cpu",     "modules", "keyspace",    "pollen",
                                                    "commandstats"};
  std::vector<std::string> wanted;
  bool by_default = call.args.size() == 1;
  bool all = false;
  for (size_t i = 1; i < call.args.size(); ++i) {
    const std::string s = Lower(call.args[i]);
    if (s == "all" || s == "everything") {
      all = true;
    } else if (s == "default") {
      by_default = true;
    } else {
      wanted.push_back(s);
    }
  }
  auto want = [&](std::string_view s) {
    return all || (by_default && s != "commandstats") || std::find(wanted.begin(), wanted.end(), s) != wanted.end();
  };
  absl::StatusOr<NodeView> view = absl::UnavailableError("not collected");
  if (want("pollen") || want("replication")) view = CollectNodeView(call.ctx);
  std::string text;
  for (std::string_view section : kSections) {
    if (want(section)) {
      if (!text.empty()) text += "\r\n";
      text += section == "commandstats" ? CommandstatsSection(call.ctx.command_stats) : InfoSection(call, section, view);
    }
  }
  AppendVerbatim(call.out, text, call.session.proto);
}

void CmdCommand(CommandCall& call) {
  const auto& a = call.args;
  const auto all = AllCommands();
  if (a.size() == 1) {
    AppendArrayHeader(call.out, all.size());
    for (const CommandSpec& c : all) AppendCommandInfo(call.out, c, call.session.proto);
    return;
  }
  const std::string_view sub = a[1];
  if ((IEquals(sub, "COUNT") || IEquals(sub, "LIST")) && a.size() != 2) {
    return AppendError(call.out, WrongArityMessage(Cat("command|", sub)));
  }
  if (IEquals(sub, "COUNT")) return AppendInteger(call.out, static_cast<int64_t>(all.size()));
  if (IEquals(sub, "LIST")) {
    AppendArrayHeader(call.out, all.size());
    for (const CommandSpec& c : all) AppendBulk(call.out, c.name);
    return;
  }
  if (IEquals(sub, "INFO")) {
    if (a.size() == 2) {
      AppendArrayHeader(call.out, all.size());
      for (const CommandSpec& c : all) AppendCommandInfo(call.out, c, call.session.proto);
      return;
    }
    AppendArrayHeader(call.out, a.size() - 2);
    for (size_t i = 2; i < a.size(); ++i) {
      const CommandSpec* c = FindCommand(a[i]);
      if (c == nullptr) {
        AppendNull(call.out, call.session.proto);
      } else {
        AppendCommandInfo(call.out, *c, call.session.proto);
      }
    }
    return;
  }
  if (IEquals(sub, "GETKEYS")) {
    if (a.size() < 4) return AppendError(call.out, WrongArityMessage("command|getkeys"));
    const CommandSpec* c = FindCommand(a[2]);
    if (c == nullptr) return AppendError(call.out, "ERR Invalid command specified");
    const size_t argc = a.size() - 2;
    if (c->arity >= 0 ? argc != static_cast<size_t>(c->arity) : argc < static_cast<size_t>(-c->arity)) {
      return AppendError(call.out, "ERR Invalid number of arguments specified for command");
    }
    if (c->first_key == 0) return AppendError(call.out, "ERR The command has no key arguments");
    const size_t last = c->last_key < 0 ? argc + c->last_key : static_cast<size_t>(c->last_key);
    std::vector<std::string_view> keys;
    for (size_t i = static_cast<size_t>(c->first_key); i <= last && i < argc; i += static_cast<size_t>(c->key_step)) {
      keys.push_back(a[2 + i]);
    }
    AppendArrayHeader(call.out, keys.size());
    for (std::string_view k : keys) AppendBulk(call.out, k);
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
    AppendMapHeader(call.out, picked.size(), call.session.proto);
    for (const CommandSpec* c : picked) AppendCommandDocs(call.out, *c, call.session.proto);
    return;
  }
  AppendError(call.out, Cat("ERR unknown subcommand '", sub.substr(0, 128), "'. Try COMMAND HELP."));
}

void CmdTime(CommandCall& call) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
  AppendArrayHeader(call.out, 2);
  AppendBulk(call.out, std::to_string(us / 1'000'000));
  AppendBulk(call.out, std::to_string(us % 1'000'000));
}

// A master without replicas (Pollen's peers replicate by gossip, not as
// Redis replicas: see POLLEN.MEMBERS).
void CmdRole(CommandCall& call) {
  AppendArrayHeader(call.out, 3);
  AppendBulk(call.out, "master");
  AppendInteger(call.out, 0);
  AppendArrayHeader(call.out, 0);
}

void CmdLastsave(CommandCall& call) { AppendInteger(call.out, LastSave(call.ctx)); }

void CmdModule(CommandCall& call) {
  if (IEquals(call.args[1], "LIST")) {
    if (call.args.size() != 2) return AppendError(call.out, WrongArityMessage("module|list"));
    return AppendModuleList(call.out, call.session.proto);
  }
  if (IEquals(call.args[1], "LOAD") || IEquals(call.args[1], "LOADEX") || IEquals(call.args[1], "UNLOAD")) {
    return AppendError(call.out, "ERR Pollen does not load modules: its Bloom commands are built in");
  }
  AppendError(call.out, Cat("ERR unknown subcommand '", call.args[1].substr(0, 128), "'. Try MODULE HELP."));
}

}  // namespace pollen::resp
