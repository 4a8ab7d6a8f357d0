#include "node/runtime/resp/io_pool.h"

#include <cassert>

namespace pollen::resp {

IoPool::IoPool(size_t threads, std::chrono::microseconds busy_poll) {
  assert(threads >= 1 && threads <= kMaxThreads);
  if (threads < 1) threads = 1;
  if (threads > kMaxThreads) threads = kMaxThreads;
  for (size_t i = 0; i < threads; ++i) loops_.push_back(std::make_unique<EventLoop>(busy_poll));
}

IoPool::~IoPool() {
  Stop();
  loops_.clear();  // deletes what the loops still hold, after every thread has joined
}

std::vector<EventLoop*> IoPool::loops() const {
  std::vector<EventLoop*> out;
  out.reserve(loops_.size());
  for (const auto& l : loops_) out.push_back(l.get());
  return out;
}

void IoPool::Start() {
  if (started_ || stopped_) return;
  started_ = true;
  threads_.reserve(loops_.size());
  running_ = loops_.size();
  for (auto& l : loops_) {
    threads_.emplace_back([this, loop = l.get()] {
      loop->Run();
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      cv_.notify_all();
    });
  }
}

void IoPool::Stop(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  // A loop returns from Run() once its connections have finished closing;
  // give them `grace`, then stop whatever is left.
  for (auto& l : loops_) l->Drain();
  if (started_) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, grace, [this] { return running_ == 0; });
  }
  for (auto& l : loops_) l->Quit();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace pollen::resp
