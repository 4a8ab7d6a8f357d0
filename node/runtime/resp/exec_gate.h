// ExecGate: makes an EXEC atomic with respect to every other client's commands
// when several RESP threads serve clients.
//
// Each RESP thread holds the gate's shared side while it executes a batch of
// requests (one readiness event's worth, at most max_batch_replies), on its own
// cache-line stripe, so the common path costs one uncontended atomic add and
// one load per batch. EXEC takes the exclusive side: it closes the gate, waits
// until no other thread is inside a batch, runs the queued commands, and opens
// the gate again. Threads that arrive while the gate is closed wait for it to
// open (an atomic wait). With one RESP thread the gate never waits: the event
// loop already runs one client's batch at a time.
//
// Stripes are per RESP thread (loop index modulo kStripes); two threads that
// share a stripe are still correct, the counts only add up.
#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace pollen::resp {

class ExecGate {
 public:
  static constexpr size_t kStripes = 64;

  // Shared side, around a batch of requests on RESP thread `stripe`.
  void EnterShared(size_t stripe) {
    std::atomic<uint64_t>& count = counts_[stripe % kStripes].value;
    for (;;) {
      // seq_cst on both sides (here and in RunExclusive): a Dekker handshake,
      // so either EXEC sees this count or this thread sees the gate closed.
      count.fetch_add(1, std::memory_order_seq_cst);
      if (!closed_.load(std::memory_order_seq_cst)) return;
      count.fetch_sub(1, std::memory_order_seq_cst);
      closed_.wait(true, std::memory_order_seq_cst);
    }
  }
  void ExitShared(size_t stripe) {
    [[maybe_unused]] const uint64_t was = counts_[stripe % kStripes].value.fetch_sub(1, std::memory_order_seq_cst);
    assert(was > 0);
  }

  // The shared side for the life of a scope.
  class SharedScope {
   public:
    SharedScope(ExecGate& gate, size_t stripe) : gate_(gate), stripe_(stripe) { gate_.EnterShared(stripe_); }
    ~SharedScope() { gate_.ExitShared(stripe_); }
    SharedScope(const SharedScope&) = delete;
    SharedScope& operator=(const SharedScope&) = delete;

   private:
    ExecGate& gate_;
    size_t stripe_;
  };

  // Runs fn with no other thread inside a batch. Called from inside the shared
  // side of `stripe` (the EXEC's own batch), or with stripe < 0 from a caller
  // that holds no shared side (tests, tools). One EXEC at a time.
  template <typename F>
  void RunExclusive(int stripe, F&& fn) {
    // Leave our own shared side first: another EXEC waiting for our stripe
    // to drain must not wait for us while we wait for its mutex.
    if (stripe >= 0) ExitShared(static_cast<size_t>(stripe));
    {
      std::lock_guard lock(exclusive_mu_);
      closed_.store(true, std::memory_order_seq_cst);
      for (const Stripe& s : counts_) {
        // Bounded by the other threads' current batches (each at most
        // max_batch_replies commands).
        while (s.value.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
      }
      fn();
      closed_.store(false, std::memory_order_seq_cst);
      closed_.notify_all();
    }
    if (stripe >= 0) EnterShared(static_cast<size_t>(stripe));
  }

 private:
  struct alignas(64) Stripe {
    std::atomic<uint64_t> value{0};
  };
  std::array<Stripe, kStripes> counts_{};
  std::atomic<bool> closed_{false};
  std::mutex exclusive_mu_;
};

}  // namespace pollen::resp
