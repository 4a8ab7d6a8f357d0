// Pipelined runs (command_run.h): a run of BF.ADD or BF.EXISTS requests
// executed as one batch answers and counts exactly as the same requests
// dispatched one at a time, checked on random runs against a second node.
#include "node/runtime/resp/command_run.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "node/runtime/resp/commands.h"
#include "tests/resp/resp_test_util.h"

namespace pollen::resp {
namespace {

// One node served by runs, one by single requests; the same secret, so the
// same keys land on the same bits (false positives included).
struct Side {
  testing::NodeFixture f;
  Session session;
  bool log_fails = false;
  std::vector<std::string> logged;  // "filter/key", in log order

  Side() {
    f.ctx.log_adds = [this](std::string_view filter, std::span<const std::string_view> keys) {
      for (std::string_view key : keys) logged.push_back(std::string(filter) + "/" + std::string(key));
      return log_fails ? absl::UnavailableError("disk full") : absl::OkStatus();
    };
  }
  std::string Run(std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string out;
    Dispatch(f.ctx, session, views, &out);
    return out;
  }
};

void ExpectSameCounters(const ServerContext& a, const ServerContext& b) {
  EXPECT_EQ(a.counters.commands_processed.load(), b.counters.commands_processed.load());
  EXPECT_EQ(a.counters.error_replies.load(), b.counters.error_replies.load());
  EXPECT_EQ(a.counters.keys_added.load(), b.counters.keys_added.load());
  EXPECT_EQ(a.counters.keys_queried.load(), b.counters.keys_queried.load());
}

void ExpectSameWaitRecord(const WaitRecord& a, const WaitRecord& b) {
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.overflowed, b.overflowed);
  ASSERT_EQ(a.keys.size(), b.keys.size());
  for (const auto& [filter, keys] : a.keys) {
    auto it = b.keys.find(filter);
    ASSERT_NE(it, b.keys.end()) << filter;
    EXPECT_EQ(keys.records, it->second.records) << filter;
    EXPECT_EQ(keys.incarnation != 0, it->second.incarnation != 0) << filter;
  }
}

TEST(CommandRun, RandomRunsAnswerAsTheirRequestsOneAtATime) {
  Side runs, singles;
  for (Side* side : {&runs, &singles}) {
    ASSERT_EQ(side->Run({"BF.RESERVE", "f", "0.01", "500"}), "+OK\r\n");
    // Full after 40 keys: refusals land in the middle of runs.
    ASSERT_EQ(side->Run({"BF.RESERVE", "tiny", "0.01", "40", "NONSCALING"}), "+OK\r\n");
    // Grows a layer every few keys: growth lands in the middle of runs.
    ASSERT_EQ(side->Run({"BF.RESERVE", "grows", "0.01", "4", "EXPANSION", "1"}), "+OK\r\n");
  }
  const std::vector<std::string> filters = {"f", "tiny", "grows", "made-by-add-1", "made-by-add-2", "never"};
  std::mt19937_64 rng(20261125);
  size_t refusals = 0;
  for (int round = 0; round < 400; ++round) {
    const bool add = rng() % 3 != 0;
    std::string filter = filters[rng() % filters.size()];
    if (!add && filter == "made-by-add-2") filter = "never";  // reads of a missing filter answer 0
    const bool log_fails = add && rng() % 20 == 0;
    runs.log_fails = singles.log_fails = log_fails;
    std::vector<std::string> items;
    const size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) items.push_back("k" + std::to_string(rng() % 120));
    const std::vector<std::string_view> views(items.begin(), items.end());

    std::string run_out;
    const std::optional<RunResult> result = DispatchRun(
        runs.f.ctx, runs.session, add ? RunKind::kAdd : RunKind::kExists, filter, views, &run_out);
    ASSERT_TRUE(result.has_value());
    std::string single_out;
    size_t errors = 0;
    for (const std::string& item : items) {
      const std::string reply = singles.Run({add ? "BF.ADD" : "BF.EXISTS", filter, item});
      errors += reply[0] == '-';
      refusals += reply == "-ERR non scaling filter is full\r\n";
      single_out += reply;
    }
    ASSERT_EQ(run_out, single_out) << "round " << round << " filter " << filter;
    EXPECT_EQ(result->requests, n);
    EXPECT_EQ(result->errors, errors) << "round " << round;
    ExpectSameCounters(runs.f.ctx, singles.f.ctx);
  }
  ExpectSameWaitRecord(runs.session.wait_record, singles.session.wait_record);
  EXPECT_EQ(runs.logged, singles.logged);
  EXPECT_GT(refusals, 0u) << "no run met a full filter: the test lost its point";
  for (const char* card : {"f", "tiny", "grows", "made-by-add-1"}) {
    EXPECT_EQ(runs.Run({"BF.CARD", card}), singles.Run({"BF.CARD", card})) << card;
  }
  const std::string info = runs.Run({"BF.INFO", "grows", "FILTERS"});
  EXPECT_NE(info, ":1\r\n") << "the scaling filter never grew: the test lost its point";
  EXPECT_EQ(info, singles.Run({"BF.INFO", "grows", "FILTERS"}));
}

// WATCH sees a run's adds as it sees one add: EXEC aborts.
TEST(CommandRun, ARunTouchesTheFilterForWatch) {
  testing::NodeFixture f;
  Session watcher, adder;
  auto run = [&f](Session& s, std::vector<std::string> args) {
    std::vector<std::string_view> views(args.begin(), args.end());
    std::string out;
    Dispatch(f.ctx, s, views, &out);
    return out;
  };
  ASSERT_EQ(run(adder, {"BF.ADD", "f", "a"}), ":1\r\n");
  ASSERT_EQ(run(watcher, {"WATCH", "f"}), "+OK\r\n");
  ASSERT_EQ(run(watcher, {"MULTI"}), "+OK\r\n");
  ASSERT_EQ(run(watcher, {"BF.EXISTS", "f", "a"}), "+QUEUED\r\n");
  // Keys already present: no bit changes, yet a write, as in Redis.
  const std::vector<std::string_view> items = {"a", "a"};
  std::string out;
  ASSERT_TRUE(DispatchRun(f.ctx, adder, RunKind::kAdd, "f", items, &out).has_value());
  EXPECT_EQ(out, ":0\r\n:0\r\n");
  EXPECT_EQ(run(watcher, {"EXEC"}), "*-1\r\n");
}

// Under RESP3 with resp3-replies = redis-8, a run answers with booleans, as
// its requests one at a time do.
TEST(CommandRun, ARunAnswersRedis8BooleansAsSingleRequests) {
  Side runs, singles;
  for (Side* side : {&runs, &singles}) {
    side->session.proto = Proto::kResp3;
    BloomSettings redis8 = side->f.ctx.bloom.Get();
    redis8.resp3_replies = Resp3Replies::kRedis8;
    side->f.ctx.bloom.Reset(redis8);
  }
  const std::vector<std::string> items = {"a", "b", "a", "c"};
  const std::vector<std::string_view> views(items.begin(), items.end());
  for (RunKind kind : {RunKind::kAdd, RunKind::kExists}) {
    std::string run_out;
    ASSERT_TRUE(DispatchRun(runs.f.ctx, runs.session, kind, "f", views, &run_out).has_value());
    std::string single_out;
    for (const std::string& item : items) {
      single_out += singles.Run({kind == RunKind::kAdd ? "BF.ADD" : "BF.EXISTS", "f", item});
    }
    EXPECT_EQ(run_out, single_out);
  }
  EXPECT_EQ(singles.Run({"BF.MEXISTS", "f", "a", "zzz"}), "*2\r\n#t\r\n#f\r\n");
  std::string out;
  ASSERT_TRUE(DispatchRun(runs.f.ctx, runs.session, RunKind::kAdd, "f", views, &out).has_value());
  EXPECT_EQ(out, "#f\r\n#f\r\n#f\r\n#f\r\n");
}

TEST(CommandRun, OnlySingleItemBfAddAndBfExistsOutsideMultiStartARun) {
  testing::NodeFixture f;
  Session session;
  using V = std::vector<std::string_view>;
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.ADD", "f", "a"}), RunKind::kAdd);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"bf.Add", "f", "a"}), RunKind::kAdd);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.EXISTS", "f", "a"}), RunKind::kExists);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.ADD", "f"}), RunKind::kNone);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.ADD", "f", "a", "b"}), RunKind::kNone);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.MADD", "f", "a"}), RunKind::kNone);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"SET", "f", "a"}), RunKind::kNone);
  session.txn.active = true;  // queued by MULTI, not run
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.ADD", "f", "a"}), RunKind::kNone);
  session.txn.active = false;
  f.ctx.password = "secret";  // NOAUTH first
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.ADD", "f", "a"}), RunKind::kNone);
  session.authenticated = true;
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.ADD", "f", "a"}), RunKind::kAdd);

  // The same command spelled the same way, on the same filter.
  EXPECT_TRUE(ContinuesRun(V{"BF.ADD", "f", "a"}, V{"BF.ADD", "f", "b"}));
  EXPECT_FALSE(ContinuesRun(V{"BF.ADD", "f", "a"}, V{"bf.add", "f", "b"}));
  EXPECT_FALSE(ContinuesRun(V{"BF.ADD", "f", "a"}, V{"BF.ADD", "g", "b"}));
  EXPECT_FALSE(ContinuesRun(V{"BF.ADD", "f", "a"}, V{"BF.ADD", "f", "b", "c"}));
  EXPECT_FALSE(ContinuesRun(V{"BF.ADD", "f", "a"}, V{"BF.EXISTS", "f", "a"}));
}

// rename-command: a run starts under the name BF.ADD/BF.EXISTS answer to.
TEST(CommandRun, RenamedBfAddStartsARunUnderItsNewNameOnly) {
  testing::NodeFixture f;
  Session session;
  using V = std::vector<std::string_view>;
  absl::StatusOr<CommandNames> names = CommandNames::Parse("BF.ADD=put,BF.EXISTS=");
  ASSERT_TRUE(names.ok()) << names.status();
  f.ctx.command_names = *std::move(names);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"PUT", "f", "a"}), RunKind::kAdd);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.ADD", "f", "a"}), RunKind::kNone);
  EXPECT_EQ(RunKindOf(f.ctx, session, V{"BF.EXISTS", "f", "a"}), RunKind::kNone);
}

TEST(CommandRun, RoutedAddsAreNotBatched) {
  testing::NodeFixture f;
  Session session;
  f.ctx.routed_add = [](std::string, ServerContext::RoutedKeys, std::function<void(absl::StatusOr<node::RoutedAddResult>)>) {};
  std::vector<std::string_view> reserve = {"BF.RESERVE", "r", "0.01", "100", "ROUTED"};
  std::string out;
  Dispatch(f.ctx, session, reserve, &out);
  ASSERT_EQ(out, "+OK\r\n");
  EXPECT_FALSE(RunMayBatch(f.ctx, RunKind::kAdd, "r"));
  EXPECT_TRUE(RunMayBatch(f.ctx, RunKind::kExists, "r"));  // reads are local
  EXPECT_TRUE(RunMayBatch(f.ctx, RunKind::kAdd, "not-routed"));
  f.ctx.default_filter.routed = true;  // a missing filter would be made routed by its first add
  EXPECT_FALSE(RunMayBatch(f.ctx, RunKind::kAdd, "missing"));

  // A run that finds its filter routed hands its requests back untouched.
  const uint64_t processed = f.ctx.counters.commands_processed.load();
  const std::vector<std::string_view> items = {"a", "b"};
  out.clear();
  EXPECT_FALSE(DispatchRun(f.ctx, session, RunKind::kAdd, "r", items, &out).has_value());
  EXPECT_FALSE(DispatchRun(f.ctx, session, RunKind::kAdd, "missing", items, &out).has_value());
  EXPECT_EQ(out, "");
  EXPECT_EQ(f.ctx.counters.commands_processed.load(), processed);
  EXPECT_EQ(f.ctx.counters.keys_added.load(), 0u);
  EXPECT_EQ(session.wait_record.count, 0u);
}

}  // namespace
}  // namespace pollen::resp
