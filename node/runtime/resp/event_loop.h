// EventLoop: one thread's epoll loop for the RESP server, in the manner of
// Redis' ae: epoll_wait -> for each ready descriptor, its handler reads,
// executes and writes -> posted tasks -> a periodic tick. Nothing else runs
// per request: no per-operation registration, no speculative reads, no
// handler queue between readiness and the handler.
//
// Promises:
//   - every handler call, posted task and tick runs on the thread inside
//     Run() (or, before Run() starts, on the owner's thread);
//   - Post() is the only member callable from any thread; tasks run in the
//     order posted, after the ready descriptors of the current iteration;
//   - a handler passed to Retire() is deleted after the current iteration's
//     events and tasks, so a pointer still in this iteration's event list
//     stays valid (the handler ignores events once it has closed);
//   - descriptors are level-triggered: an unread input or a writable socket is
//     reported again on the next iteration, so a handler may read once per
//     event (as Redis does) without losing data;
//   - after a ready descriptor it keeps polling epoll without blocking for up
//     to `busy_poll` before it sleeps (see WaitAfterPolling): a loop under load
//     rarely sleeps, an idle one sleeps at once;
//   - OnTick runs on every adopted handler about every kTick (idle timeouts,
//     linger deadlines, accept back-off);
//   - the destructor deletes every adopted handler and every unrun task, on
//     the destroying thread (the loop must not be running).
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace pollen::resp {

class IoHandler {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~IoHandler() = default;
  // `events`: EPOLLIN / EPOLLOUT / EPOLLERR / EPOLLHUP bits.
  virtual void OnEvents(uint32_t events) = 0;
  // About every EventLoop::kTick, with the loop's time.
  virtual void OnTick(Clock::time_point now) { (void)now; }
};

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kTick{100};
  static constexpr int kMaxEvents = 256;    // descriptors handled per epoll_wait
  static constexpr size_t kMaxTasksPerRound = 4096;  // posted tasks run per iteration
  static constexpr std::chrono::microseconds kDefaultBusyPoll{50};  // see WaitAfterPolling
  static constexpr std::chrono::microseconds kMaxBusyPoll{10'000};

  // Creates the epoll and wake-up descriptors; aborts if the kernel refuses
  // (out of descriptors at start-up). `busy_poll` (0..kMaxBusyPoll): how long
  // the loop keeps polling after activity before it sleeps; 0 = never polls.
  explicit EventLoop(std::chrono::microseconds busy_poll = kDefaultBusyPoll);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs until Quit(), or until Drain() was called and no handler or task is
  // left. Call from one thread at a time.
  void Run();
  // Any thread: stop after the current iteration.
  void Quit();
  // Any thread: stop once every handler has been retired and no task is left.
  void Drain();

  // Any thread. `fn` runs on the loop thread; tasks left when the loop is
  // destroyed are destroyed unrun.
  void Post(std::function<void()> fn);

  // Loop thread only (or before Run()).
  IoHandler* Adopt(std::unique_ptr<IoHandler> handler);  // the loop owns it from now on
  void Retire(IoHandler* handler);                        // deleted after this iteration
  absl::Status Watch(int fd, uint32_t events, IoHandler* handler);   // EPOLL_CTL_ADD
  absl::Status Modify(int fd, uint32_t events, IoHandler* handler);  // EPOLL_CTL_MOD
  void Unwatch(int fd);                                              // EPOLL_CTL_DEL
  // The time taken after the last epoll_wait returned (cheaper than reading
  // the clock per request; at most one iteration old).
  Clock::time_point now() const { return now_; }
  size_t handler_count() const { return handlers_.size(); }

 private:
  bool RunTasks();  // true when tasks remain queued
  int WaitAfterPolling(epoll_event* events, int timeout_ms);
  void Wake();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd
  Clock::time_point now_ = Clock::now();
  const std::chrono::microseconds busy_poll_;
  Clock::time_point last_ready_;  // when epoll_wait last reported a descriptor
  std::map<IoHandler*, std::unique_ptr<IoHandler>> handlers_;  // loop thread
  std::vector<IoHandler*> retired_;                            // loop thread
  std::mutex mu_;
  std::vector<std::function<void()>> tasks_;  // guarded by mu_
  bool wake_pending_ = false;                 // guarded by mu_: wake_fd_ holds a count
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<bool> quit_{false};
  std::atomic<bool> drain_{false};
};

}  // namespace pollen::resp
