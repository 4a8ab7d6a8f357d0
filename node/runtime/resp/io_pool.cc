#include "node/runtime/resp/io_pool.h"

#include <cassert>

namespace pollen::resp {

IoPool::IoPool(size_t threads) {
  assert(threads >= 1 && threads <= kMaxThreads);
  if (threads < 1) threads = 1;
  if (threads > kMaxThreads) threads = kMaxThreads;
  for (size_t i = 0; i < threads; ++i) {
    ios_.push_back(std::make_unique<boost::asio::io_context>(1));
    guards_.emplace_back(std::in_place, ios_.back()->get_executor());
  }
}

IoPool::~IoPool() { Stop(); }

std::vector<boost::asio::io_context*> IoPool::contexts() const {
  std::vector<boost::asio::io_context*> out;
  out.reserve(ios_.size());
  for (const auto& io : ios_) out.push_back(io.get());
  return out;
}

void IoPool::Start() {
  if (started_ || stopped_) return;
  started_ = true;
  threads_.reserve(ios_.size());
  running_ = ios_.size();
  for (auto& io : ios_) {
    threads_.emplace_back([this, ctx = io.get()] {
      ctx->run();
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      cv_.notify_all();
    });
  }
}

void IoPool::Stop(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  // Without the guards, a context returns from run() once its connections
  // have finished closing; give them `grace`, then stop whatever is left.
  for (auto& g : guards_) g.reset();
  if (started_) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, grace, [this] { return running_ == 0; });
  }
  for (auto& io : ios_) io->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace pollen::resp
