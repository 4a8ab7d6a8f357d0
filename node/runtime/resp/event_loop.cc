#include "node/runtime/resp/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pollen::resp {

namespace {
absl::Status CtlError(const char* op, int fd) {
  return absl::InternalError(absl::StrCat("epoll_ctl ", op, " fd ", fd, ": ", std::strerror(errno)));
}
}  // namespace

EventLoop::EventLoop(std::chrono::microseconds busy_poll) : busy_poll_(busy_poll) {
  assert(busy_poll >= std::chrono::microseconds(0) && busy_poll <= kMaxBusyPoll);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    std::fprintf(stderr, "RESP event loop: epoll_create1/eventfd: %s\n", std::strerror(errno));
    std::abort();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr marks the wake-up descriptor
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    std::fprintf(stderr, "RESP event loop: epoll_ctl: %s\n", std::strerror(errno));
    std::abort();
  }
}

EventLoop::~EventLoop() {
  assert(loop_thread_.load() == std::thread::id());
  retired_.clear();
  handlers_.clear();  // handlers close their descriptors
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(tasks_);
  }
  tasks.clear();
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

void EventLoop::Run() {
  loop_thread_.store(std::this_thread::get_id());
  epoll_event events[kMaxEvents];
  now_ = Clock::now();
  Clock::time_point next_tick = now_ + kTick;
  bool more_tasks = RunTasks();  // posted before Run()
  while (!quit_.load(std::memory_order_relaxed)) {
    if (drain_.load(std::memory_order_relaxed) && handlers_.empty() && !more_tasks) break;
    int timeout_ms = 0;
    if (!more_tasks) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now_).count() + 1;
      timeout_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, kTick.count())));
    }
    const int n = timeout_ms > 0 ? WaitAfterPolling(events, timeout_ms) : ::epoll_wait(epoll_fd_, events, kMaxEvents, 0);
    now_ = Clock::now();
    if (n > 0) last_ready_ = now_;
    for (int i = 0; i < n; ++i) {
      auto* handler = static_cast<IoHandler*>(events[i].data.ptr);
      if (handler == nullptr) {
        uint64_t count = 0;
        while (::read(wake_fd_, &count, sizeof(count)) > 0) {
        }
        std::lock_guard<std::mutex> lock(mu_);
        wake_pending_ = false;
        continue;
      }
      handler->OnEvents(events[i].events);
    }
    more_tasks = RunTasks();
    if (now_ >= next_tick) {
      for (auto& entry : handlers_) entry.first->OnTick(now_);
      next_tick = now_ + kTick;
    }
    for (IoHandler* h : retired_) handlers_.erase(h);
    retired_.clear();
  }
  loop_thread_.store(std::thread::id());
}

// Busy-polls for up to busy_poll_ after the last ready descriptor before it
// blocks: under load the next request arrives within microseconds, and a
// thread that went to sleep costs that request a wake-up (on this VM an
// inter-processor interrupt and a reschedule, tens of microseconds). Idle
// loops block at once (the window has passed), so polling costs CPU only
// while clients are active.
int EventLoop::WaitAfterPolling(epoll_event* events, int timeout_ms) {
  const Clock::time_point until = last_ready_ + busy_poll_;
  for (Clock::time_point t = Clock::now(); t < until; t = Clock::now()) {
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, 0);
    if (n != 0) return n;
  }
  return ::epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
}

bool EventLoop::RunTasks() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.empty()) return false;
    if (tasks_.size() <= kMaxTasksPerRound) {
      batch.swap(tasks_);
    } else {
      batch.assign(std::make_move_iterator(tasks_.begin()),
                   std::make_move_iterator(tasks_.begin() + kMaxTasksPerRound));
      tasks_.erase(tasks_.begin(), tasks_.begin() + kMaxTasksPerRound);
    }
  }
  for (auto& fn : batch) fn();
  std::lock_guard<std::mutex> lock(mu_);
  return !tasks_.empty();
}

void EventLoop::Post(std::function<void()> fn) {
  assert(fn);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(fn));
    // On the loop thread the task runs at the end of this iteration anyway.
    if (!wake_pending_ && loop_thread_.load(std::memory_order_relaxed) != std::this_thread::get_id()) {
      wake_pending_ = true;
      wake = true;
    }
  }
  if (wake) Wake();
}

void EventLoop::Wake() {
  const uint64_t one = 1;
  // EAGAIN only when the counter is saturated: the loop wakes anyway.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void EventLoop::Quit() {
  quit_.store(true);
  Wake();
}

void EventLoop::Drain() {
  drain_.store(true);
  Wake();
}

IoHandler* EventLoop::Adopt(std::unique_ptr<IoHandler> handler) {
  assert(handler != nullptr);
  IoHandler* raw = handler.get();
  handlers_.emplace(raw, std::move(handler));
  return raw;
}

void EventLoop::Retire(IoHandler* handler) {
  assert(handlers_.count(handler) == 1);
  retired_.push_back(handler);
}

absl::Status EventLoop::Watch(int fd, uint32_t events, IoHandler* handler) {
  assert(handler != nullptr);
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return CtlError("add", fd);
  return absl::OkStatus();
}

absl::Status EventLoop::Modify(int fd, uint32_t events, IoHandler* handler) {
  assert(handler != nullptr);
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = handler;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) return CtlError("mod", fd);
  return absl::OkStatus();
}

void EventLoop::Unwatch(int fd) {
  epoll_event ev{};
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, &ev);
}

}  // namespace pollen::resp
