// IoPool: the RESP server's threads, one io_context per thread.
//
// Each io_context is run by exactly one thread (concurrency hint 1), so a
// connection's handlers never hop between threads: no scheduler condition
// variable, no futex wake-up per request (a shared io_context run by N threads
// wakes a second thread for most completions, which cost more than the
// request itself on a 2-core machine). RespServer spreads connections over the
// contexts round-robin.
//
// Lifecycle: construct (threads not running yet), hand contexts() to the
// server, Start(), ... Stop() (drops the pool's work guards, waits up to
// `grace` for every context to run out of work, then stops the rest and
// joins; idempotent). The destructor calls Stop(). Not thread-safe: call
// Start/Stop from one owner thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace pollen::resp {

class IoPool {
 public:
  static constexpr size_t kMaxThreads = 64;

  // 1 <= threads <= kMaxThreads.
  explicit IoPool(size_t threads);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Stable for the pool's lifetime.
  std::vector<boost::asio::io_context*> contexts() const;
  size_t size() const { return ios_.size(); }

  void Start();
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(100));

 private:
  using Guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
  std::vector<std::unique_ptr<boost::asio::io_context>> ios_;
  std::vector<std::optional<Guard>> guards_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t running_ = 0;  // threads still inside run(); guarded by mu_
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace pollen::resp
