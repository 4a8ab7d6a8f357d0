// CLIENT LIST / KILL / ID / SETNAME / GETNAME / INFO: the ClientTable, the
// dispatcher's replies and Redis error strings, and the commands end to end
// over a RespServer spread on an IoPool (one event loop per thread), with raw
// sockets, redis-cli and python3-redis.
#include <atomic>
#include <cstdio>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "node/runtime/resp/client_table.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/io_pool.h"
#include "tests/resp/server_test_util.h"

namespace pollen::resp {
namespace {

using testing::Multibulk;
using testing::RawClient;
using testing::ProcessResult;
using testing::RunCommand;
using Clock = ClientRecord::Clock;

// "k=v k=v ..." -> map.
std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> out;
  for (absl::string_view kv : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    out[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view l : absl::StrSplit(text, '\n', absl::SkipEmpty())) out.emplace_back(l);
  return out;
}

TEST(ClientTable, IdsIncreaseAndListIsSortedById) {
  ClientTable t;
  const uint64_t a = t.NextId(), b = t.NextId(), c = t.NextId();
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  const Clock::time_point now = Clock::now();
  for (uint64_t id : {c, a, b}) t.Add(std::make_shared<ClientRecord>(id, "1.1.1.1:1", "2.2.2.2:2", 5, now), nullptr);
  auto list = t.List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]->id(), a);
  EXPECT_EQ(list[2]->id(), c);
  t.Remove(b);
  t.Remove(b);  // idempotent
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.Find(b), nullptr);
  ASSERT_NE(t.Find(c), nullptr);
}

TEST(ClientTable, KillMatchesEveryFilterAndNeverClosesTheCaller) {
  ClientTable t;
  std::map<uint64_t, int> closed;
  const Clock::time_point now = Clock::now();
  const std::vector<std::pair<std::string, std::string>> addrs = {
      {"10.0.0.1:100", "127.0.0.1:6379"}, {"10.0.0.2:200", "127.0.0.1:6379"}, {"10.0.0.3:300", "127.0.0.1:7000"}};
  std::vector<uint64_t> ids;
  for (const auto& [addr, laddr] : addrs) {
    const uint64_t id = t.NextId();
    ids.push_back(id);
    t.Add(std::make_shared<ClientRecord>(id, addr, laddr, 3, now), [&closed, id] { ++closed[id]; });
  }
  const uint64_t self = ids[0];

  KillFilter by_id;
  by_id.id = ids[1];
  auto r = t.Kill(by_id, self);
  EXPECT_EQ(r.killed, 1u);
  EXPECT_FALSE(r.self_matched);
  EXPECT_EQ(closed[ids[1]], 1);

  KillFilter by_laddr;
  by_laddr.laddr = "127.0.0.1:7000";
  EXPECT_EQ(t.Kill(by_laddr, self).killed, 1u);
  EXPECT_EQ(closed[ids[2]], 1);

  KillFilter by_addr_self;  // the caller itself, SKIPME yes
  by_addr_self.addr = "10.0.0.1:100";
  EXPECT_EQ(t.Kill(by_addr_self, self).killed, 0u);
  by_addr_self.skip_self = false;
  r = t.Kill(by_addr_self, self);
  EXPECT_EQ(r.killed, 1u);
  EXPECT_TRUE(r.self_matched);
  EXPECT_EQ(closed[self], 0);  // the caller closes itself after its reply

  KillFilter none;
  none.match_none = true;
  EXPECT_EQ(t.Kill(none, self).killed, 0u);

  KillFilter all;  // no field set: everyone but the caller
  EXPECT_EQ(t.Kill(all, self).killed, 2u);
  EXPECT_EQ(closed[ids[1]], 2);
  EXPECT_EQ(closed[ids[2]], 2);
  EXPECT_EQ(closed[self], 0);
}

TEST(ClientTable, LineHasRedisFieldsInOrder) {
  const Clock::time_point t0 = Clock::now();
  ClientRecord r(7, "10.1.2.3:4567", "127.0.0.1:6379", 9, t0);
  r.set_name("crawler");
  r.set_last_command("bf.add");
  r.touch(t0 + std::chrono::seconds(3));
  r.set_query_buffer(26);
  const std::string line = FormatClientLine(r, t0 + std::chrono::seconds(5));
  EXPECT_EQ(line.rfind("id=7 addr=10.1.2.3:4567 laddr=127.0.0.1:6379 fd=9 name=crawler age=5 idle=2 flags=N db=0 ", 0),
            0u)
      << line;
  auto f = Fields(line);
  EXPECT_EQ(f["cmd"], "bf.add");
  EXPECT_EQ(f["qbuf"], "26");
  EXPECT_EQ(f["user"], "default");
  EXPECT_EQ(f["resp"], "2");
  EXPECT_EQ(f["multi"], "-1");
  // Redis 7.0's field set, in its order.
  std::vector<std::string> keys;
  for (absl::string_view kv : absl::StrSplit(line, ' ')) keys.emplace_back(kv.substr(0, kv.find('=')));
  const std::vector<std::string> want = {"id",  "addr", "laddr",     "fd",       "name",      "age",  "idle",
                                         "flags", "db", "sub",       "psub",     "ssub",      "multi", "qbuf",
                                         "qbuf-free", "argv-mem", "multi-mem", "rbs", "rbp", "obl", "oll",
                                         "omem", "tot-mem", "events", "cmd", "user", "redir", "resp"};
  EXPECT_EQ(keys, want);
}

// The dispatcher with records registered in the context, as the server does.
class ClientCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      const uint64_t id = f_.ctx.clients.NextId();
      auto rec = std::make_shared<ClientRecord>(id, "10.0.0." + std::to_string(i + 1) + ":5000",
                                                "127.0.0.1:6379", 10 + i, Clock::now());
      f_.ctx.clients.Add(rec, [this, id] { ++closed_[id]; });
      records_.push_back(rec);
    }
    session_.id = records_[0]->id();
    session_.peer = records_[0]->addr();
    session_.record = records_[0].get();
  }
  std::string Run(std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string out;
    Dispatch(f_.ctx, session_, views, &out);
    return out;
  }
  // The bulk text of a CLIENT LIST / INFO reply.
  std::string Bulk(std::vector<std::string> args) {
    const std::string wire = Run(std::move(args));
    Reply r;
    size_t consumed = 0;
    EXPECT_TRUE(ParseReply(wire, &r, &consumed).ok()) << wire;
    EXPECT_EQ(r.type, Reply::Type::kBulk) << wire;
    return r.str;
  }
  std::string Id(size_t i) const { return std::to_string(records_[i]->id()); }

  testing::NodeFixture f_;
  Session session_;
  std::vector<std::shared_ptr<ClientRecord>> records_;
  std::map<uint64_t, int> closed_;
};

TEST_F(ClientCommandTest, ListShowsEveryClientAndFilters) {
  EXPECT_EQ(Run({"CLIENT", "SETNAME", "me"}), "+OK\r\n");
  const std::vector<std::string> all = Lines(Bulk({"CLIENT", "LIST"}));
  ASSERT_EQ(all.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto f = Fields(all[i]);
    EXPECT_EQ(f["id"], Id(i));
    EXPECT_EQ(f["addr"], records_[i]->addr());
    EXPECT_EQ(f["laddr"], "127.0.0.1:6379");
  }
  EXPECT_EQ(Fields(all[0])["name"], "me");
  EXPECT_EQ(Fields(all[0])["cmd"], "client|list");
  EXPECT_EQ(Fields(all[1])["name"], "");
  EXPECT_EQ(Lines(Bulk({"client", "list", "type", "NORMAL"})).size(), 3u);
  EXPECT_EQ(Run({"CLIENT", "LIST", "TYPE", "master"}), "$0\r\n\r\n");
  EXPECT_EQ(Run({"CLIENT", "LIST", "TYPE", "pubsub"}), "$0\r\n\r\n");
  EXPECT_EQ(Run({"CLIENT", "LIST", "TYPE", "bogus"}), "-ERR Unknown client type 'bogus'\r\n");
  const std::vector<std::string> some = Lines(Bulk({"CLIENT", "LIST", "ID", Id(2), "999", Id(1)}));
  ASSERT_EQ(some.size(), 2u);  // in the order asked, unknown ids skipped
  EXPECT_EQ(Fields(some[0])["id"], Id(2));
  EXPECT_EQ(Fields(some[1])["id"], Id(1));
  EXPECT_EQ(Run({"CLIENT", "LIST", "ID", "x"}), "-ERR Invalid client ID\r\n");
  EXPECT_EQ(Run({"CLIENT", "LIST", "extra"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Run({"CLIENT", "LIST", "TYPE"}), "-ERR syntax error\r\n");
}

TEST_F(ClientCommandTest, InfoIdAndNamesDescribeThisClient) {
  EXPECT_EQ(Run({"CLIENT", "ID"}), ":" + Id(0) + "\r\n");
  EXPECT_EQ(Run({"CLIENT", "GETNAME"}), "$-1\r\n");
  EXPECT_EQ(Run({"CLIENT", "SETNAME", "worker-7"}), "+OK\r\n");
  EXPECT_EQ(records_[0]->name(), "worker-7");
  EXPECT_EQ(Run({"CLIENT", "GETNAME"}), "$8\r\nworker-7\r\n");
  const std::string info = Bulk({"CLIENT", "INFO"});
  ASSERT_FALSE(info.empty());
  EXPECT_EQ(info.back(), '\n');
  auto f = Fields(info.substr(0, info.size() - 1));
  EXPECT_EQ(f["id"], Id(0));
  EXPECT_EQ(f["name"], "worker-7");
  EXPECT_EQ(f["cmd"], "client|info");
  EXPECT_EQ(Run({"CLIENT", "SETNAME", ""}), "+OK\r\n");  // clears the name
  EXPECT_EQ(Run({"CLIENT", "GETNAME"}), "$-1\r\n");
  EXPECT_EQ(Run({"CLIENT", "SETNAME", "a\nb"}),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
  EXPECT_EQ(Run({"HELLO", "2", "SETNAME", "via-hello"}).substr(0, 3), "*14");
  EXPECT_EQ(records_[0]->name(), "via-hello");
  EXPECT_EQ(Run({"CLIENT", "ID", "x"}), "-ERR wrong number of arguments for 'client|id' command\r\n");
  EXPECT_EQ(Run({"CLIENT", "GETNAME", "x"}), "-ERR wrong number of arguments for 'client|getname' command\r\n");
  EXPECT_EQ(Run({"CLIENT", "SETNAME"}), "-ERR wrong number of arguments for 'client|setname' command\r\n");
  EXPECT_EQ(Run({"CLIENT", "INFO", "x"}), "-ERR wrong number of arguments for 'client|info' command\r\n");
  EXPECT_EQ(Run({"CLIENT", "NOPE"}), "-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n");
  EXPECT_EQ(Run({"CLIENT", "HELP"}).substr(0, 1), "*");
  // Every command leaves its name in the record (cmd= of CLIENT LIST).
  EXPECT_EQ(Run({"BF.EXISTS", "nofilter", "x"}), ":0\r\n");
  EXPECT_STREQ(records_[0]->last_command(), "bf.exists");
}

TEST_F(ClientCommandTest, KillFilterFormCountsAndSkipsTheCallerByDefault) {
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", Id(1)}), ":1\r\n");
  EXPECT_EQ(closed_[records_[1]->id()], 1);
  EXPECT_EQ(Run({"CLIENT", "KILL", "ADDR", records_[2]->addr(), "TYPE", "normal", "USER", "default"}), ":1\r\n");
  EXPECT_EQ(closed_[records_[2]->id()], 1);
  EXPECT_EQ(Run({"CLIENT", "KILL", "ADDR", "10.9.9.9:1"}), ":0\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", Id(1), "ADDR", records_[2]->addr()}), ":0\r\n");  // both must match
  EXPECT_EQ(Run({"CLIENT", "KILL", "TYPE", "master"}), ":0\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", Id(0)}), ":0\r\n");  // SKIPME yes
  EXPECT_FALSE(session_.close_after_reply);
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", Id(0), "SKIPME", "no"}), ":1\r\n");
  EXPECT_TRUE(session_.close_after_reply);
  EXPECT_EQ(closed_[records_[0]->id()], 0);  // closed after the reply, not through the table
}

TEST_F(ClientCommandTest, KillAddressFormRepliesOkOrNoSuchClient) {
  EXPECT_EQ(Run({"CLIENT", "KILL", "10.9.9.9:1"}), "-ERR No such client\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", records_[1]->addr()}), "+OK\r\n");
  EXPECT_EQ(closed_[records_[1]->id()], 1);
  EXPECT_FALSE(session_.close_after_reply);
  EXPECT_EQ(Run({"CLIENT", "KILL", records_[0]->addr()}), "+OK\r\n");  // the old form may kill the caller
  EXPECT_TRUE(session_.close_after_reply);
}

TEST_F(ClientCommandTest, KillErrorsFollowRedis) {
  EXPECT_EQ(Run({"CLIENT", "KILL"}), "-ERR wrong number of arguments for 'client|kill' command\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", "0"}), "-ERR client-id should be greater than 0\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", "abc"}), "-ERR client-id should be greater than 0\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "TYPE", "bogus"}), "-ERR Unknown client type 'bogus'\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "USER", "bob"}), "-ERR No such user 'bob'\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "SKIPME", "maybe"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "COLOR", "red"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Run({"CLIENT", "KILL", "ID", Id(1), "SKIPME"}), "-ERR syntax error\r\n");
  for (const auto& [id, n] : closed_) EXPECT_EQ(n, 0) << id;  // an error kills nobody
  EXPECT_FALSE(session_.close_after_reply);
}

// A RespServer over an IoPool of two event loops, as pollend runs it.
class PoolServer {
 public:
  PoolServer() : pool_(2) {
    server_ = std::make_unique<RespServer>(
        pool_, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0), f.ctx);
    const absl::Status s = server_->Start();
    EXPECT_TRUE(s.ok()) << s;
    pool_.Start();
  }
  ~PoolServer() {
    server_->Stop();
    pool_.Stop();
    server_.reset();
  }
  uint16_t port() const { return server_->port(); }
  RespServer& server() { return *server_; }

  testing::NodeFixture f;

 private:
  IoPool pool_;
  std::unique_ptr<RespServer> server_;
};

std::optional<Reply> Call(RawClient& c, const std::vector<std::string>& args) {
  if (!c.Send(Multibulk(args))) return std::nullopt;
  return c.Read();
}

// Waits (bounded) until the table holds `n` clients; returns the final count.
size_t WaitForClients(const ServerContext& ctx, size_t n) {
  for (int i = 0; i < 2000 && ctx.clients.size() != n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return ctx.clients.size();
}

TEST(ClientCommandServer, ListAndKillOverRealConnections) {
  PoolServer s;
  std::vector<std::unique_ptr<RawClient>> c;
  std::vector<std::string> ids, addrs;
  for (int i = 0; i < 4; ++i) {
    c.push_back(std::make_unique<RawClient>(s.port()));
    ASSERT_TRUE(c.back()->connected());
    auto id = Call(*c.back(), {"CLIENT", "ID"});
    ASSERT_TRUE(id.has_value());
    ids.push_back(std::to_string(id->integer));
    ASSERT_EQ(Call(*c.back(), {"CLIENT", "SETNAME", "c" + std::to_string(i)})->str, "OK");
    auto info = Call(*c.back(), {"CLIENT", "INFO"});
    ASSERT_TRUE(info.has_value());
    auto f = Fields(info->str);
    EXPECT_EQ(f["id"], ids.back());
    EXPECT_EQ(f["laddr"], "127.0.0.1:" + std::to_string(s.port()));
    addrs.push_back(f["addr"]);
  }
  auto list = Call(*c[0], {"CLIENT", "LIST"});
  ASSERT_TRUE(list.has_value());
  const std::vector<std::string> lines = Lines(list->str);
  ASSERT_EQ(lines.size(), 4u) << list->str;
  for (size_t i = 0; i < 4; ++i) {
    auto f = Fields(lines[i]);
    EXPECT_EQ(f["id"], ids[i]);
    EXPECT_EQ(f["addr"], addrs[i]);
    EXPECT_EQ(f["name"], "c" + std::to_string(i));
  }

  // By id, by address (filter form) and by address (old form).
  EXPECT_EQ(Call(*c[0], {"CLIENT", "KILL", "ID", ids[1]})->integer, 1);
  EXPECT_TRUE(c[1]->ReadsEof());
  EXPECT_EQ(Call(*c[0], {"CLIENT", "KILL", "ADDR", addrs[2]})->integer, 1);
  EXPECT_TRUE(c[2]->ReadsEof());
  EXPECT_EQ(Call(*c[0], {"CLIENT", "KILL", addrs[3]})->str, "OK");
  EXPECT_TRUE(c[3]->ReadsEof());
  auto gone = Call(*c[0], {"CLIENT", "KILL", addrs[3]});
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->str, "ERR No such client");
  EXPECT_EQ(WaitForClients(s.f.ctx, 1), 1u);
  EXPECT_EQ(Lines(Call(*c[0], {"CLIENT", "LIST"})->str).size(), 1u);

  // Killing itself: the reply arrives, then the connection closes.
  EXPECT_EQ(Call(*c[0], {"CLIENT", "KILL", "ID", ids[0], "SKIPME", "no"})->integer, 1);
  EXPECT_TRUE(c[0]->ReadsEof());
  EXPECT_EQ(WaitForClients(s.f.ctx, 0), 0u);
  EXPECT_EQ(s.server().client_count(), 0u);
}

TEST(ClientCommandServer, PipelinedClientsOnAPoolOfContexts) {
  PoolServer s;
  constexpr int kClients = 6, kPerClient = 200;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      RawClient c(s.port());
      std::string batch;
      for (int i = 0; i < kPerClient; ++i) batch += Multibulk({"BF.ADD", "pool", "k" + std::to_string(t * 1000 + i)});
      if (!c.Send(batch)) return;
      int good = 0;
      for (int i = 0; i < kPerClient; ++i) {
        auto r = c.Read();
        if (r.has_value() && r->type == Reply::Type::kInteger && r->integer == 1) ++good;
      }
      for (int i = 0; i < kPerClient; ++i) {  // now every key reads present
        auto r = Call(c, {"BF.EXISTS", "pool", "k" + std::to_string(t * 1000 + i)});
        if (r.has_value() && r->integer == 1) ++good;
      }
      ok.fetch_add(good);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kClients * kPerClient * 2);
  RawClient last(s.port());
  EXPECT_EQ(Call(last, {"PING"})->str, "PONG");
  s.server().Stop();
  EXPECT_TRUE(last.ReadsEof());
}

TEST(ClientCommandServer, RedisCliAndPythonRedisSeeTheClientList) {
  PoolServer s;
  const std::string p = std::to_string(s.port());
  ProcessResult r = RunCommand("redis-cli -p " + p + " CLIENT LIST", 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("id="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cmd=client|list"), std::string::npos) << r.output;
  // redis-py parses CLIENT LIST into dicts and uses the filter form of KILL.
  const std::string script =
      "import time, redis\n"
      "a = redis.Redis(host='127.0.0.1', port=" + p + ", socket_timeout=20, decode_responses=True)\n"
      "b = redis.Redis(host='127.0.0.1', port=" + p + ", socket_timeout=20, decode_responses=True)\n"
      "assert a.client_setname('alpha')\n"
      "assert b.client_setname('beta')\n"
      "assert a.client_getname() == 'alpha'\n"
      "names = sorted(c['name'] for c in a.client_list())\n"
      "assert names == ['alpha', 'beta'], names\n"
      "assert a.client_kill_filter(_id=b.client_id()) == 1\n"
      "for _ in range(2000):\n"
      "    if len(a.client_list()) == 1: break\n"
      "    time.sleep(0.005)\n"
      "print('clients', len(a.client_list()))\n";
  const std::string path = ::testing::TempDir() + "/client_list_" + p + ".py";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fwrite(script.data(), 1, script.size(), f);
  std::fclose(f);
  r = RunCommand("/usr/bin/python3 " + path, 60);  // Debian python3-redis
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("clients 1"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace pollen::resp
