// WorkerTeam: a fixed team of threads that runs one job on every member at
// once and returns when all have finished (fork and join).
//
// Promises: Run(job) calls job(0) on the caller's thread and job(k) on helper
// thread k, for every k in [1, size()), and returns when every call has
// returned. What the caller wrote before Run is visible to every job; what
// the jobs wrote is visible to the caller after Run. Not reentrant: one Run
// at a time, from one thread.
//
// Waiting: pollen-sim runs tens to hundreds of microseconds of work per Run,
// so a sleep and wake per Run (a futex each way, tens of microseconds in this
// VM) would eat the gain. Helpers and the caller therefore spin first
// (kSpins pauses, ~0.1-0.5 ms), then yield the core a few times (kYields: a
// team larger than the free cores must let the member it waits for run),
// and only then sleep (std::atomic::wait).
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace pollen::sim {

class WorkerTeam {
 public:
  explicit WorkerTeam(int size) {
    assert(size >= 1);
    for (int k = 1; k < size; ++k) helpers_.emplace_back([this, k] { Helper(k); });
  }
  ~WorkerTeam() {
    stop_ = true;  // published by the generation bump below
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : helpers_) t.join();
  }
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  void Run(const std::function<void(int)>& job) {
    job_ = &job;
    busy_.store(static_cast<int>(helpers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    job(0);
    for (uint32_t spin = 0;; ++spin) {
      const int busy = busy_.load(std::memory_order_acquire);
      if (busy == 0) break;
      if (spin < kSpins + kYields) {
        Pause(spin);
      } else {
        busy_.wait(busy, std::memory_order_acquire);
      }
    }
    job_ = nullptr;
  }

 private:
  static constexpr uint32_t kSpins = 32768;
  static constexpr uint32_t kYields = 64;

  // One step of waiting, the spin-th.
  static void Pause(uint32_t spin) {
    if (spin < kSpins) {
      Relax();
    } else {
      std::this_thread::yield();
    }
  }

  static void Relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  void Helper(int k) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t generation;
      for (uint32_t spin = 0; (generation = generation_.load(std::memory_order_acquire)) == seen; ++spin) {
        if (spin < kSpins + kYields) {
          Pause(spin);
        } else {
          generation_.wait(seen, std::memory_order_acquire);
        }
      }
      seen = generation;
      if (stop_) return;
      (*job_)(k);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_.notify_one();
    }
  }

  const std::function<void(int)>* job_ = nullptr;  // set before the generation bump that publishes it
  bool stop_ = false;                               // likewise
  std::atomic<uint64_t> generation_{0};             // one more per Run (and at destruction)
  std::atomic<int> busy_{0};                        // helpers still in the current job
  std::vector<std::thread> helpers_;
};

}  // namespace pollen::sim
