#include "crdt/grace_period.h"

#include <thread>

namespace pollen::crdt {

// A thread's stripe comes from the address of a thread-local byte: distinct
// per live thread, free to compute, and no shared state to assign it.
size_t GracePeriod::ThisThreadStripe() {
  static thread_local char marker;
  const uint64_t address = reinterpret_cast<uintptr_t>(&marker);
  return static_cast<size_t>(((address >> 6) * 0x9E3779B97F4A7C15ULL) >> 60) % kStripes;
}

// seq_cst on the phase load, the increment and (by the caller) the pointer
// load, against seq_cst on the writer's exchange, flip and counter loads: if
// the writer's load of this counter comes first in the single total order,
// this reader's later pointer load sees the new pointer; otherwise the writer
// sees the increment and waits for the release decrement.
GracePeriod::Section GracePeriod::Enter() const {
  Stripe& stripe = stripes_[ThisThreadStripe()];
  const uint32_t phase = phase_.load(std::memory_order_seq_cst) & 1;
  std::atomic<uint64_t>* counter = &stripe.readers[phase];
  counter->fetch_add(1, std::memory_order_seq_cst);
  return Section(counter);
}

void GracePeriod::Synchronize() {
  for (int flip = 0; flip < 2; ++flip) {
    const uint32_t old_phase = phase_.fetch_xor(1, std::memory_order_seq_cst) & 1;
    for (Stripe& stripe : stripes_) {
      // Bounded by the longest read section in progress: new sections go to
      // the other counter, so this one only decreases.
      while (stripe.readers[old_phase].load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
    }
  }
}

}  // namespace pollen::crdt
