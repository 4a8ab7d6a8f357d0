#include "node/runtime/resp/fast_clock.h"

#include <cassert>
#include <chrono>
#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace pollen::resp {
namespace {

uint64_t SteadyNanos() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// ns = base_ns + (ticks - base_ticks) * mult >> 32 (fixed point: exact
// enough at any uptime, unlike a double once the product passes 2^53).
struct TscRate {
  bool use_tsc = false;
  uint64_t base_ticks = 0;
  uint64_t base_ns = 0;
  uint64_t mult = 0;  // nanoseconds per tick, times 2^32
};

#if defined(__x86_64__)
__extension__ typedef unsigned __int128 Uint128;  // GCC and clang; -Wpedantic knows it as an extension

// The kernel picks the TSC as its clocksource only once it has checked that
// every core's TSC agrees; without that, a thread that moves between cores
// could read time going backwards.
bool KernelUsesTsc() {
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return f >> source && source == "tsc";
}

bool HasInvariantTsc() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) == 0 || a < 0x80000007) return false;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d) == 0) return false;
  return (d >> 8) & 1;
}

// One (ticks, ns) pair read close together: retried (boundedly) while a
// preemption between the reads would skew it by more than 2 us.
bool ReadPair(uint64_t* ticks, uint64_t* ns) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t before = __rdtsc();
    const uint64_t steady = SteadyNanos();
    const uint64_t after = __rdtsc();
    if (after > before && after - before < 10'000) {  // 10k ticks: 2-5 us at 2-5 GHz
      *ticks = before + (after - before) / 2;
      *ns = steady;
      return true;
    }
  }
  return false;
}

TscRate Measure() {
  TscRate r;
  if (!HasInvariantTsc() || !KernelUsesTsc()) return r;
  uint64_t t0 = 0, n0 = 0, t1 = 0, n1 = 0;
  if (!ReadPair(&t0, &n0)) return r;
  // 5 ms: the pairs' 2 us uncertainty is then under 0.1% of the rate.
  while (SteadyNanos() < n0 + 5'000'000) {
  }
  if (!ReadPair(&t1, &n1) || t1 <= t0 || n1 <= n0) return r;
  const Uint128 mult = (static_cast<Uint128>(n1 - n0) << 32) / (t1 - t0);
  if (mult == 0 || mult > (static_cast<Uint128>(1000) << 32)) return r;  // under 1 MHz: not a TSC
  r.use_tsc = true;
  r.base_ticks = t1;
  r.base_ns = n1;
  r.mult = static_cast<uint64_t>(mult);
  return r;
}
#else
TscRate Measure() { return TscRate{}; }
#endif

const TscRate& Rate() {
  static const TscRate rate = Measure();  // thread-safe initialisation
  return rate;
}

}  // namespace

uint64_t FastNanos() {
  const TscRate& r = Rate();
#if defined(__x86_64__)
  if (r.use_tsc) {
    // Before base_ticks (another core a little behind): clamp to base.
    const uint64_t ticks = __rdtsc();
    const uint64_t delta = ticks > r.base_ticks ? ticks - r.base_ticks : 0;
    return r.base_ns + static_cast<uint64_t>((static_cast<Uint128>(delta) * r.mult) >> 32);
  }
#endif
  return SteadyNanos();
}

void CalibrateFastClock() { (void)Rate(); }

bool FastClockUsesTsc() { return Rate().use_tsc; }

}  // namespace pollen::resp
