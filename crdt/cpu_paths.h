// Whether crdt may take its CPU-specific paths: the AVX-512 probe and batch
// SipHash, the CRC-32C instruction, the popcnt instruction. Each has a
// portable twin that computes the same answer, and tests compare them.
//
// POLLEN_PORTABLE=1 in the environment turns every one of them off for the
// whole process, so that CI runs the tests on the portable paths as well on a
// CPU that has the others (tests/crdt: the *_portable tests). Read once, at
// first use; any other value, or none, leaves the paths to the CPU.
#pragma once

namespace pollen::crdt {

bool CpuPathsAllowed();

}  // namespace pollen::crdt
