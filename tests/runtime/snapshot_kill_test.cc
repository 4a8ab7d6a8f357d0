// Multi-process: SIGKILL at random points inside snapshots loses no add that
// was acknowledged under appendfsync always. Each cycle restarts the node on
// its data directory, checks every key acknowledged in earlier cycles, adds
// batches, asks for a snapshot (SIGUSR1) and keeps adding for a random while
// (0-150 ms: inside the snapshot's base or delta writes, whose files are
// renamed, fsynced and the log's segments deleted at random points relative
// to the kill), then kills the node right after an acknowledged batch. The
// seed is printed; POLLEN_SNAPSHOT_KILL_SEED replays one.
#include <csignal>
#include <cstdlib>
#include <random>
#include <thread>

#include "tests/runtime/cluster_fixture.h"
#include "tests/runtime/dir_util.h"

namespace pollen::testing {
namespace {

// BF.MADD of `keys` on one connection; true if every key was acknowledged.
bool AddBatch(RespClient& c, const std::string& filter, const std::vector<std::string>& keys) {
  std::vector<std::string> args = {"BF.MADD", filter};
  args.insert(args.end(), keys.begin(), keys.end());
  const RespReply r = c.Command(args);
  return r.type == RespReply::kArray && r.elements.size() == keys.size();
}

TEST_F(ClusterTest, SigkillInsideSnapshotsLosesNoAcknowledgedAdd) {
  const char* replay = std::getenv("POLLEN_SNAPSHOT_KILL_SEED");
  const uint64_t seed = replay != nullptr ? std::strtoull(replay, nullptr, 10) : std::random_device()();
  std::printf("snapshot-kill seed %llu (POLLEN_SNAPSHOT_KILL_SEED=%llu replays it)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string data = MakeTempDir("killdata");
  Pollend& n = AddNode(-1, {"--data-dir", data, "--appendfsync", "always", "--snapshot-interval", "1s"});
  StartAndWaitReady(n);
  {
    RespClient c = n.Client();
    // 24 MB: a base takes tens of milliseconds to write, deltas less.
    ASSERT_EQ(c.Command({"BF.RESERVE", "big", "0.01", "20000000", "NONSCALING"}).str, "OK");
  }
  std::vector<std::string> acked;
  constexpr int kCycles = 6;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    if (cycle > 0) {
      StartAndWaitReady(n);
      ASSERT_TRUE(AllPresent(n, "big", acked)) << acked.size() << " keys acknowledged before the kills";
    }
    RespClient c = n.Client();
    ASSERT_TRUE(c.connected());
    uint64_t next = 0;
    auto batch = [&] {
      std::vector<std::string> keys;
      for (int i = 0; i < 100; ++i) keys.push_back("c" + std::to_string(cycle) + "/" + std::to_string(next++));
      ASSERT_TRUE(AddBatch(c, "big", keys));
      acked.insert(acked.end(), keys.begin(), keys.end());
    };
    const int before = 5 + static_cast<int>(rng() % 30);
    for (int i = 0; i < before; ++i) batch();
    n.Kill(SIGUSR1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(rng() % 150);
    while (std::chrono::steady_clock::now() < until) batch();
    n.Kill(SIGKILL);
    EXPECT_EQ(n.WaitExit(std::chrono::seconds(30)), -1);  // killed by the signal
  }
  StartAndWaitReady(n);
  EXPECT_TRUE(AllPresent(n, "big", acked)) << acked.size() << " keys acknowledged before the kills";
}

}  // namespace
}  // namespace pollen::testing
