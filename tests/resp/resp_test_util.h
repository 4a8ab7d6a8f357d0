// Test helpers: a real single-node Node with a driver thread, and a
// ServerContext wired to it the way pollend wires it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "node/core/node.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/server_context.h"

namespace pollen::resp::testing {

// Runs functions on one "driver" thread, like pollend's driver.
class TestDriver {
 public:
  explicit TestDriver(node::Node* node) : node_(node), thread_([this] { Loop(); }) {}
  ~TestDriver() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  absl::Status Run(std::function<absl::Status(node::Time)> fn) {
    std::promise<absl::Status> done;
    std::future<absl::Status> result = done.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back([&] { done.set_value(fn(Now())); });
    }
    cv_.notify_all();
    return result.get();
  }

  node::Time Now() const {
    return std::chrono::duration_cast<node::Time>(std::chrono::steady_clock::now() - origin_);
  }

 private:
  void Loop() {
    node_->Start(Now());
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      while (!queue_.empty()) {
        auto fn = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        fn();
        lock.lock();
      }
      lock.unlock();
      node_->Tick(Now());
      (void)node_->TakeOutgoing();  // single node: nowhere to send
      (void)node_->TakeEvents();
      lock.lock();
    }
  }

  node::Node* node_;
  const std::chrono::steady_clock::time_point origin_ = std::chrono::steady_clock::now();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

inline std::unique_ptr<node::Node> MakeNode(const std::string& name = "node-a", uint8_t secret_seed = 1) {
  node::NodeConfig config;
  config.name = name;
  config.advertise = "127.0.0.1:7946";
  for (size_t i = 0; i < config.secret.bytes.size(); ++i) {
    config.secret.bytes[i] = static_cast<uint8_t>(i * 7 + secret_seed);
  }
  config.cluster_label = "test";
  auto node = node::Node::Create(std::move(config));
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? *std::move(node) : nullptr;
}

// A node, its driver and a context wired to both.
struct NodeFixture {
  std::unique_ptr<node::Node> node;
  TestDriver driver;
  ServerContext ctx;

  explicit NodeFixture(uint8_t secret_seed = 1) : node(MakeNode("node-a", secret_seed)), driver(node.get()) {
    ctx.node = node.get();
    ctx.run_on_driver = [this](std::function<absl::Status(node::Time)> fn) { return driver.Run(std::move(fn)); };
    BloomSettings small;
    small.initial_size = 10'000;  // keep filters made by BF.ADD small
    ctx.bloom.Reset(small);
  }
};

// The CommandStats slot of a command name ("bf.add"); fails the test and
// returns 0 when no slot has that name.
inline size_t StatsSlotOf(std::string_view name) {
  for (size_t s = 0; s < CommandStats::kMaxCommands; ++s) {
    if (CommandSlotName(s) == name) return s;
  }
  ADD_FAILURE() << "no command stats slot named " << name;
  return 0;
}

}  // namespace pollen::resp::testing
