// CommandStats through a real RespServer: every pipelined command is timed
// once, and a deferred reply is timed until it is written.
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "node/runtime/resp/command_stats.h"
#include "node/runtime/resp/dispatcher.h"
#include "tests/resp/server_test_util.h"

namespace pollen::resp {
namespace {

using testing::Multibulk;
using testing::RawClient;
using testing::ServerFixture;

using testing::StatsSlotOf;

TEST(CommandStatsServer, CountsEachPipelinedCommandOnce) {
  ServerFixture s;
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  std::string batch;
  for (int i = 0; i < 500; ++i) batch += Multibulk({"BF.ADD", "f", "key-" + std::to_string(i)});
  for (int i = 0; i < 300; ++i) batch += Multibulk({"BF.EXISTS", "f", "key-" + std::to_string(i)});
  batch += Multibulk({"BF.RESERVE", "f", "0.01", "100"});  // fails: the filter exists
  batch += Multibulk({"ECHO"});                            // rejected: arity
  ASSERT_TRUE(c.Send(batch));
  for (int i = 0; i < 802; ++i) ASSERT_TRUE(c.Read().has_value()) << i;
  const CommandStats::Totals add = s.f.ctx.command_stats.Read(StatsSlotOf("bf.add"));
  EXPECT_EQ(add.calls, 500u);
  EXPECT_GT(add.nanos, 0u);
  EXPECT_EQ(add.failed + add.rejected, 0u);
  EXPECT_EQ(s.f.ctx.command_stats.Read(StatsSlotOf("bf.exists")).calls, 300u);
  EXPECT_EQ(s.f.ctx.command_stats.Read(StatsSlotOf("bf.reserve")).failed, 1u);
  EXPECT_EQ(s.f.ctx.command_stats.Read(StatsSlotOf("echo")).rejected, 1u);
}

TEST(CommandStatsServer, LatencyTrackingOffKeepsNoStats) {
  ServerFixture s([](ServerContext& ctx) { ctx.latency_tracking = false; });
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  std::string batch;
  for (int i = 0; i < 100; ++i) batch += Multibulk({"BF.ADD", "f", "key-" + std::to_string(i)});
  batch += Multibulk({"ECHO"});  // rejected: arity
  ASSERT_TRUE(c.Send(batch));
  for (int i = 0; i < 101; ++i) ASSERT_TRUE(c.Read().has_value()) << i;
  const CommandStats::Totals add = s.f.ctx.command_stats.Read(StatsSlotOf("bf.add"));
  EXPECT_EQ(add.calls + add.rejected + add.failed, 0u);
  EXPECT_EQ(s.f.ctx.command_stats.Read(StatsSlotOf("echo")).rejected, 0u);
}

TEST(CommandStatsServer, ADeferredReplyIsTimedUntilItIsWritten) {
  constexpr auto kPeerDelay = std::chrono::milliseconds(300);
  std::vector<std::jthread> answerers;  // joined even if an ASSERT returns early
  ServerFixture s([&](ServerContext& ctx) {
    // A peer check that answers after kPeerDelay, from another thread (as
    // the driver would).
    ctx.peer_check = [&](ServerContext::PeerCheckBegin, ServerContext::PeerCheckDone done) {
      answerers.emplace_back([done, kPeerDelay] {
        std::this_thread::sleep_for(kPeerDelay);
        node::PeerCheckResult r;
        r.peers_acked = 1;
        done(r);
      });
    };
  });
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(Multibulk({"WAIT", "1", "1000"}) + Multibulk({"PING"})));
  auto wait = c.Read();
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->integer, 1);
  ASSERT_TRUE(c.Read().has_value());
  for (auto& t : answerers) t.join();  // the recording happened before the reply was sent
  const CommandStats::Totals t = s.f.ctx.command_stats.Read(StatsSlotOf("wait"));
  ASSERT_EQ(t.calls, 1u);
  // At least the peers' delay: it landed in a bucket above 250 ms.
  EXPECT_GE(t.nanos, static_cast<uint64_t>(std::chrono::nanoseconds(kPeerDelay).count()));
  EXPECT_EQ(t.buckets[CommandStats::BucketOf(250'000'000)], 0u);
  EXPECT_EQ(s.f.ctx.command_stats.Read(StatsSlotOf("ping")).calls, 1u);
}

}  // namespace
}  // namespace pollen::resp
