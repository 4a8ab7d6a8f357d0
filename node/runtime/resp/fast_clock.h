// FastNanos(): a monotonic clock in nanoseconds that is cheap to read, for
// timing every RESP command (command_stats.h).
//
// Why not steady_clock: clock_gettime through the vDSO costs 21 ns on the CI
// machine and rdtsc 9 ns, while a pipelined BF.EXISTS costs the server about
// 700 ns of CPU: a clock_gettime per command is 3% of it, rdtsc 1.3%.
//
// On x86-64 with an invariant TSC (CPUID 0x80000007 EDX bit 8: a constant
// rate that does not stop in idle states) FastNanos() is the TSC scaled by a
// rate measured against steady_clock once per process; anywhere else it is
// steady_clock. Either way it never goes backwards on one thread; across
// threads it is as good as the TSC's synchronisation (the kernel checks it
// before it picks the TSC as its own clocksource).
#pragma once

#include <cstdint>

namespace pollen::resp {

// Any thread. The first call measures the TSC's rate (about 5 ms); call
// CalibrateFastClock() at start-up so that no command pays for it.
uint64_t FastNanos();
void CalibrateFastClock();

// Whether FastNanos() reads the TSC (else steady_clock); for tests and logs.
bool FastClockUsesTsc();

}  // namespace pollen::resp
