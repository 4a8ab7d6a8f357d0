// Delta codec: a compact encoding of a set of bit positions in [0, m).
//
// A batch of b newly set bits in a generation of m bits carries at least
// log2(C(m, b)) bits of information. The codec aims at <= 1.5x that bound for
// 100 <= b <= 100,000 (see delta_codec.cc for the scheme and measured ratios).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pollen::protocol {

// Positions must be strictly ascending and < universe_bits.
std::string EncodeBitPositions(uint64_t universe_bits, std::span<const uint64_t> positions);

// Decodes; rejects (InvalidArgument, nothing allocated beyond `max_positions`)
// anything malformed: truncated, trailing bytes, out-of-range or non-ascending
// positions, or more than max_positions.
absl::StatusOr<std::vector<uint64_t>> DecodeBitPositions(uint64_t universe_bits, std::string_view bytes,
                                                         size_t max_positions);

// log2(C(m, b)), in bits.
double EntropyBoundBits(uint64_t m, uint64_t b);

}  // namespace pollen::protocol
