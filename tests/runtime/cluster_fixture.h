// A fixture that runs pollend processes sharing one secret, with the flags the
// process tests use (short anti-entropy interval so convergence after loss or
// a late join is quick; generous waits because CI machines are slow).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/runtime/process_harness.h"

namespace pollen::testing {

inline constexpr auto kReadyTimeout = std::chrono::seconds(120);
inline constexpr auto kConvergeTimeout = std::chrono::seconds(180);

// True when EXISTS answers `count` for `key` at `n` (1: the filter is there,
// 0: it is not).
inline bool KeyCount(Pollend& n, const std::string& key, long long count) {
  RespClient c = n.Client();
  RespReply r = c.Command({"EXISTS", key});
  return r.type == RespReply::kInteger && r.integer == count;
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = RandomSecretHex();
    dir_ = MakeTempDir("cluster");
  }
  void TearDown() override {
    if (HasFailure()) {
      for (auto& n : nodes_) {
        if (n) std::cerr << "---- log of " << n->log_path() << " ----\n" << TailFile(n->log_path()) << "\n";
      }
    }
    nodes_.clear();  // SIGKILL + reap
    if (!HasFailure()) RemoveTempDirs();  // keep logs and data of a failed test
  }

  // Adds a node (not started). `seed` = index of the node to join through, -1 for none.
  Pollend& AddNode(int seed, std::vector<std::string> extra = {}, bool ipv6 = false) {
    NodePorts p{PickFreePort(), PickFreePort(), PickFreePort(), ipv6};
    const std::string name = "n" + std::to_string(nodes_.size() + 1);
    std::vector<std::string> flags = {"--anti-entropy-interval", "1s", "--join-timeout", "5s", "--log-level",
                                      "info"};
    if (seed >= 0) {
      flags.push_back("--seeds");
      flags.push_back(nodes_.at(static_cast<size_t>(seed))->ports().gossip_addr());
    }
    flags.insert(flags.end(), extra.begin(), extra.end());
    nodes_.push_back(std::make_unique<Pollend>(name, p, flags, secret_, dir_ + "/" + name + ".log"));
    return *nodes_.back();
  }

  void StartAndWaitReady(Pollend& n) {
    ASSERT_TRUE(n.Start());
    ASSERT_TRUE(n.WaitReady(kReadyTimeout)) << TailFile(n.log_path());
  }

  // Starts a seed node, then two that join through it, and waits until all
  // three are ready; they are nodes_[0..2], each given the `extra` flags.
  // Use under ASSERT_NO_FATAL_FAILURE.
  void StartThree(const std::vector<std::string>& extra = {}) {
    StartAndWaitReady(AddNode(-1, extra));
    Pollend& n2 = AddNode(0, extra);
    Pollend& n3 = AddNode(0, extra);
    ASSERT_TRUE(n2.Start());
    ASSERT_TRUE(n3.Start());
    ASSERT_TRUE(n2.WaitReady(kReadyTimeout));
    ASSERT_TRUE(n3.WaitReady(kReadyTimeout));
  }

  // True once `n` lists `count` alive members, itself included (bounded by
  // kConvergeTimeout).
  static bool WaitAlive(Pollend& n, int count) {
    return WaitFor(
        [&] {
          auto v = MetricValue(n.Metrics(), "pollen_members", "state=\"alive\"");
          return v && *v == count;
        },
        kConvergeTimeout);
  }

  // Polls CLIENT LIST through `other` until some client's last command is
  // `cmd` while `done` is still false (returns true: seen running), or until
  // `done` turns true first (false). Bounded by kConvergeTimeout.
  static bool SeenRunning(RespClient& other, const std::string& cmd, const std::atomic<bool>& done) {
    bool running = false;
    WaitFor(
        [&] {
          running = other.Command({"CLIENT", "LIST"}).str.find("cmd=" + cmd) != std::string::npos && !done.load();
          return running || done.load();
        },
        kConvergeTimeout);
    return running;
  }

  // StartThree, then waits until every node lists three alive members (so
  // all rank the same owners) and holds filter "urls", reserved at the first
  // node with `reserve` (the words after BF.RESERVE urls). Use under
  // ASSERT_NO_FATAL_FAILURE.
  void StartThreeWithFilter(const std::vector<std::string>& reserve, const std::vector<std::string>& extra = {}) {
    ASSERT_NO_FATAL_FAILURE(StartThree(extra));
    for (auto& n : nodes_) {
      ASSERT_TRUE(WaitAlive(*n, 3));
    }
    {
      RespClient c = nodes_[0]->Client();
      ASSERT_TRUE(c.connected());
      std::vector<std::string> args = {"BF.RESERVE", "urls"};
      args.insert(args.end(), reserve.begin(), reserve.end());
      ASSERT_EQ(c.Command(args).str, "OK");
    }
    for (auto& n : nodes_) {
      ASSERT_TRUE(WaitFor(
          [&] {
            RespClient c = n->Client();
            return c.connected() && c.Command({"BF.INFO", "urls"}).type == RespReply::kArray;
          },
          kConvergeTimeout));
    }
  }

  // True when every key reads present at `n`.
  static bool AllPresent(Pollend& n, const std::string& filter, const std::vector<std::string>& keys) {
    RespClient c = n.Client();
    if (!c.connected()) return false;
    std::vector<std::string> args = {"BF.MEXISTS", filter};
    args.insert(args.end(), keys.begin(), keys.end());
    RespReply r = c.Command(args);
    if (r.type != RespReply::kArray || r.elements.size() != keys.size()) return false;
    for (const auto& e : r.elements) {
      if (e.type != RespReply::kInteger || e.integer != 1) return false;
    }
    return true;
  }

  static std::vector<std::string> Keys(const std::string& prefix, int n) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back("https://" + prefix + ".example/" + std::to_string(i));
    return keys;
  }

  // BF.ADD each key at `n`; every reply must be an integer (acknowledged).
  static void AddAll(Pollend& n, const std::string& filter, const std::vector<std::string>& keys) {
    RespClient c = n.Client();
    ASSERT_TRUE(c.connected());
    for (const auto& k : keys) {
      RespReply r = c.Command({"BF.ADD", filter, k});
      ASSERT_EQ(r.type, RespReply::kInteger) << k << " " << r.str;
    }
  }

  std::string secret_;
  std::string dir_;
  std::vector<std::unique_ptr<Pollend>> nodes_;
};

}  // namespace pollen::testing
