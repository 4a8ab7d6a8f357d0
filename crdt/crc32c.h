// CRC-32C (Castagnoli): the checksum of snapshot files (format v3), delta
// files, the add log and the tombstone file.
//
// Speed is why it is here: a restart verifies every snapshot byte before it
// loads any, and BLAKE2b (libsodium, formats v1 and v2) verified 4 GiB in
// about 4.2 s on this EPYC, a fifth of a 20 s restart (perf, 2026-12-05).
// The SSE4.2 crc32 instruction (or ARMv8's CRC extension) does the same
// bytes in about 0.5 s; other CPUs take a table, 4 bytes per step.
//
// What a 32-bit CRC detects: every error burst of up to 32 bits and every
// odd number of flipped bits, in a message of any length; other random
// damage passes with probability 2^-32. Snapshot files are written by their
// own node (the checksum guards against torn and damaged files, not an
// attacker), so that is the bound wanted.
#pragma once

#include <cstdint>
#include <string_view>

namespace pollen::crdt {

// CRC-32C of `data`, continuing from `crc` (0 to start):
// Crc32c(b, Crc32c(a)) == Crc32c(a + b).
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// The portable path alone (tables), whatever the CPU: for tests that compare
// the two and for runs with the vector paths forced off.
uint32_t Crc32cPortable(std::string_view data, uint32_t crc = 0);

// Whether Crc32c uses an instruction (SSE4.2 or ARMv8 CRC) on this CPU.
bool Crc32cAccelerated();

}  // namespace pollen::crdt
