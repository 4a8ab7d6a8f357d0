// RespServer end to end on 127.0.0.1: raw sockets (pipelining, garbage,
// limits), redis-cli and the Debian python3-redis client.
#include "node/runtime/resp/resp_server.h"

#include <atomic>
#include <mutex>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/resp/server_test_util.h"

namespace pollen::resp {
namespace {

using testing::Multibulk;
using testing::RawClient;
using testing::RunCommand;
using testing::ServerFixture;

std::string Cli(uint16_t port, const std::string& args) {
  return RunCommand("redis-cli -p " + std::to_string(port) + " " + args, 60).output;
}

TEST(RespServer, PipelinesAThousandCommandsInOneWrite) {
  ServerFixture s;
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  std::string batch;
  for (int i = 0; i < 1000; ++i) batch += Multibulk({"BF.ADD", "pipe", "key-" + std::to_string(i)});
  ASSERT_TRUE(c.Send(batch));
  int ones = 0;
  for (int i = 0; i < 1000; ++i) {
    auto r = c.Read();
    ASSERT_TRUE(r.has_value()) << "reply " << i;
    ASSERT_EQ(r->type, Reply::Type::kInteger);
    ones += r->integer == 1;
  }
  EXPECT_GE(ones, 990);  // a new key answers 0 only on a false positive
  std::vector<std::string> mexists = {"BF.MEXISTS", "pipe"};
  for (int i = 0; i < 1000; ++i) mexists.push_back("key-" + std::to_string(i));
  ASSERT_TRUE(c.Send(Multibulk(mexists)));
  auto r = c.Read();
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->elements.size(), 1000u);
  for (const auto& e : r->elements) EXPECT_EQ(e.integer, 1);  // no false negatives
}

// Pipelined runs (command_run.h): the same random script, sent in one stream
// of random-sized writes to one server and one request at a time to another
// (same secret), gets the same replies and the same command counts. The
// script repeats commands in runs, as a pipelining client does, and breaks
// them with everything a run must not swallow: another filter, another
// spelling, MULTI blocks, inline requests, wrong arities, a full filter.
TEST(RespServer, PipelinedRunsAnswerAsRequestsSentOneAtATime) {
  std::mt19937_64 rng(1125);
  std::vector<std::string> script;  // wire requests
  auto add = [&](const std::vector<std::string>& args) { script.push_back(Multibulk(args)); };
  add({"BF.RESERVE", "tiny", "0.01", "30", "NONSCALING"});
  const std::vector<std::vector<std::string>> heads = {
      {"BF.ADD", "f"}, {"bf.add", "f"}, {"BF.ADD", "tiny"}, {"BF.EXISTS", "f"}, {"BF.EXISTS", "tiny"},
      {"BF.ADD", "made"}, {"BF.EXISTS", "never"}};
  std::vector<std::string> head = heads[0];
  while (script.size() < 3000) {
    const uint64_t r = rng() % 100;
    const std::string key = "k" + std::to_string(rng() % 400);
    if (r < 80) {
      if (rng() % 5 == 0) head = heads[rng() % heads.size()];
      std::vector<std::string> args = head;
      args.push_back(key);
      add(args);
    } else if (r < 84) {
      add({"MULTI"});
      for (int i = 0; i < 3; ++i) add({"BF.ADD", "f", key + "-m" + std::to_string(i)});
      add({"EXEC"});
    } else if (r < 88) {
      script.push_back("BF.ADD f " + key + "\r\n");  // inline
    } else if (r < 92) {
      add({"BF.ADD", "f"});  // wrong arity
    } else if (r < 96) {
      add({"BF.ADD", "f", key, key + "-2"});  // one more item: not a run's
    } else {
      add({"BF.CARD", "f"});
    }
  }

  ServerFixture streamed;
  ServerFixture lockstep;
  RawClient a(streamed.port());
  RawClient b(lockstep.port());
  ASSERT_TRUE(a.connected() && b.connected());
  std::string wire;
  for (const std::string& req : script) wire += req;
  for (size_t pos = 0; pos < wire.size();) {  // random cuts land inside requests too
    const size_t n = std::min<size_t>(wire.size() - pos, 1 + rng() % 3000);
    ASSERT_TRUE(a.Send(std::string_view(wire).substr(pos, n)));
    pos += n;
  }
  size_t ints = 0;
  for (size_t i = 0; i < script.size(); ++i) {
    ASSERT_TRUE(b.Send(script[i]));
    const std::optional<Reply> expected = b.Read();
    const std::optional<Reply> got = a.Read();
    ASSERT_TRUE(expected.has_value() && got.has_value()) << "request " << i;
    ASSERT_EQ(got->DebugString(), expected->DebugString()) << "request " << i << ": " << script[i];
    ints += got->type == Reply::Type::kInteger;
  }
  EXPECT_GT(ints, 1800u);
  // Counted as the requests one at a time: calls and failed calls per command.
  auto counts = [](uint16_t port) {
    std::string lines;
    const std::vector<std::string> all = absl::StrSplit(Cli(port, "INFO commandstats"), absl::ByAnyChar("\r\n"), absl::SkipEmpty());
    for (const std::string& line : all) {
      if (line.rfind("cmdstat_bf.", 0) != 0) continue;
      std::string kept;
      const std::vector<std::string> fields = absl::StrSplit(line, ',');
      for (const std::string& field : fields) {
        if (field.find("usec") == std::string::npos) kept += field + ",";
      }
      lines += kept + "\n";
    }
    return lines;
  };
  const std::string counted = counts(streamed.port());
  EXPECT_EQ(counted, counts(lockstep.port()));
  EXPECT_NE(counted.find("cmdstat_bf.add:calls="), std::string::npos) << counted;
  EXPECT_NE(counted.find("cmdstat_bf.exists:calls="), std::string::npos) << counted;
  auto processed = [](uint16_t port) {
    const std::string info = Cli(port, "INFO stats");
    const size_t at = info.find("total_commands_processed:");
    return at == std::string::npos ? std::string() : info.substr(at, info.find('\r', at) - at);
  };
  EXPECT_EQ(processed(streamed.port()), processed(lockstep.port()));
  // And runs did form (the comparison above would pass without them).
  EXPECT_GT(streamed.f.ctx.counters.batched_requests.load(), 1000u);
  EXPECT_EQ(lockstep.f.ctx.counters.batched_requests.load(), 0u);
}

TEST(RespServer, InlineCommandsAndQuit) {
  ServerFixture s;
  RawClient c(s.port());
  ASSERT_TRUE(c.Send("PING\r\nECHO \"a b\"\r\nQUIT\r\nPING\r\n"));
  EXPECT_EQ(c.Read()->str, "PONG");
  EXPECT_EQ(c.Read()->str, "a b");
  EXPECT_EQ(c.Read()->str, "OK");
  EXPECT_TRUE(c.ReadsEof());
}

TEST(RespServer, AHalfClosedClientGetsEveryReplyThenEof) {
  // `printf ... | nc -N`: the requests, then EOF; the replies still come.
  ServerFixture s;
  RawClient c(s.port());
  // Small requests, large replies (COMMAND DOCS): more output than the
  // socket buffers hold is still queued at the server when it reads EOF.
  std::string batch;
  for (int i = 0; i < 1000; ++i) batch += Multibulk({"BF.ADD", "f", "key-" + std::to_string(i)}) + Multibulk({"COMMAND", "DOCS"});
  batch += Multibulk({"BF.CARD", "f"});
  ASSERT_TRUE(c.Send(batch));
  ASSERT_TRUE(c.ShutdownWrite());
  for (int i = 0; i < 1000; ++i) {
    auto added = c.Read();
    ASSERT_TRUE(added.has_value()) << i;
    ASSERT_EQ(added->integer, 1) << i;
    auto docs = c.Read();
    ASSERT_TRUE(docs.has_value()) << i;
  }
  auto card = c.Read();
  ASSERT_TRUE(card.has_value());
  EXPECT_EQ(card->integer, 1000);
  EXPECT_TRUE(c.ReadsEof());
}

// Threads that answer deferred commands later, as the driver would. Declared
// after the ServerFixture, so they are joined before the server goes; the
// fixture's hooks reach them through an atomic pointer set once both exist.
struct Answerers {
  std::mutex mu;
  std::vector<std::jthread> threads;
  void Start(std::function<void()> fn) {
    std::lock_guard lock(mu);
    threads.emplace_back(std::move(fn));
  }
  size_t started() {
    std::lock_guard lock(mu);
    return threads.size();
  }
};

// A routed_add hook whose owners answer 300 ms later, from an answerer
// thread (this lone node owns every key and decides at once).
ServerContext::RoutedAddHook OwnersAnswerLater(ServerContext& ctx, std::atomic<Answerers*>& answerers) {
  return [&answerers, &ctx](std::string filter, ServerContext::RoutedKeys keys, ServerContext::RoutedAddDone done) {
    answerers.load()->Start([&ctx, filter, keys, done] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      absl::StatusOr<node::RoutedAddResult> result = absl::UnknownError("not answered");
      EXPECT_TRUE(ctx.run_on_driver([&](node::Time now) {
        std::vector<std::string_view> views(keys->begin(), keys->end());
        absl::StatusOr<uint64_t> ticket = ctx.node->BeginAdd(filter, views, now);
        if (!ticket.ok()) return ticket.status();
        for (node::RoutedAddResult& r : ctx.node->TakeRoutedAdds()) result = std::move(r);
        return absl::OkStatus();
      }).ok());
      done(std::move(result));
    });
  };
}

TEST(RespServer, AHalfClosedClientGetsItsRoutedAddsReplyAndWhatCameAfter) {
  std::atomic<Answerers*> answerers{nullptr};
  ServerFixture s([&](ServerContext& ctx) {
    ctx.routed_add = OwnersAnswerLater(ctx, answerers);
  });
  Answerers threads;
  answerers = &threads;
  RawClient c(s.port());
  ASSERT_TRUE(c.Send(Multibulk({"BF.RESERVE", "r", "0.01", "1000", "ROUTED"}) + Multibulk({"BF.ADD", "r", "k"}) +
                     Multibulk({"PING"})));
  ASSERT_TRUE(c.ShutdownWrite());  // while the add waits for its owner
  auto reserved = c.Read();
  ASSERT_TRUE(reserved.has_value());
  EXPECT_EQ(reserved->str, "OK");
  auto added = c.Read();
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->integer, 1);
  auto pong = c.Read();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->str, "PONG");
  EXPECT_TRUE(c.ReadsEof());
  EXPECT_EQ(threads.started(), 1u);  // the add did wait for its owner
}

// Pipelined adds to a routed filter are not batched: each one's owners
// decide it and its reply is deferred; the same for a filter the first add
// creates when filters are routed by default.
TEST(RespServer, PipelinedAddsToARoutedFilterGoToTheirOwnersOneByOne) {
  for (const bool routed_by_default : {false, true}) {
    std::atomic<Answerers*> answerers{nullptr};
    ServerFixture s([&](ServerContext& ctx) {
      ctx.routed_add = OwnersAnswerLater(ctx, answerers);
      ctx.default_filter.routed = routed_by_default;
    });
    Answerers threads;
    answerers = &threads;
    RawClient c(s.port());
    std::string wire;
    if (!routed_by_default) wire += Multibulk({"BF.RESERVE", "r", "0.01", "1000", "ROUTED"});
    for (int i = 0; i < 4; ++i) wire += Multibulk({"BF.ADD", "r", "k" + std::to_string(i)});
    ASSERT_TRUE(c.Send(wire));
    if (!routed_by_default) {
      EXPECT_EQ(c.Read()->str, "OK");
    }
    for (int i = 0; i < 4; ++i) {
      const std::optional<Reply> added = c.Read();
      ASSERT_TRUE(added.has_value()) << i;
      EXPECT_EQ(added->integer, 1) << i;
    }
    EXPECT_EQ(threads.started(), 4u) << "routed by default: " << routed_by_default;
    EXPECT_EQ(s.f.ctx.counters.batched_requests.load(), 0u);
  }
}

// POLLEN.SNAPSHOT waits for the snapshot without holding its RESP thread:
// clients on both event loops are served while it is unanswered, and it
// answers with the snapshot's description once the hook calls back (from
// another thread, as the driver's snapshot thread does).
TEST(RespServer, ASnapshotWaitsWithoutBlockingTheOtherClients) {
  std::mutex mu;
  std::vector<ServerContext::SnapshotDone> waiting;
  ServerFixture s([&](ServerContext& ctx) {
    ctx.snapshot = [&](ServerContext::SnapshotDone done) {
      std::lock_guard lock(mu);
      waiting.push_back(std::move(done));
    };
  });
  RawClient asker(s.port());
  ASSERT_TRUE(asker.Send(Multibulk({"POLLEN.SNAPSHOT"}) + Multibulk({"PING"})));
  auto requested = [&] {
    std::lock_guard lock(mu);
    return waiting.size();
  };
  for (int i = 0; i < 2000 && requested() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(requested(), 1u);
  for (int i = 0; i < 4; ++i) {  // connections go round the two loops
    RawClient other(s.port());
    ASSERT_TRUE(other.Send(Multibulk({"PING"})));
    const std::optional<Reply> pong = other.Read();
    ASSERT_TRUE(pong.has_value()) << i;
    EXPECT_EQ(pong->str, "PONG") << i;
  }
  std::jthread snapshot_thread([&] {
    std::lock_guard lock(mu);
    waiting.front()("wrote 3 filters");
  });
  const std::optional<Reply> written = asker.Read();
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(written->str, "wrote 3 filters");
  const std::optional<Reply> pong = asker.Read();  // executed only after the snapshot's reply
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->str, "PONG");
}

// A WAIT (a blocking read) whose client stops sending ends, as Redis frees
// a blocked client at EOF: the replies before it are sent, it gets none,
// and the connection closes, whether the FIN comes while the WAIT waits or
// while an earlier routed add did.
TEST(RespServer, AClientThatStopsSendingDuringAWaitGetsItsEarlierRepliesThenEof) {
  std::atomic<Answerers*> answerers{nullptr};
  ServerFixture s([&](ServerContext& ctx) {
    ctx.peer_check = [&answerers](ServerContext::PeerCheckBegin, ServerContext::PeerCheckDone done) {
      answerers.load()->Start([done] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        node::PeerCheckResult r;
        r.peers_acked = 2;
        done(r);
      });
    };
    ctx.routed_add = OwnersAnswerLater(ctx, answerers);
  });
  Answerers threads;
  answerers = &threads;
  {
    // The FIN while the WAIT waits, with more replies before it than the
    // socket buffers hold (large COMMAND DOCS replies, read only after the
    // FIN): they are still queued at the server when it sees the FIN.
    RawClient c(s.port());
    std::string batch;
    for (int i = 0; i < 200; ++i) {
      batch += Multibulk({"BF.ADD", "f", "key-" + std::to_string(i)}) + Multibulk({"COMMAND", "DOCS"});
    }
    ASSERT_TRUE(c.Send(batch + Multibulk({"WAIT", "2", "0"}) + Multibulk({"PING"})));
    ASSERT_TRUE(c.ShutdownWrite());
    for (int i = 0; i < 200; ++i) {
      auto added = c.Read();
      ASSERT_TRUE(added.has_value()) << i;
      EXPECT_EQ(added->integer, 1) << i;
      ASSERT_TRUE(c.Read().has_value()) << i;  // COMMAND DOCS
    }
    EXPECT_TRUE(c.ReadsEof());  // closed: no WAIT reply, no PONG
  }
  {
    // The FIN while a routed add waits, then a WAIT behind it.
    RawClient c(s.port());
    ASSERT_TRUE(c.Send(Multibulk({"BF.RESERVE", "r", "0.01", "1000", "ROUTED"}) + Multibulk({"BF.ADD", "r", "k"}) +
                       Multibulk({"WAIT", "2", "0"}) + Multibulk({"PING"})));
    ASSERT_TRUE(c.ShutdownWrite());
    auto reserved = c.Read();
    ASSERT_TRUE(reserved.has_value());
    EXPECT_EQ(reserved->str, "OK");
    auto added = c.Read();
    ASSERT_TRUE(added.has_value());
    EXPECT_EQ(added->integer, 1);  // the routed add is answered
    EXPECT_TRUE(c.ReadsEof());     // the WAIT is not
  }
}

TEST(RespServer, ADeferredReplyThatNeverComesGetsAnErrorAtTheBackstop) {
  std::mutex mu;
  std::vector<ServerContext::PeerCheckDone> never;  // answered only after the backstop
  ServerFixture s([&](ServerContext& ctx) {
    ctx.limits.deferred_backstop = std::chrono::milliseconds(300);
    ctx.peer_check = [&](ServerContext::PeerCheckBegin, ServerContext::PeerCheckDone done) {
      std::lock_guard lock(mu);
      never.push_back(std::move(done));
    };
  });
  RawClient c(s.port());
  ASSERT_TRUE(c.Send(Multibulk({"WAIT", "1", "0"}) + Multibulk({"PING"})));
  auto wait = c.Read();
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->type, Reply::Type::kError);
  EXPECT_EQ(wait->str.rfind("ERR timeout", 0), 0u) << wait->str;
  auto pong = c.Read();  // the client goes on
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->str, "PONG");
  // The late answer is dropped; the connection keeps serving.
  ServerContext::PeerCheckDone late_answer;
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(never.size(), 1u);
    late_answer = never[0];
  }
  node::PeerCheckResult late;
  late.peers_acked = 1;
  late_answer(late);
  ASSERT_TRUE(c.Send(Multibulk({"PING"})));
  auto again = c.Read();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->str, "PONG");
}

TEST(RespServer, GarbageGetsErrorsAndTheServerKeepsServing) {
  ServerFixture s;
  {
    // Recoverable: the line is known, the connection survives.
    RawClient c(s.port());
    ASSERT_TRUE(c.Send("ECHO \"unterminated\r\nPING\r\n"));
    auto e = c.Read();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->str, "ERR Protocol error: unbalanced quotes in request");
    EXPECT_EQ(c.Read()->str, "PONG");
  }
  {
    // Framing lost: error, then close.
    RawClient c(s.port());
    ASSERT_TRUE(c.Send("*1\r\n$abc\r\nPING\r\n"));
    auto e = c.Read();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->str, "ERR Protocol error: invalid bulk length");
    EXPECT_TRUE(c.ReadsEof());
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 50; ++i) {
    RawClient c(s.port());
    std::string junk(1 + rng() % 3000, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    if (i % 2 == 0) junk[0] = '*';
    c.Send(junk);
    // Whatever it answered, it must close or keep answering; never hang.
  }
  RawClient c(s.port());
  ASSERT_TRUE(c.Send("PING\r\n"));
  auto pong = c.Read();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->str, "PONG");
  EXPECT_GT(s.f.ctx.counters.protocol_errors.load(), 2u);
  EXPECT_EQ(s.f.node->Filters().size(), 0u);  // garbage changed no state
}

TEST(RespServer, OversizedRequestsAreRefused) {
  ServerFixture s([](ServerContext& ctx) {
    ctx.limits.max_bulk_bytes = 1024;
    ctx.limits.max_args = 8;
    ctx.limits.max_inline_bytes = 256;
  });
  {
    RawClient c(s.port());
    ASSERT_TRUE(c.Send("*1\r\n$1025\r\n"));
    EXPECT_EQ(c.Read()->str, "ERR Protocol error: invalid bulk length");
    EXPECT_TRUE(c.ReadsEof());
  }
  {
    RawClient c(s.port());
    ASSERT_TRUE(c.Send("*9\r\n"));
    EXPECT_EQ(c.Read()->str, "ERR Protocol error: invalid multibulk length");
    EXPECT_TRUE(c.ReadsEof());
  }
  {
    RawClient c(s.port());
    ASSERT_TRUE(c.Send(std::string(300, 'a')));
    EXPECT_EQ(c.Read()->str, "ERR Protocol error: too big inline request");
    EXPECT_TRUE(c.ReadsEof());
  }
  RawClient ok(s.port());
  ASSERT_TRUE(ok.Send(Multibulk({"ECHO", std::string(1024, 'x')})));
  EXPECT_EQ(ok.Read()->str.size(), 1024u);
}

TEST(RespServer, MaxClientsRefusesExtraConnections) {
  ServerFixture s([](ServerContext& ctx) { ctx.limits.max_clients = 2; });
  RawClient a(s.port()), b(s.port());
  ASSERT_TRUE(a.Send("PING\r\n") && b.Send("PING\r\n"));
  ASSERT_EQ(a.Read()->str, "PONG");
  ASSERT_EQ(b.Read()->str, "PONG");
  RawClient c(s.port());
  auto r = c.Read();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->str, "ERR max number of clients reached");
  EXPECT_EQ(s.f.ctx.counters.connections_rejected.load(), 1u);
}

TEST(RespServer, IdleClientsAreClosed) {
  ServerFixture s([](ServerContext& ctx) { ctx.limits.idle_timeout = std::chrono::seconds(1); });
  RawClient c(s.port(), 60);
  ASSERT_TRUE(c.Send("PING\r\n"));
  EXPECT_EQ(c.Read()->str, "PONG");
  EXPECT_TRUE(c.ReadsEof());  // bounded by the 60 s receive timeout
  EXPECT_EQ(s.f.ctx.counters.idle_disconnects.load(), 1u);
}

TEST(RespServer, ClientThatDoesNotReadIsDisconnected) {
  ServerFixture s([](ServerContext& ctx) {
    ctx.limits.max_output_bytes = 64 << 10;
    ctx.limits.idle_timeout = std::chrono::seconds(2);
  });
  RawClient c(s.port(), 60);
  const std::string chunk = [] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += "ECHO 0123456789012345678901234567890123456789\r\n";
    return s;
  }();
  // Write without reading until the server gives up on us (send fails once
  // it has closed), bounded by the send timeout and the loop count.
  bool send_failed = false;
  for (int i = 0; i < 4000 && !send_failed; ++i) send_failed = !c.Send(chunk);
  EXPECT_TRUE(send_failed || c.ReadsEof());
  const uint64_t dropped = s.f.ctx.counters.output_limit_disconnects.load() + s.f.ctx.counters.idle_disconnects.load();
  EXPECT_GE(dropped, 1u);
  RawClient d(s.port());
  ASSERT_TRUE(d.Send("PING\r\n"));
  EXPECT_EQ(d.Read()->str, "PONG");
}

// Replies far beyond the socket buffers and the 256 KiB high-water mark, to
// a client that starts reading only after it has sent everything: the
// server must stall its input, wait for EPOLLOUT, resume, and deliver every
// reply in order.
TEST(RespServer, SlowReaderGetsEveryReplyInOrder) {
  ServerFixture s;
  RawClient c(s.port(), 60);
  ASSERT_TRUE(c.connected());
  constexpr int kRequests = 4000;
  auto payload = [](int i) { return std::to_string(i) + ":" + std::string(1000, 'a' + i % 26); };
  std::thread sender([&] {
    std::string batch;
    for (int i = 0; i < kRequests; ++i) {
      batch += Multibulk({"ECHO", payload(i)});
      if (batch.size() > (64u << 10) || i + 1 == kRequests) {
        if (!c.Send(batch)) return;  // bounded by the send timeout
        batch.clear();
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the output back up
  int in_order = 0;
  for (int i = 0; i < kRequests; ++i) {
    auto r = c.Read();
    if (!r.has_value()) break;
    in_order += r->str == payload(i);
  }
  sender.join();
  EXPECT_EQ(in_order, kRequests);
  EXPECT_EQ(s.f.ctx.counters.output_limit_disconnects.load(), 0u);
}

TEST(RespServer, StopClosesClients) {
  ServerFixture s;
  RawClient c(s.port());
  ASSERT_TRUE(c.Send("PING\r\n"));
  EXPECT_EQ(c.Read()->str, "PONG");
  s.server->Stop();
  EXPECT_TRUE(c.ReadsEof());
}

TEST(RespServer, RedisCliDrivesBloomCommands) {
  ServerFixture s;
  const uint16_t p = s.port();
  EXPECT_EQ(Cli(p, "PING"), "PONG\n");
  EXPECT_EQ(Cli(p, "BF.RESERVE crawl:seen 0.01 1000"), "OK\n");
  EXPECT_EQ(Cli(p, "BF.RESERVE crawl:seen 0.01 1000"), "ERR item exists\n\n");
  EXPECT_EQ(Cli(p, "BF.ADD crawl:seen https://a.example/"), "1\n");
  EXPECT_EQ(Cli(p, "BF.ADD crawl:seen https://a.example/"), "0\n");
  EXPECT_EQ(Cli(p, "BF.EXISTS crawl:seen https://a.example/"), "1\n");
  EXPECT_EQ(Cli(p, "BF.EXISTS nofilter x"), "0\n");
  EXPECT_EQ(Cli(p, "BF.MADD crawl:seen u1 u2 https://a.example/"), "1\n1\n0\n");
  EXPECT_EQ(Cli(p, "BF.INSERT other NOCREATE ITEMS x"), "ERR not found\n\n");
  EXPECT_EQ(Cli(p, "BF.RESERVE bad 1.5 10"), "ERR (0 < error rate range < 1) \n\n");
  EXPECT_EQ(Cli(p, "BF.ADD onlykey"), "ERR wrong number of arguments for 'bf.add' command\n\n");
  EXPECT_EQ(Cli(p, "BF.INFO crawl:seen CAPACITY"), "1000\n");
  EXPECT_EQ(Cli(p, "SELECT 1"), "ERR DB index is out of range\n\n");
  EXPECT_NE(Cli(p, "INFO pollen").find("filter_crawl_seen:capacity=1000"), std::string::npos);
  EXPECT_NE(Cli(p, "COMMAND COUNT"), "");
}

TEST(RespServer, RedisCliInteractiveModeStartsCleanly) {
  // Interactive redis-cli (under a pseudo-terminal) asks COMMAND DOCS at start.
  ServerFixture s;
  const auto r = RunCommand("sh -c \"printf 'PING\\nBF.ADD f x\\nBF.EXISTS f x\\n' | TERM=dumb script -qec 'redis-cli -p " +
                                std::to_string(s.port()) + "' /dev/null\"",
                            60);
  EXPECT_NE(r.output.find("> PONG"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("> (integer) 1"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ERR"), std::string::npos) << r.output;
}

TEST(RespServer, RedisCliPipeModeSendsAThousandCommands) {
  ServerFixture s;
  const std::string path = ::testing::TempDir() + "/resp_pipe_input.txt";
  {
    std::ofstream f(path, std::ios::binary);
    for (int i = 0; i < 1000; ++i) f << Multibulk({"BF.ADD", "piped", "item-" + std::to_string(i)});
  }
  const auto r = RunCommand("redis-cli -p " + std::to_string(s.port()) + " --pipe < " + path, 120);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("errors: 0, replies: 1000"), std::string::npos) << r.output;
  const auto card = Cli(s.port(), "BF.CARD piped");
  EXPECT_NEAR(std::stoi(card), 1000, 100);
}

TEST(RespServer, RedisCliAuth) {
  ServerFixture s([](ServerContext& ctx) { ctx.password = "hunter2"; });
  const uint16_t p = s.port();
  EXPECT_EQ(Cli(p, "PING"), "NOAUTH Authentication required.\n\n");
  EXPECT_NE(Cli(p, "--no-auth-warning -a wrong PING").find("WRONGPASS"), std::string::npos);
  EXPECT_EQ(Cli(p, "--no-auth-warning -a hunter2 PING"), "PONG\n");
  EXPECT_EQ(Cli(p, "--no-auth-warning -a hunter2 BF.ADD f x"), "1\n");
  EXPECT_EQ(RunCommand("env REDISCLI_AUTH=hunter2 redis-cli -p " + std::to_string(p) + " BF.EXISTS f x").output, "1\n");
}

const char* kPythonScript = R"PY(
import sys, redis
port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
assert r.ping() is True
assert r.execute_command("BF.RESERVE", "py", "0.01", "1000") == b"OK"
try:
    r.execute_command("BF.RESERVE", "py", "0.01", "1000")
    raise SystemExit("expected item exists")
except redis.ResponseError as e:
    assert str(e) == "item exists", str(e)
assert r.execute_command("BF.ADD", "py", "a") == 1
assert r.execute_command("BF.ADD", "py", "a") == 0
assert r.execute_command("BF.MADD", "py", "a", "b", "c") == [0, 1, 1]
assert r.execute_command("BF.EXISTS", "py", "b") == 1
assert r.execute_command("BF.EXISTS", "unknown", "b") == 0
assert r.execute_command("BF.MEXISTS", "py", "a", "zz") == [1, 0]
assert r.execute_command("BF.INSERT", "py2", "CAPACITY", "500", "ERROR", "0.001", "ITEMS", "x", "y") == [1, 1]
info = r.execute_command("BF.INFO", "py2")
assert info[0] == b"Capacity" and info[1] == 500, info
assert r.execute_command("BF.CARD", "py2") == 2
try:
    r.execute_command("BF.INSERT", "nope", "NOCREATE", "ITEMS", "x")
    raise SystemExit("expected not found")
except redis.ResponseError as e:
    assert str(e) == "not found", str(e)
try:
    r.execute_command("BF.RESERVE", "bad", "0", "10")
    raise SystemExit("expected error rate error")
except redis.ResponseError as e:
    assert str(e) == "(0 < error rate range < 1) ", str(e)
p = r.pipeline(transaction=False)
for i in range(1000):
    p.execute_command("BF.ADD", "pyp", "k%d" % i)
res = p.execute()
assert len(res) == 1000 and sum(res) >= 990, sum(res)
p = r.pipeline(transaction=False)
for i in range(1000):
    p.execute_command("BF.EXISTS", "pyp", "k%d" % i)
assert all(x == 1 for x in p.execute())
r.client_setname("pyclient")
assert r.client_getname() == "pyclient"
assert "pollen_version" in r.info("server")
members = r.execute_command("POLLEN.MEMBERS")
assert members[0][1] == b"node-a", members
print("python ok")
)PY";

TEST(RespServer, PythonRedisClientDrivesBloomCommands) {
  ServerFixture s;
  const std::string path = ::testing::TempDir() + "/resp_python_client.py";
  {
    std::ofstream f(path);
    f << kPythonScript;
  }
  const auto r = RunCommand("/usr/bin/python3 " + path + " " + std::to_string(s.port()), 120);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("python ok"), std::string::npos) << r.output;
}

const char* kPythonAuthScript = R"PY(
import sys, redis
port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
try:
    r.ping()
    raise SystemExit("expected NOAUTH")
except redis.AuthenticationError:
    pass
try:
    redis.Redis(host="127.0.0.1", port=port, password="nope", socket_timeout=30).ping()
    raise SystemExit("expected WRONGPASS")
except (redis.AuthenticationError, redis.ResponseError) as e:
    assert "WRONGPASS" in str(e) or "invalid username-password" in str(e), str(e)
ok = redis.Redis(host="127.0.0.1", port=port, password="pw", socket_timeout=30)
assert ok.ping() is True
assert ok.execute_command("BF.ADD", "f", "x") == 1
print("auth ok")
)PY";

TEST(RespServer, PythonRedisClientAuth) {
  ServerFixture s([](ServerContext& ctx) { ctx.password = "pw"; });
  const std::string path = ::testing::TempDir() + "/resp_python_auth.py";
  {
    std::ofstream f(path);
    f << kPythonAuthScript;
  }
  const auto r = RunCommand("/usr/bin/python3 " + path + " " + std::to_string(s.port()), 120);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("auth ok"), std::string::npos) << r.output;
}

TEST(RespServer, ManyConcurrentClients) {
  ServerFixture s;
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      RawClient c(s.port());
      if (!c.connected()) return;
      std::string batch;
      for (int i = 0; i < 200; ++i) {
        batch += Multibulk({"BF.ADD", "shared", "t" + std::to_string(t) + "-" + std::to_string(i)});
      }
      if (!c.Send(batch)) return;
      for (int i = 0; i < 200; ++i) {
        auto r = c.Read();
        if (!r || r->type != Reply::Type::kInteger) return;
      }
      std::vector<std::string> check = {"BF.MEXISTS", "shared"};
      for (int i = 0; i < 200; ++i) check.push_back("t" + std::to_string(t) + "-" + std::to_string(i));
      if (!c.Send(Multibulk(check))) return;
      auto r = c.Read();
      if (!r || r->elements.size() != 200) return;
      for (const auto& e : r->elements) {
        if (e.integer != 1) return;
      }
      good.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 8);
}

}  // namespace
}  // namespace pollen::resp
