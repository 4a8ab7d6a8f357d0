// Delta codec: a compact encoding of a set of bit positions in [0, m).
//
// A batch of b newly set bits in a generation of m bits carries at least
// log2(C(m, b)) bits of information. The codec aims at <= 1.5x that bound for
// 100 <= b <= 100,000 and 2^16 <= m <= 2^33 (tests assert it for random sets;
// bench_protocol reports the ratio; measured on random sets: 1.002 to 1.034
// across m = 2^16..2^33, b = 100..100,000, the worst at b = 100, m = 2^16 where
// the 3-5 header bytes weigh most). The encoder computes the size of every
// mode below and writes the smallest (for sets of at most 64 positions, with
// every Rice parameter; see ChooseRiceK):
//
//   mode 0, empty:   [0]
//   mode 1, rice:    [1] [k u8] [count varint] [bitstream]
//       gaps d_i = p_i - p_{i-1} - 1 (p_{-1} = -1), Golomb-Rice coded with
//       parameter k: q = d >> k as q one-bits and a zero-bit, then the k low
//       bits of d. If q >= kRiceEscape the code is kRiceEscape one-bits then d
//       in W bits (W = bit width of m), so one position never costs more than
//       kRiceEscape + W bits and no unary run is unbounded.
//   mode 2, bitmap:  [2] [lo varint] [len varint] [ceil(len/8) bytes]
//       bit i (LSB first) <=> position lo + i; bits 0 and len-1 are set.
//   mode 3, dense:   [3] [lo varint] [len varint] [k u8] [holes varint] [bitstream]
//       every position of [lo, lo+len) except the holes, which are Rice coded
//       as in mode 1 (gaps from lo); lo and lo+len-1 are never holes.
//
// The bitstream is LSB-first; its padding bits must be zero and nothing may
// follow it. Varints are LEB128, canonical, at most 10 bytes. k is chosen from
// the actual gaps: the cheapest of all for at most 64 gaps, else of a few
// candidates around log2(mean gap).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "crdt/word_bits.h"

namespace pollen::protocol {

inline constexpr uint64_t kMaxUniverseBits = uint64_t{1} << 48;
inline constexpr int kRiceEscape = 32;

// Positions must be strictly ascending and < universe_bits
// (1 <= universe_bits <= kMaxUniverseBits); violations abort.
std::string EncodeBitPositions(uint64_t universe_bits, std::span<const uint64_t> positions);

// Decodes; rejects (InvalidArgument "ERR delta ...", nothing allocated beyond
// `max_positions`) anything malformed: unknown mode, bad parameters,
// truncated, trailing bytes, non-zero padding, out-of-range or non-ascending
// positions, or more than max_positions positions. Work is bounded by the
// input length plus the number of positions returned.
absl::StatusOr<std::vector<uint64_t>> DecodeBitPositions(uint64_t universe_bits, std::string_view bytes,
                                                         size_t max_positions);
// The same into `*out` (cleared first), reusing its capacity. On error *out
// holds no valid result.
absl::Status DecodeBitPositionsInto(uint64_t universe_bits, std::string_view bytes, size_t max_positions,
                                   std::vector<uint64_t>* out);

// Sets held as 64-bit words (bit i of words[j] is position 64 (first_word
// + j) + i): mode 2 written and read straight from the words. Coding
// positions one by one was ~60% of a node's CPU while anti-entropy repaired a
// filter of 10^6 keys (perf, simulation/README.md, "Speed, idle ticks and big
// heals"); this is a copy.
//
// EncodeWordsAsBitmap: mode 2, or mode 0 for no position; the bytes
// EncodeBitPositions writes when it picks the bitmap. The words must lie in
// the universe, bits at or above universe_bits zero (asserted).
std::string EncodeWordsAsBitmap(uint64_t universe_bits, uint64_t first_word, std::span<const uint64_t> words);
// DecodeBitmapToWords: for mode 0 or 2, the words of the set's span into
// *words (words[i] is the universe's word *first_word + i; none for the
// empty set) and its size into *count, and true; for another mode false,
// nothing written (use DecodeBitPositions). Rejects what DecodeBitPositions
// rejects, with its errors; allocates at most input size / 8 + 2 words.
absl::StatusOr<bool> DecodeBitmapToWords(uint64_t universe_bits, std::string_view bytes, size_t max_positions,
                                         std::vector<uint64_t>* words, uint64_t* first_word, uint64_t* count);
// DecodeRiceToWords: for mode 1, the set as canonical words (ascending
// index, none zero) appended to *words (what it held before stays, and is
// never folded into), position p being bit base_bit + p of the words'
// universe, its size into *count, and true; for another mode false, nothing
// written. Rejects what DecodeBitPositions rejects, with its errors (what it
// appended is then unspecified); appends at most one word per position.
// Appending lets a caller decode many sets into one buffer it keeps: a fresh
// vector per range (grown by doubling, its pages faulted in each time) was a
// quarter of a joining node's CPU, most of it in page faults.
// No positions vector: writing the positions and then folding them into
// words (FromBitPositions) was ~10% of pollend's CPU while it repaired a
// healed partition under overload (perf).
absl::StatusOr<bool> DecodeRiceToWords(uint64_t universe_bits, std::string_view bytes, size_t max_positions,
                                       uint64_t base_bit, std::vector<crdt::WordBits>* words, uint64_t* count);

// log2(C(m, b)), in bits (0 for b == 0 or b == m). Requires b <= m.
double EntropyBoundBits(uint64_t m, uint64_t b);

}  // namespace pollen::protocol
