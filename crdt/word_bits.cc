#include "crdt/word_bits.h"

#include <algorithm>
#include <bit>
#include <cassert>

#include "crdt/popcount.h"

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
  for (const WordBits& w : words) total += Popcount64(w.bits);
  return total;
}

std::vector<uint64_t> ToBitPositions(std::span<const WordBits> words, uint64_t base_bit) {
  std::vector<uint64_t> positions;
  AppendBitPositions(words, base_bit, &positions);
  return positions;
}

void AppendBitPositions(std::span<const WordBits> words, uint64_t base_bit, std::vector<uint64_t>* out) {
  out->reserve(out->size() + CountBits(words));
  for (const WordBits& w : words) {
    uint64_t bits = w.bits;
    while (bits != 0) {
      const uint64_t pos = w.index * 64 + static_cast<uint64_t>(std::countr_zero(bits));
      assert(pos >= base_bit);
      out->push_back(pos - base_bit);
      bits &= bits - 1;
    }
  }
}

std::vector<WordBits> FromBitPositions(std::span<const uint64_t> positions, uint64_t base_bit) {
  std::vector<WordBits> words;
  words.reserve(std::min<size_t>(positions.size(), 1024));  // one allocation for the usual small set
  for (size_t i = 0; i < positions.size(); ++i) {
    assert(i == 0 || positions[i - 1] < positions[i]);
    const uint64_t index = (base_bit + positions[i]) / 64;
    const uint64_t bit = uint64_t{1} << ((base_bit + positions[i]) % 64);
    if (!words.empty() && words.back().index == index) {
      words.back().bits |= bit;
    } else {
      words.push_back({index, bit});
    }
  }
  return words;
}

}  // namespace pollen::crdt
