#include "crdt/word_bits.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace pollen::crdt {

void Canonicalize(std::vector<WordBits>& words) {
  std::sort(words.begin(), words.end(), [](const WordBits& a, const WordBits& b) { return a.index < b.index; });
  size_t out = 0;
  for (const WordBits& w : words) {
    if (w.bits == 0) continue;
    if (out > 0 && words[out - 1].index == w.index) {
      words[out - 1].bits |= w.bits;
    } else {
      words[out++] = w;
    }
  }
  words.resize(out);
}

uint64_t CountBits(std::span<const WordBits> words) {
  uint64_t total = 0;
  for (const WordBits& w : words) total += std::popcount(w.bits);
  return total;
}

std::vector<uint64_t> ToBitPositions(std::span<const WordBits> words) {
  std::vector<uint64_t> positions;
  positions.reserve(CountBits(words));
  for (const WordBits& w : words) {
    uint64_t bits = w.bits;
    while (bits != 0) {
      positions.push_back(w.index * 64 + std::countr_zero(bits));
      bits &= bits - 1;
    }
  }
  return positions;
}

std::vector<WordBits> FromBitPositions(std::span<const uint64_t> positions) {
  std::vector<WordBits> words;
  for (size_t i = 0; i < positions.size(); ++i) {
    assert(i == 0 || positions[i - 1] < positions[i]);
    const uint64_t index = positions[i] / 64;
    const uint64_t bit = uint64_t{1} << (positions[i] % 64);
    if (!words.empty() && words.back().index == index) {
      words.back().bits |= bit;
    } else {
      words.push_back({index, bit});
    }
  }
  return words;
}

}  // namespace pollen::crdt
