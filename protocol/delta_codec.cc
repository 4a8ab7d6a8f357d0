#include "protocol/delta_codec.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "crdt/popcount.h"

namespace pollen::protocol {
namespace {

enum Mode : uint8_t { kEmpty = 0, kRice = 1, kBitmap = 2, kDense = 3 };

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "pollen delta codec: invariant violated: %s\n", what);
    std::abort();
  }
}

absl::Status Bad(std::string_view what) {
  std::string message = "ERR delta ";
  message.append(what);
  return absl::InvalidArgumentError(message);
}

// Bit width of the escape payload: enough for any gap below m.
int EscapeWidth(uint64_t universe_bits) { return std::max(1, static_cast<int>(std::bit_width(universe_bits))); }

// ------------------------------------------------------------------ varints

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Canonical LEB128, at most 10 bytes, no overflow.
bool GetVarint(std::string_view* in, uint64_t* v) {
  uint64_t result = 0;
  for (int i = 0; i < 10; ++i) {
    if (in->empty()) return false;
    const auto byte = static_cast<uint8_t>((*in)[0]);
    in->remove_prefix(1);
    if (i == 9 && byte > 1) return false;  // would overflow 64 bits
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      if (byte == 0 && i > 0) return false;  // non-canonical trailing zero group
      *v = result;
      return true;
    }
  }
  return false;
}

// ------------------------------------------------------------------ bit I/O

class BitReader {
 public:
  explicit BitReader(std::string_view bytes)
      : data_(reinterpret_cast<const uint8_t*>(bytes.data())), size_(bytes.size()), total_bits_(8 * bytes.size()) {}

  uint64_t remaining_bits() const { return total_bits_ - pos_; }
  uint64_t position() const { return pos_; }

  // Counts one-bits up to `max` (<= 56). Sets *q; returns false if the stream
  // ends before a zero-bit or `max` ones.
  bool ReadUnary(int max, int* q) {
    const uint64_t w = Peek();
    const int ones = std::countr_one(w);
    if (ones >= max) {
      if (remaining_bits() < static_cast<uint64_t>(max)) return false;
      pos_ += max;
      *q = max;
      return true;
    }
    if (remaining_bits() < static_cast<uint64_t>(ones) + 1) return false;
    pos_ += ones + 1;
    *q = ones;
    return true;
  }

  // Reads `bits` (<= 56) bits; false if fewer remain.
  bool Read(int bits, uint64_t* v) {
    if (remaining_bits() < static_cast<uint64_t>(bits)) return false;
    *v = bits == 0 ? 0 : Peek() & ((uint64_t{1} << bits) - 1);
    pos_ += bits;
    return true;
  }

  // At least 57 valid bits from the current position, zeros past the end.
  uint64_t Peek57() const { return Peek(); }
  // Moves past `bits` bits; the caller checked remaining_bits() >= bits.
  void Skip(uint64_t bits) { pos_ += bits; }

  // True if the stream ends within the current byte and the rest of it is zero.
  bool AtCleanEnd() const {
    if ((pos_ + 7) / 8 != size_) return false;
    if (pos_ % 8 == 0) return true;
    return (data_[size_ - 1] >> (pos_ % 8)) == 0;
  }

 private:
  // At least 57 bits from pos_, zeros past the end.
  uint64_t Peek() const {
    const size_t byte = pos_ / 8;
    uint64_t w = 0;
    if (byte + 8 <= size_) {
      std::memcpy(&w, data_ + byte, 8);
      if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    } else {
      for (size_t i = byte; i < size_; ++i) w |= static_cast<uint64_t>(data_[i]) << (8 * (i - byte));
    }
    return w >> (pos_ % 8);
  }

  const uint8_t* data_;
  size_t size_;
  uint64_t total_bits_;
  uint64_t pos_ = 0;
};

// ------------------------------------------------------------------ Rice

// Costs of Rice parameters k0 .. k0+n-1 (n <= 5) in one pass over the gaps.
void RiceCostBits(std::span<const uint64_t> gaps, int k0, int n, int width, uint64_t* costs) {
  uint64_t c[5] = {0, 0, 0, 0, 0};
  const uint64_t escape = static_cast<uint64_t>(kRiceEscape) + static_cast<uint64_t>(width);
  for (uint64_t d : gaps) {
    for (int j = 0; j < 5; ++j) {
      const int k = std::min(k0 + j, 63);
      const uint64_t q = d >> k;
      c[j] += q < static_cast<uint64_t>(kRiceEscape) ? q + 1 + static_cast<uint64_t>(k) : escape;
    }
  }
  for (int j = 0; j < n; ++j) costs[j] = c[j];
}

// At most this many gaps: every k from 0 to the escape width is costed, not
// just the few around the mean. A small set's mean says little about its
// gaps: a tree push of one key in a blocked filter is one long gap to the
// key's block and six short ones inside it, and the candidates around the
// mean (k = 12..16 for m ~ 2^20) cost the short gaps 13-17 bits each where
// k = 6 costs ~8. pollen-sim N=100, 20 adds/s: the positions of a push came to
// 26.4 bytes on average with the candidates, 23.4 with every k (the set
// sizes there: 6 to ~40). Costing every k for 64 gaps is ~10 passes of 64.
constexpr size_t kEveryKUpTo = 64;

// Past this many gaps, the candidates are costed on an even sample of them
// (kSampledGaps), and only the winner over all: costing five candidates over
// every gap was a third of the encoder's time on a big filter's range
// (125,000 positions; bench_protocol BM_RangeRiceEncode). The sample picks
// the best k, or one whose total differs from the best by the sampling
// error (a fraction of a percent at 4,096 random gaps; the entropy ratio
// test checks the sizes).
constexpr size_t kSampledGaps = 4096;

// Cheapest k: among every k for a small set, else among a few candidates
// around log2(ln 2 * mean gap); *cost_bits is its exact cost over all gaps.
int ChooseRiceK(std::span<const uint64_t> gaps, int width, uint64_t* cost_bits) {
  int lo = 0, hi = width;
  std::span<const uint64_t> costed = gaps;
  thread_local std::vector<uint64_t> sample;
  if (gaps.size() > kEveryKUpTo) {
    // The gaps of ascending positions below 2^48 sum below 2^48: a 64-bit
    // sum is exact, as the long double sum it replaces was.
    uint64_t sum = 0;
    for (uint64_t d : gaps) sum += d;
    const long double mean = static_cast<long double>(sum) / gaps.size();
    const int guess = mean * 0.69314718L < 1 ? 0 : static_cast<int>(std::log2(mean * 0.69314718L));
    lo = std::max(0, guess - 2);
    hi = std::min(width, guess + 2);
    if (gaps.size() > kSampledGaps) {
      sample.resize(kSampledGaps);
      for (size_t i = 0; i < kSampledGaps; ++i) sample[i] = gaps[i * gaps.size() / kSampledGaps];
      costed = sample;
    }
  }
  int best_k = 0;
  uint64_t best = UINT64_MAX;
  for (int k0 = lo; k0 <= hi; k0 += 5) {
    const int n = std::min(5, hi - k0 + 1);
    uint64_t costs[5] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    RiceCostBits(costed, k0, n, width, costs);
    for (int j = 0; j < n; ++j) {
      if (costs[j] < best) {
        best = costs[j];
        best_k = k0 + j;
      }
    }
  }
  if (costed.size() != gaps.size()) RiceCostBits(gaps, best_k, 1, width, &best);
  *cost_bits = best;
  return best_k;
}

// Appends the codes of `gaps` with parameter k: exactly `bits` bits (their
// cost, from ChooseRiceK) and zero padding to a whole byte. The bit buffer
// lives in registers and goes out 32 bits at a time into room sized from
// `bits` up front: a bit writer object whose members stayed in memory, and
// its append checks, were 40% of the encoder's time (bench_protocol BM_RangeRiceEncode).
void RiceWrite(std::span<const uint64_t> gaps, int k, int width, uint64_t bits, std::string* out) {
  const size_t start = out->size();
  const size_t bytes = static_cast<size_t>((bits + 7) / 8);
  out->resize(start + bytes + 8);  // a whole 4-byte store may pass the end
  char* at = out->data() + start;
  uint64_t acc = 0;
  int filled = 0;  // < 32 between puts
  const auto put = [&](uint64_t v, int n) {  // the low n <= 32 bits of v, LSB first
    acc |= v << filled;
    filled += n;
    if (filled >= 32) {
      const uint32_t low = static_cast<uint32_t>(acc);
      for (int b = 0; b < 4; ++b) at[b] = static_cast<char>(low >> (8 * b));
      at += 4;
      acc >>= 32;
      filled -= 32;
    }
  };
  const auto put_wide = [&](uint64_t v, int n) {  // the low n <= 64 bits of v (no bit above them set)
    if (n > 32) {
      put(v & 0xffffffffu, 32);
      put(v >> 32, n - 32);
    } else {
      put(v, n);
    }
  };
  const uint64_t low_mask = (uint64_t{1} << k) - 1;  // k <= width <= 49
  for (uint64_t d : gaps) {
    const uint64_t q = d >> k;
    if (q + 1 + static_cast<uint64_t>(k) <= 32) {  // the usual code, in one put
      put(((uint64_t{1} << q) - 1) | (d & low_mask) << (q + 1), static_cast<int>(q) + 1 + k);
    } else if (q < static_cast<uint64_t>(kRiceEscape)) {
      put((uint64_t{1} << q) - 1, static_cast<int>(q) + 1);  // q ones, then a zero
      put_wide(d & low_mask, k);
    } else {
      put((uint64_t{1} << kRiceEscape) - 1, kRiceEscape);
      put_wide(d, width);
    }
  }
  for (; filled > 0; filled -= std::min(filled, 8)) {
    *at++ = static_cast<char>(acc & 0xff);
    acc >>= 8;
  }
  Check(at == out->data() + start + bytes, "rice bits as costed");
  out->resize(start + bytes);
}

// The general case: an escape, or a code longer than one peek.
__attribute__((noinline)) bool RiceReadSlow(BitReader* r, int k, int width, uint64_t* d) {
  int q = 0;
  if (!r->ReadUnary(kRiceEscape, &q)) return false;
  if (q == kRiceEscape) return r->Read(width, d);
  uint64_t low = 0;
  if (!r->Read(k, &low)) return false;
  *d = (static_cast<uint64_t>(q) << k) | low;
  return true;
}

// Inlined into the decode loops (per item, an out-of-line call was 4% of
// pollen-sim N=100). Fast path: the unary run, its stop bit and the k low
// bits all lie in one 57-bit peek. Same results as RiceReadSlow's two-step
// reads: either step running out of bits means fewer than q + 1 + k remain.
inline __attribute__((always_inline)) bool RiceRead(BitReader* r, int k, int width, uint64_t* d) {
  const uint64_t w = r->Peek57();
  const int ones = std::countr_one(w);
  if (ones < kRiceEscape && ones + 1 + k <= 57) {
    const uint64_t need = static_cast<uint64_t>(ones) + 1 + static_cast<uint64_t>(k);
    if (r->remaining_bits() < need) return false;
    const uint64_t low = k == 0 ? 0 : (w >> (ones + 1)) & ((uint64_t{1} << k) - 1);
    *d = (static_cast<uint64_t>(ones) << k) | low;
    r->Skip(need);
    return true;
  }
  return RiceReadSlow(r, k, width, d);
}

// ------------------------------------------------------------------ decode helpers

// Reads k and a count of Rice-coded items from the header and checks that the
// bitstream can hold them (each item takes at least k+1 bits).
absl::Status ReadRiceHeader(std::string_view* in, int width, uint64_t* k, uint64_t* count) {
  if (in->empty()) return Bad("truncated header");
  *k = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  if (*k > static_cast<uint64_t>(width)) return Bad(absl::StrCat("rice parameter ", *k, " out of range"));
  if (!GetVarint(in, count)) return Bad("bad count varint");
  const uint64_t bits = 8 * static_cast<uint64_t>(in->size());
  if (*count > bits / (*k + 1)) return Bad("count exceeds the bitstream");
  return absl::OkStatus();
}

// Mode 1 after its mode byte, checked: `start(count)` once the header is,
// then `take(position)` for each position, ascending. Inlined into both
// decoders (positions, or words).
template <typename Start, typename Take>
absl::Status ForEachRicePosition(uint64_t m, std::string_view in, size_t max_positions, Start start, Take take) {
  const int width = EscapeWidth(m);
  uint64_t k = 0, count = 0;
  if (absl::Status s = ReadRiceHeader(&in, width, &k, &count); !s.ok()) return s;
  if (count == 0) return Bad("empty rice set (use mode 0)");
  if (count > max_positions) return Bad(absl::StrCat("count ", count, " exceeds max ", max_positions));
  start(count);
  BitReader r(in);
  uint64_t next = 0;  // smallest allowed position
  const int kk = static_cast<int>(k);
  const uint64_t low_mask = (uint64_t{1} << kk) - 1;  // k <= width <= 48
  uint64_t i = 0;
  // Position i: d after the last one, checked against the universe.
  const auto accept = [&](uint64_t d) {
    if (d >= m - next) return false;
    take(next + d);
    next += d + 1;
    ++i;
    return true;
  };
  while (i < count) {
    // Every code that lies whole in one 57-bit peek, without reloading: at
    // ~7 bits a code (a big filter's range at 1.5% fill, k = 5) that is 7
    // codes a load, and the loop's dependency chain is countr_one, a shift,
    // countr_one. Decoding positions went from 163 to 245 M/s with it
    // (bench_protocol BM_DeltaDecode/100000; before, one peek per code:
    // RiceRead). Bits past the end are never taken: `avail` stops at the
    // stream's end, and a code that does not fit goes to RiceRead, which
    // reports the truncation.
    uint64_t w = r.Peek57();
    const int avail = static_cast<int>(std::min<uint64_t>(57, r.remaining_bits()));
    int used = 0;
    while (i < count) {
      const int ones = std::countr_one(w);
      const int need = ones + 1 + kk;
      if (ones >= kRiceEscape || used + need > avail) break;
      const uint64_t d = (static_cast<uint64_t>(ones) << kk) | ((w >> (ones + 1)) & low_mask);
      if (!accept(d)) return Bad("position out of range");
      used += need;
      w >>= need;  // need <= 57
    }
    r.Skip(static_cast<uint64_t>(used));
    if (used > 0 || i == count) continue;
    // An escape, a code longer than what is left of a peek, or the end.
    uint64_t d = 0;
    if (!RiceRead(&r, kk, width, &d)) return Bad("truncated bitstream");
    if (!accept(d)) return Bad("position out of range");
  }
  if (!r.AtCleanEnd()) return Bad("trailing bytes or non-zero padding");
  return absl::OkStatus();
}

absl::Status DecodeRice(uint64_t m, std::string_view in, size_t max_positions, std::vector<uint64_t>& out) {
  return ForEachRicePosition(
      m, in, max_positions,
      [&](uint64_t count) {
        out.clear();
        out.reserve(count);
      },
      [&](uint64_t position) { out.push_back(position); });
}

// Mode 2's header and bits, checked: on success `in` holds the bitmap bytes.
absl::Status CheckBitmap(uint64_t m, std::string_view& in, size_t max_positions, uint64_t* lo, uint64_t* len,
                         uint64_t* count) {
  if (!GetVarint(&in, lo) || !GetVarint(&in, len)) return Bad("bad span varint");
  if (*len == 0 || *lo >= m || *len > m - *lo) return Bad("span out of range");
  if ((*len + 7) / 8 != in.size()) return Bad("bitmap length mismatch");
  const auto* bytes = reinterpret_cast<const uint8_t*>(in.data());
  if ((bytes[0] & 1) == 0 || ((bytes[(*len - 1) / 8] >> ((*len - 1) % 8)) & 1) == 0) {
    return Bad("bitmap span not tight");
  }
  if (*len % 8 != 0 && (bytes[in.size() - 1] >> (*len % 8)) != 0) return Bad("non-zero padding");
  // Eight bytes at a time, inline (crdt/popcount.h): std::popcount of each
  // byte was an out-of-line libgcc call per byte (__popcountdi2, 3% of
  // pollend's CPU while it repaired a healed partition; perf).
  *count = 0;
  size_t i = 0;
  for (; i + 8 <= in.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    *count += crdt::Popcount64(word);
  }
  for (; i < in.size(); ++i) *count += crdt::Popcount64(bytes[i]);
  if (*count > max_positions) return Bad(absl::StrCat("count ", *count, " exceeds max ", max_positions));
  return absl::OkStatus();
}

absl::Status DecodeBitmap(uint64_t m, std::string_view in, size_t max_positions, std::vector<uint64_t>& out) {
  uint64_t lo = 0, len = 0, count = 0;
  if (absl::Status s = CheckBitmap(m, in, max_positions, &lo, &len, &count); !s.ok()) return s;
  const auto* bytes = reinterpret_cast<const uint8_t*>(in.data());
  out.clear();
  out.reserve(count);
  for (size_t i = 0; i < in.size(); ++i) {
    for (unsigned b = bytes[i]; b != 0; b &= b - 1) out.push_back(lo + 8 * i + std::countr_zero(b));
  }
  return absl::OkStatus();
}

absl::Status DecodeDense(uint64_t m, std::string_view in, size_t max_positions, std::vector<uint64_t>& out) {
  const int width = EscapeWidth(m);
  uint64_t lo = 0, len = 0, k = 0, holes = 0;
  if (!GetVarint(&in, &lo) || !GetVarint(&in, &len)) return Bad("bad span varint");
  if (len == 0 || lo >= m || len > m - lo) return Bad("span out of range");
  if (absl::Status s = ReadRiceHeader(&in, width, &k, &holes); !s.ok()) return s;
  // lo and lo+len-1 are present, so holes fit only strictly between them.
  if (holes > 0 && holes + 2 > len) return Bad("more holes than span");
  if (len - holes > max_positions) return Bad(absl::StrCat("count ", len - holes, " exceeds max ", max_positions));
  out.clear();
  out.reserve(len - holes);
  BitReader r(in);
  const uint64_t last = lo + len - 1;
  uint64_t next = lo + 1;  // smallest allowed hole; lo itself is present
  out.push_back(lo);
  for (uint64_t i = 0; i < holes; ++i) {
    uint64_t d = 0;
    if (!RiceRead(&r, static_cast<int>(k), width, &d)) return Bad("truncated bitstream");
    if (d >= last - next) return Bad("hole out of range");  // hole must be < last
    const uint64_t hole = next + d;
    for (uint64_t p = next; p < hole; ++p) out.push_back(p);
    next = hole + 1;
  }
  if (lo != last) {
    for (uint64_t p = next; p <= last; ++p) out.push_back(p);
  }
  if (!r.AtCleanEnd()) return Bad("trailing bytes or non-zero padding");
  Check(out.size() == len - holes, "dense decode count");
  return absl::OkStatus();
}

}  // namespace

std::string EncodeBitPositions(uint64_t universe_bits, std::span<const uint64_t> positions) {
  Check(universe_bits >= 1 && universe_bits <= kMaxUniverseBits, "universe_bits in [1, 2^48]");
  for (size_t i = 0; i < positions.size(); ++i) {
    Check(positions[i] < universe_bits, "position < universe_bits");
    Check(i == 0 || positions[i - 1] < positions[i], "positions strictly ascending");
  }
  std::string out;
  const size_t b = positions.size();
  if (b == 0) {
    out.push_back(static_cast<char>(kEmpty));
    return out;
  }
  const int width = EscapeWidth(universe_bits);

  // Mode 1: Rice-coded gaps. Their buffer is kept from call to call, up to
  // 2^20 gaps (8 MiB), as EncodeWords keeps its positions.
  thread_local std::vector<uint64_t> gaps;
  struct Shrink {
    ~Shrink() {
      if (gaps.capacity() > (size_t{1} << 20)) std::vector<uint64_t>().swap(gaps);
    }
  } shrink;
  gaps.resize(b);
  for (size_t i = 0; i < b; ++i) gaps[i] = positions[i] - (i == 0 ? 0 : positions[i - 1] + 1);
  uint64_t rice_bits = 0;
  const int rice_k = ChooseRiceK(gaps, width, &rice_bits);
  const uint64_t rice_bytes = 2 + VarintSize(b) + (rice_bits + 7) / 8;

  // Mode 2: bitmap of the touched span.
  const uint64_t lo = positions.front(), len = positions.back() - lo + 1;
  const uint64_t bitmap_bytes = 1 + VarintSize(lo) + VarintSize(len) + (len + 7) / 8;

  // Mode 3: the span minus Rice-coded holes, considered only when holes are fewer than positions.
  const uint64_t holes = len - b;
  std::vector<uint64_t> hole_gaps;
  int dense_k = 0;
  uint64_t dense_bytes = UINT64_MAX, dense_bits = 0;
  if (holes < b) {
    hole_gaps.reserve(holes);
    uint64_t next = lo + 1;
    for (size_t i = 0; i + 1 < b; ++i) {
      for (uint64_t h = positions[i] + 1; h < positions[i + 1]; ++h) {
        hole_gaps.push_back(h - next);
        next = h + 1;
      }
    }
    dense_k = ChooseRiceK(hole_gaps, width, &dense_bits);
    dense_bytes = 2 + VarintSize(lo) + VarintSize(len) + VarintSize(holes) + (dense_bits + 7) / 8;
  }

  if (rice_bytes <= bitmap_bytes && rice_bytes <= dense_bytes) {
    out.reserve(rice_bytes);
    out.push_back(static_cast<char>(kRice));
    out.push_back(static_cast<char>(rice_k));
    PutVarint(&out, b);
    RiceWrite(gaps, rice_k, width, rice_bits, &out);
    Check(out.size() == rice_bytes, "rice size");
  } else if (bitmap_bytes <= dense_bytes) {
    out.reserve(bitmap_bytes);
    out.push_back(static_cast<char>(kBitmap));
    PutVarint(&out, lo);
    PutVarint(&out, len);
    const size_t start = out.size();
    out.resize(start + (len + 7) / 8, '\0');
    for (uint64_t p : positions) {
      const uint64_t i = p - lo;
      out[start + i / 8] = static_cast<char>(static_cast<uint8_t>(out[start + i / 8]) | (1u << (i % 8)));
    }
    Check(out.size() == bitmap_bytes, "bitmap size");
  } else {
    out.reserve(dense_bytes);
    out.push_back(static_cast<char>(kDense));
    PutVarint(&out, lo);
    PutVarint(&out, len);
    out.push_back(static_cast<char>(dense_k));
    PutVarint(&out, holes);
    RiceWrite(hole_gaps, dense_k, width, dense_bits, &out);
    Check(out.size() == dense_bytes, "dense size");
  }
  return out;
}

absl::Status DecodeBitPositionsInto(uint64_t universe_bits, std::string_view bytes, size_t max_positions,
                                   std::vector<uint64_t>* out) {
  out->clear();
  if (universe_bits == 0 || universe_bits > kMaxUniverseBits) return Bad("universe size out of range");
  if (bytes.empty()) return Bad("truncated header");
  const auto mode = static_cast<uint8_t>(bytes[0]);
  bytes.remove_prefix(1);
  switch (mode) {
    case kEmpty:
      if (!bytes.empty()) return Bad("trailing bytes after empty set");
      return absl::OkStatus();
    case kRice:
      return DecodeRice(universe_bits, bytes, max_positions, *out);
    case kBitmap:
      return DecodeBitmap(universe_bits, bytes, max_positions, *out);
    case kDense:
      return DecodeDense(universe_bits, bytes, max_positions, *out);
    default:
      return Bad(absl::StrCat("unknown mode ", mode));
  }
}

std::string EncodeWordsAsBitmap(uint64_t universe_bits, uint64_t first_word, std::span<const uint64_t> words) {
  Check(universe_bits >= 1 && universe_bits <= kMaxUniverseBits, "universe size");
  const uint64_t universe_words = (universe_bits + 63) / 64;
  Check(first_word <= universe_words && words.size() <= universe_words - first_word, "words inside the universe");
  Check(words.empty() || first_word + words.size() < universe_words || universe_bits % 64 == 0 ||
            (words.back() >> (universe_bits % 64)) == 0,
        "bits beyond the universe");
  size_t first = 0;
  while (first < words.size() && words[first] == 0) ++first;
  if (first == words.size()) return std::string(1, static_cast<char>(kEmpty));
  size_t last = words.size() - 1;
  while (words[last] == 0) --last;
  const uint64_t lo_in = 64 * first + static_cast<uint64_t>(std::countr_zero(words[first]));  // from words[0]
  const uint64_t hi_in = 64 * last + 63 - static_cast<uint64_t>(std::countl_zero(words[last]));
  const uint64_t len = hi_in - lo_in + 1;
  const size_t bytes = (len + 7) / 8;
  std::string out;
  const uint64_t lo = 64 * first_word + lo_in;
  out.reserve(1 + VarintSize(lo) + VarintSize(len) + bytes + 8);
  out.push_back(static_cast<char>(kBitmap));
  PutVarint(&out, lo);
  PutVarint(&out, len);
  // Bit i of the bitmap is bit lo_in + i of the words: 64 bits at a time,
  // each from the two words it straddles, stored little-endian.
  const size_t header = out.size();
  out.resize(header + bytes + 8);  // room for the last whole store; cut below
  const uint64_t shift = lo_in % 64;
  char* dst = out.data() + header;
  for (size_t done = 0, w = lo_in / 64; done < bytes; done += 8, ++w) {
    uint64_t v = words[w] >> shift;
    if (shift != 0 && w + 1 < words.size()) v |= words[w + 1] << (64 - shift);
    for (int b = 0; b < 8; ++b) dst[done + b] = static_cast<char>(v >> (8 * b));
  }
  out.resize(header + bytes);
  if (len % 8 != 0) out.back() = static_cast<char>(static_cast<uint8_t>(out.back()) & ((1u << (len % 8)) - 1));
  return out;
}

absl::StatusOr<bool> DecodeBitmapToWords(uint64_t universe_bits, std::string_view bytes, size_t max_positions,
                                         std::vector<uint64_t>* words, uint64_t* first_word, uint64_t* count) {
  if (universe_bits == 0 || universe_bits > kMaxUniverseBits) return Bad("universe size out of range");
  if (bytes.empty()) return Bad("truncated header");
  const auto mode = static_cast<uint8_t>(bytes[0]);
  if (mode != kEmpty && mode != kBitmap) return false;
  bytes.remove_prefix(1);
  uint64_t lo = 0, len = 0;
  *count = 0;
  if (mode == kEmpty) {
    if (!bytes.empty()) return Bad("trailing bytes after empty set");
  } else if (absl::Status s = CheckBitmap(universe_bits, bytes, max_positions, &lo, &len, count); !s.ok()) {
    return s;
  }
  // Only the words the span touches: at most bytes / 8 + 2, whatever the
  // universe (the work stays bounded by the input).
  *first_word = lo / 64;
  words->assign(mode == kEmpty ? 0 : (lo + len - 1) / 64 - lo / 64 + 1, 0);
  // 64 bits at a time (the last few bytes alone), each ORed into the two
  // words it straddles; byte i holds bits shift + 8i.. of the span's words.
  const auto* in = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint64_t shift = lo % 64;
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t v = 0;
    const size_t n = std::min<size_t>(8, bytes.size() - i);
    for (size_t b = 0; b < n; ++b) v |= uint64_t{in[i + b]} << (8 * b);
    if (v == 0) continue;
    const size_t w = (shift + 8 * i) / 64;
    (*words)[w] |= v << shift;
    if (shift != 0 && (v >> (64 - shift)) != 0) (*words)[w + 1] |= v >> (64 - shift);
  }
  return true;
}

absl::StatusOr<bool> DecodeRiceToWords(uint64_t universe_bits, std::string_view bytes, size_t max_positions,
                                       uint64_t base_bit, std::vector<crdt::WordBits>* words, uint64_t* count) {
  if (universe_bits == 0 || universe_bits > kMaxUniverseBits) return Bad("universe size out of range");
  if (bytes.empty()) return Bad("truncated header");
  if (static_cast<uint8_t>(bytes[0]) != kRice) return false;
  bytes.remove_prefix(1);
  uint64_t n = 0;
  const size_t start = words->size();
  // Room for one word per position, but never more than the words the
  // universe spans (ascending positions below universe_bits touch at most
  // universe_bits / 64 + 2 words from any base_bit; a hostile count cannot
  // make it allocate more than a valid set takes), written through a
  // pointer and cut to size at the end. Without a branch on "same word as
  // the last position": at 1.5% fill that branch is a coin toss, and with it
  // and push_back the decoder ran at 100 M positions/s; without, 195 M/s
  // (bench_protocol BM_RangeRiceToWords).
  crdt::WordBits* room = nullptr;
  size_t room_words = 0;
  size_t filled = 0;            // words begun; the last is being filled
  uint64_t index = UINT64_MAX;  // its index (none: bit / 64 < 2^58)
  uint64_t bits = 0;            // its bits so far
  absl::Status s = ForEachRicePosition(
      universe_bits, bytes, max_positions,
      [&](uint64_t positions) {
        n = positions;
        room_words = static_cast<size_t>(std::min<uint64_t>(positions, universe_bits / 64 + 2));
        words->resize(start + room_words);
        room = words->data() + start;
      },
      [&](uint64_t position) {  // folded into its word as it goes
        const uint64_t bit = base_bit + position;
        const bool fresh = bit / 64 != index;
        filled += fresh;
        assert(filled <= room_words);
        bits = (fresh ? 0 : bits) | uint64_t{1} << (bit % 64);
        index = bit / 64;
        room[filled - 1] = {index, bits};
      });
  words->resize(s.ok() ? start + filled : start);
  if (!s.ok()) return s;
  *count = n;
  return true;
}

absl::StatusOr<std::vector<uint64_t>> DecodeBitPositions(uint64_t universe_bits, std::string_view bytes,
                                                         size_t max_positions) {
  std::vector<uint64_t> out;
  if (absl::Status s = DecodeBitPositionsInto(universe_bits, bytes, max_positions, &out); !s.ok()) return s;
  return out;
}

double EntropyBoundBits(uint64_t m, uint64_t b) {
  Check(b <= m, "b <= m");
  const uint64_t r = std::min(b, m - b);
  if (r == 0) return 0.0;
  if (r <= 1000000) {
    // Exact product form: log2(C(m, r)) = sum_{i<r} log2((m - i) / (r - i)).
    long double bits = 0;
    for (uint64_t i = 0; i < r; ++i) {
      bits += std::log2(static_cast<long double>(m - i)) - std::log2(static_cast<long double>(r - i));
    }
    return static_cast<double>(bits);
  }
  const long double ln = std::lgamma(static_cast<long double>(m) + 1) - std::lgamma(static_cast<long double>(r) + 1) -
                         std::lgamma(static_cast<long double>(m - r) + 1);
  return static_cast<double>(ln / std::log(2.0L));
}

}  // namespace pollen::protocol
