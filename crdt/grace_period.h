// GracePeriod: read sections that take no lock and never wait, and a writer
// that waits until every read section that began before it has ended (the
// scheme of Linux's SRCU, reduced to what GenerationSet needs).
//
// Use, for an immutable object replaced rarely through an atomic pointer:
//   reader:  GracePeriod::Section s = grace.Enter();
//            const T* p = ptr.load(std::memory_order_seq_cst);  ... use *p ...
//   writer:  const T* old = ptr.exchange(fresh, std::memory_order_seq_cst);
//            grace.Synchronize();  delete old;
//
// Promise: Synchronize() returns only after every Section entered before it
// was called has been destroyed, so no reader still holds `old`. Writers must
// be serialized by the caller. A Section costs two atomic read-modify-writes
// on a counter shared only with threads that hash to the same one of
// kStripes cache lines (a std::shared_mutex's reader count is one line that
// every reader thread writes, and its readers wait for a writer).
//
// Why two counters per stripe: Synchronize() moves new readers to the other
// counter, so the one it waits on only drains; it does this twice, because a
// reader that read the phase just before the previous writer's flip may still
// sit in the other counter holding that writer's new (now old) object.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace pollen::crdt {

class GracePeriod {
 public:
  static constexpr size_t kStripes = 16;

  class Section {
   public:
    ~Section() { counter_->fetch_sub(1, std::memory_order_release); }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;

   private:
    friend class GracePeriod;
    explicit Section(std::atomic<uint64_t>* counter) : counter_(counter) {}
    std::atomic<uint64_t>* counter_;
  };

  GracePeriod() = default;
  GracePeriod(const GracePeriod&) = delete;
  GracePeriod& operator=(const GracePeriod&) = delete;

  // Any thread, any time; never blocks. Load the protected pointer after this.
  Section Enter() const;

  // Waits (yielding) until every Section entered before this call has ended.
  // Callers serialize writers. Must not be called from inside a Section of the
  // same GracePeriod (it would wait for itself).
  void Synchronize();

 private:
  struct alignas(64) Stripe {
    std::atomic<uint64_t> readers[2] = {0, 0};
  };
  static size_t ThisThreadStripe();

  mutable std::array<Stripe, kStripes> stripes_;
  std::atomic<uint32_t> phase_{0};
};

}  // namespace pollen::crdt
