// IoPool: the RESP server's threads, one EventLoop per thread.
//
// Each loop is run by exactly one thread, so a connection's handlers never
// hop between threads and need no lock; a request never wakes a second
// thread. RespServer spreads connections over the loops round-robin.
//
// Lifecycle: construct (threads not running yet), hand the pool to the
// server, Start(), ... Stop() (asks every loop to finish once its handlers
// have closed, waits up to `grace` for that, then stops the rest and joins;
// idempotent). The destructor calls Stop(). Not thread-safe: call Start/Stop
// from one owner thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "node/runtime/resp/event_loop.h"

namespace pollen::resp {

class IoPool {
 public:
  static constexpr size_t kMaxThreads = 64;

  // 1 <= threads <= kMaxThreads; `busy_poll` as for EventLoop.
  explicit IoPool(size_t threads, std::chrono::microseconds busy_poll = EventLoop::kDefaultBusyPoll);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Stable for the pool's lifetime.
  std::vector<EventLoop*> loops() const;
  size_t size() const { return loops_.size(); }

  void Start();
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(100));

 private:
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t running_ = 0;  // threads still inside Run(); guarded by mu_
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace pollen::resp
