// FastNanos(): a monotonic clock in nanoseconds that is cheap to read, for
// timing every RESP command (command_stats.h).
//
// Why not steady_clock: clock_gettime through the vDSO costs 21 ns on the CI
// machine and rdtsc 9 ns, while a pipelined BF.EXISTS costs the server about
// 700 ns of CPU: a clock_gettime per command is 3% of it, rdtsc 1.3%.
//
// On x86-64 with an invariant TSC (CPUID 0x80000007 EDX bit 8: a constant
// rate that does not stop in idle states) that the kernel uses as its own
// clocksource (it checks that the cores' TSCs agree before it does),
// FastNanos() is the TSC scaled by a rate measured against steady_clock once
// per process; anywhere else it is steady_clock. Callers still clamp a
// negative difference to 0.
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
