// WordBits: the unit of replication. A set of bits of one generation is a list of
// (word index, bit mask) pairs; merging it ORs each mask into its word. Deltas
// from Add, merge results and anti-entropy range transfers all use this form.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pollen::crdt {

struct WordBits {
  uint64_t index = 0;  // word index in [0, blocks * 8)
  uint64_t bits = 0;   // non-zero in any canonical list
  friend bool operator==(const WordBits&, const WordBits&) = default;
};

// Sorts by index, ORs together entries of the same word and drops zero masks.
void Canonicalize(std::vector<WordBits>& words);

// Total number of set bits over all masks.
uint64_t CountBits(std::span<const WordBits> words);

// Bit positions (index * 64 + bit - base_bit) of a canonical list, ascending.
// Every set bit must lie at or above base_bit.
std::vector<uint64_t> ToBitPositions(std::span<const WordBits> words, uint64_t base_bit = 0);
// The same, appended to *out.
void AppendBitPositions(std::span<const WordBits> words, uint64_t base_bit, std::vector<uint64_t>* out);

// The inverse of ToBitPositions; positions must be ascending and distinct.
std::vector<WordBits> FromBitPositions(std::span<const uint64_t> positions, uint64_t base_bit = 0);

}  // namespace pollen::crdt
