// Fuzzes DecodeBitPositions, DecodeBitmapToWords (which must agree on
// modes 0 and 2) and DecodeRiceToWords (on mode 1). The first byte picks the universe size and the
// cap; the rest is the encoding, optionally first overlaid on a valid
// encoding so the mutations reach deep into each mode. Anything decoded must
// be strictly ascending, inside the universe, within the cap, and must
// re-encode to something that decodes to the same set.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "protocol/delta_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pollen::protocol;
  if (size == 0) return 0;
  static const uint64_t kUniverses[] = {1, 2, 7, 64, 1000, 1 << 16, uint64_t{1} << 26, uint64_t{1} << 33,
                                        kMaxUniverseBits};
  const uint8_t ctl = data[0];
  const uint64_t m = kUniverses[ctl % 9];
  const size_t cap = (ctl & 0x10) ? 16 : 100000;
  std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  if (ctl & 0x20) {
    // Overlay the input on a valid encoding of a small set in each mode.
    std::vector<uint64_t> pos;
    const int shape = (ctl >> 6) & 3;
    const uint64_t n = std::min<uint64_t>(m, 200);
    for (uint64_t i = 0; i < n; ++i) {
      const bool take = shape == 0 ? i % 17 == 3 : shape == 1 ? i % 2 == 0 : shape == 2 ? i % 23 != 5 : i < 3;
      if (take) pos.push_back(shape == 0 ? i * (m / n) : i);
    }
    std::string base = EncodeBitPositions(m, pos);
    // A few byte edits (1..4 pairs of position, xor mask), rarely a cut or an extra byte.
    const size_t edits = input.empty() ? 0 : 1 + static_cast<uint8_t>(input[0]) % 4;
    for (size_t e = 0, i = 1; e < edits && i + 1 < input.size(); ++e, i += 2) {
      base[static_cast<uint8_t>(input[i]) % base.size()] ^= input[i + 1];
    }
    if (input.size() % 7 == 1) base.resize(base.size() - 1);
    if (input.size() % 11 == 2) base.push_back(input.empty() ? 0 : input[0]);
    input = base;
  }
  auto decoded = DecodeBitPositions(m, input, cap);
  // The word decoder (modes 0 and 2) accepts exactly the same inputs, as the same set.
  std::vector<uint64_t> words;
  uint64_t first = 0, count = 0;
  auto as_words = DecodeBitmapToWords(m, input, cap, &words, &first, &count);
  if (!as_words.ok() || *as_words) {
    if (as_words.ok() != decoded.ok()) std::abort();
    if (as_words.ok()) {
      if (count != decoded->size() || words.size() > input.size() / 8 + 2) std::abort();
      for (uint64_t p : *decoded) {
        if (p / 64 < first || p / 64 - first >= words.size()) std::abort();
        if (((words[p / 64 - first] >> (p % 64)) & 1) == 0) std::abort();
      }
      uint64_t bits = 0;
      for (uint64_t w : words) bits += static_cast<uint64_t>(__builtin_popcountll(w));
      if (bits != count) std::abort();
      auto again = DecodeBitPositions(m, EncodeWordsAsBitmap(m, first, words), cap);
      if (!again.ok() || *again != *decoded) std::abort();
    }
  }
  // The Rice word decoder (mode 1) too, at an offset of 64 bits.
  std::vector<pollen::crdt::WordBits> rice_words;
  auto as_rice = DecodeRiceToWords(m, input, cap, 64, &rice_words, &count);
  if (!as_rice.ok() || *as_rice) {
    if (as_rice.ok() != decoded.ok()) std::abort();
    if (!as_rice.ok() && as_rice.status() != decoded.status()) std::abort();
    if (as_rice.ok() && (count != decoded->size() || rice_words != pollen::crdt::FromBitPositions(*decoded, 64))) {
      std::abort();
    }
  }
  if (!decoded.ok()) return 0;
  if (decoded->size() > cap) std::abort();
  for (size_t i = 0; i < decoded->size(); ++i) {
    if ((*decoded)[i] >= m) std::abort();
    if (i > 0 && (*decoded)[i - 1] >= (*decoded)[i]) std::abort();
  }
  auto again = DecodeBitPositions(m, EncodeBitPositions(m, *decoded), cap);
  if (!again.ok() || *again != *decoded) std::abort();
  return 0;
}
