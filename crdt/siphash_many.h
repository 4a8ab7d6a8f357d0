// SipHash-2-4 of many keys under one key: out[i] = hasher(keys[i]), bit for
// bit (tests/crdt/siphash_many_test.cc checks every length 0..300 and mixed
// batches against SipHasher).
//
// Why: SipHash is most of a filter probe's cost, and one hash is a chain of
// ~140 dependent-ish ALU operations that no reordering can shorten. Where the
// CPU has AVX-512F, eight keys go through the rounds at once, one per 64-bit
// lane, so a batch pays roughly one eighth of the rounds per key. Measured on
// this machine (bench/crdt/ratios.py: BM_SipHashMany against BM_SipHash, same
// run): 7.7 ns per 16-byte key against 17.6 ns for one call, 13.7 against 39.7
// for 64-byte keys. Elsewhere, and for the last keys of a batch that do not
// fill 8 lanes, it is the scalar SipHasher.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "crdt/siphash.h"

namespace pollen::crdt {

// `out` has the same length as `keys`.
void SipHashMany(const SipHasher& hasher, std::span<const std::string_view> keys, std::span<uint64_t> out);

}  // namespace pollen::crdt
