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
  // Sized first and written through a pointer, two positions a step, so
  // that a word of one or two set bits (most of them below ~3% fill) runs
  // the inner loop once: the loop ending on a data-dependent count was a
  // mispredicted branch per word, and push_back's checks per bit doubled
  // the cost (bench_protocol BM_RangeRiceEncode). A step may write one
  // position past the word's last; the next word's overwrites it, and the
  // room has one spare slot for the last word's.
  const size_t start = out->size();
  const uint64_t count = CountBits(words);
  out->resize(start + count + 1);
  uint64_t* at = out->data() + start;
  for (const WordBits& w : words) {
    assert(w.index * 64 + static_cast<uint64_t>(std::countr_zero(w.bits | (uint64_t{1} << 63))) >= base_bit);
    const uint64_t first = w.index * 64 - base_bit;
    uint64_t bits = w.bits;
    uint64_t* const end = at + Popcount64(bits);
    while (at < end) {
      at[0] = first + static_cast<uint64_t>(std::countr_zero(bits));
      bits &= bits - 1;
      at[1] = first + static_cast<uint64_t>(std::countr_zero(bits | (uint64_t{1} << 63)));
      bits &= bits - 1;
      at += 2;
    }
    at = end;
  }
  out->resize(start + count);
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
