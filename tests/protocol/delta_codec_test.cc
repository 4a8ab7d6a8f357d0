#include "protocol/delta_codec.h"

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace pollen::protocol {
namespace {

// b distinct random positions in [0, m), ascending.
std::vector<uint64_t> RandomPositions(std::mt19937_64& rng, uint64_t m, uint64_t b) {
  std::vector<uint64_t> out;
  if (b * 4 >= m) {  // dense: one Bernoulli-like pass choosing exactly b (selection sampling)
    uint64_t need = b;
    for (uint64_t p = 0; p < m && need > 0; ++p) {
      if (rng() % (m - p) < need) {
        out.push_back(p);
        --need;
      }
    }
    return out;
  }
  std::set<uint64_t> s;
  while (s.size() < b) s.insert(rng() % m);
  return {s.begin(), s.end()};
}

void ExpectRoundTrip(uint64_t m, const std::vector<uint64_t>& pos) {
  const std::string enc = EncodeBitPositions(m, pos);
  // No position ever costs more than an escape (kRiceEscape + 49 bits), whatever the set.
  EXPECT_LE(enc.size(), 32 + (pos.size() * (kRiceEscape + 49) + 7) / 8) << "m=" << m << " b=" << pos.size();
  auto dec = DecodeBitPositions(m, enc, pos.size());
  ASSERT_TRUE(dec.ok()) << dec.status() << " m=" << m << " b=" << pos.size();
  ASSERT_EQ(*dec, pos) << "m=" << m << " b=" << pos.size();
  if (!pos.empty()) {
    EXPECT_FALSE(DecodeBitPositions(m, enc, pos.size() - 1).ok()) << "cap not enforced, m=" << m;
  }
  EXPECT_FALSE(DecodeBitPositions(m, enc + '\0', pos.size()).ok()) << "trailing byte accepted";
  if (enc.size() <= 64) {
    for (size_t len = 0; len < enc.size(); ++len) {
      EXPECT_FALSE(DecodeBitPositions(m, enc.substr(0, len), pos.size()).ok()) << "prefix " << len;
    }
  } else {
    EXPECT_FALSE(DecodeBitPositions(m, enc.substr(0, enc.size() - 1), pos.size()).ok());
  }
}

TEST(DeltaCodecTest, EdgeCases) {
  for (uint64_t m : std::vector<uint64_t>{1, 2, 3, 8, 9, 64, 1000, uint64_t{1} << 33, kMaxUniverseBits}) {
    ExpectRoundTrip(m, {});
    ExpectRoundTrip(m, {0});
    ExpectRoundTrip(m, {m - 1});
    if (m >= 2) ExpectRoundTrip(m, {0, m - 1});
    if (m <= 1000) {
      std::vector<uint64_t> all(m);
      for (uint64_t i = 0; i < m; ++i) all[i] = i;
      ExpectRoundTrip(m, all);  // b = m
      if (m >= 3) {
        all.erase(all.begin() + m / 2);  // one hole in the middle
        ExpectRoundTrip(m, all);
      }
    }
  }
  EXPECT_EQ(EncodeBitPositions(100, {}).size(), 1u);
}

TEST(DeltaCodecTest, RandomRoundTrips) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 400; ++trial) {
    const int shift = 1 + static_cast<int>(rng() % 40);
    const uint64_t m = (uint64_t{1} << shift) + rng() % (uint64_t{1} << shift);
    const double density = std::ldexp(1.0, -static_cast<int>(rng() % 20));  // 1 .. 2^-19
    uint64_t b = std::min<uint64_t>(static_cast<uint64_t>(density * static_cast<double>(m)), 20000);
    if (rng() % 8 == 0) b = m <= 20000 ? m - rng() % (m / 8 + 1) : b;  // near-full sets
    if (b * 4 >= m && m > 200000) b = std::min<uint64_t>(b, m / 8);  // keep selection sampling cheap
    ExpectRoundTrip(m, RandomPositions(rng, m, b));
  }
}

TEST(DeltaCodecTest, ClusteredSetsRoundTrip) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 100; ++trial) {
    const uint64_t m = uint64_t{1} << (16 + rng() % 18);
    std::set<uint64_t> s;
    const int clusters = 1 + static_cast<int>(rng() % 5);
    for (int c = 0; c < clusters; ++c) {
      const uint64_t base = rng() % m, width = 1 + rng() % 5000;
      const uint64_t n = 1 + rng() % width;
      for (uint64_t i = 0; i < n; ++i) s.insert(std::min(m - 1, base + rng() % width));
    }
    ExpectRoundTrip(m, {s.begin(), s.end()});
  }
}

TEST(DeltaCodecTest, SizeWithinOneAndAHalfTimesEntropyBound) {
  std::mt19937_64 rng(2026);
  for (int shift : {23, 26}) {
    const uint64_t m = uint64_t{1} << shift;
    for (uint64_t b : {100, 1000, 10000, 100000}) {
      const auto pos = RandomPositions(rng, m, b);
      const double bound = EntropyBoundBits(m, b);
      const double bits = 8.0 * EncodeBitPositions(m, pos).size();
      EXPECT_LE(bits, 1.5 * bound) << "m=2^" << shift << " b=" << b << " ratio=" << bits / bound;
    }
  }
  // The aim covers 2^16 <= m <= 2^33: check the corners too, including dense ones.
  for (int shift : {16, 17, 20, 30, 33}) {
    const uint64_t m = uint64_t{1} << shift;
    for (uint64_t b : {100, 1000, 10000, 30000, 60000, 100000}) {
      if (b > m) continue;
      const auto pos = RandomPositions(rng, m, b);
      const double bits = 8.0 * EncodeBitPositions(m, pos).size();
      EXPECT_LE(bits, 1.5 * EntropyBoundBits(m, b)) << "m=2^" << shift << " b=" << b;
    }
  }
}

TEST(DeltaCodecTest, EntropyBound) {
  EXPECT_EQ(EntropyBoundBits(100, 0), 0.0);
  EXPECT_EQ(EntropyBoundBits(100, 100), 0.0);
  EXPECT_NEAR(EntropyBoundBits(100, 1), std::log2(100.0), 1e-9);
  EXPECT_NEAR(EntropyBoundBits(10, 5), std::log2(252.0), 1e-9);
  EXPECT_NEAR(EntropyBoundBits(1000, 3), EntropyBoundBits(1000, 997), 1e-9);
  // lgamma path (r > 10^6) agrees with the product path near the switch.
  const double a = EntropyBoundBits(uint64_t{1} << 30, 1000000);
  const double b = EntropyBoundBits(uint64_t{1} << 30, 1000001);
  EXPECT_GT(b, a);
  EXPECT_LT(b - a, 20.0);
}

std::string Bytes(std::initializer_list<int> v) {
  std::string s;
  for (int x : v) s.push_back(static_cast<char>(x));
  return s;
}

TEST(DeltaCodecTest, MalformedInputsRejected) {
  const uint64_t m = 1 << 20;
  auto bad = [&](const std::string& s, uint64_t universe = 1 << 20) {
    auto r = DecodeBitPositions(universe, s, 1000);
    EXPECT_FALSE(r.ok()) << "accepted " << ::testing::PrintToString(s);
    if (!r.ok()) {
      EXPECT_EQ(r.status().message().rfind("ERR delta ", 0), 0u) << r.status();
    }
  };
  bad("");
  bad(Bytes({9}));                         // unknown mode
  bad(Bytes({0, 0}));                      // trailing after empty
  bad(Bytes({1}));                         // rice, no k
  bad(Bytes({1, 60, 1, 0}));               // k above the width of m
  bad(Bytes({1, 3}));                      // no count
  bad(Bytes({1, 3, 0}));                   // zero count in rice mode
  bad(Bytes({1, 3, 0x80, 0x00, 0}));       // non-canonical varint
  bad(Bytes({1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}));  // count 2^63: beyond the stream
  bad(Bytes({1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));  // 11-byte varint
  EXPECT_EQ(*DecodeBitPositions(m, Bytes({1, 0, 2, 0x00}), 10), (std::vector<uint64_t>{0, 1}));  // two zero gaps
  bad(Bytes({1, 0, 9, 0x00}));             // 9 items cannot fit in 8 bits
  bad(Bytes({1, 0, 1, 0x02}));             // one item (bit 0 = 0 -> d=0) then non-zero padding
  // A long run of ones: escape after kRiceEscape ones, then a W-bit value that is out of range.
  std::string ones = Bytes({1, 0, 1});
  ones.append(16, '\xff');
  bad(ones);
  bad(ones, 1000);
  // Rice position beyond m: k=20 (== width of 2^20 is 21), d = 2^20.
  {
    std::string s = Bytes({1, 21, 1});
    // q = 0: a zero bit, then 21 bits of d = 2^20 -> bit 21 of the stream... write by hand:
    // stream bits: [0][d bits LSB-first]; d = 1<<20 means stream bit 21 set.
    s += Bytes({0x00, 0x00, 0x20});
    bad(s);
  }
  // Bitmap: zero span, span past m, length mismatch, not tight, padding.
  bad(Bytes({2, 0, 0}));
  bad(Bytes({2, 0x80, 0x80, 0x40, 8, 0xff}));  // lo = 2^20 >= m
  bad(Bytes({2, 0, 9, 0xff}));                 // 9 bits need 2 bytes
  bad(Bytes({2, 0, 8, 0x7f}));                 // last bit of span clear
  bad(Bytes({2, 0, 8, 0xfe}));                 // first bit of span clear
  bad(Bytes({2, 0, 4, 0x19}));                 // padding bit set
  EXPECT_TRUE(DecodeBitPositions(m, Bytes({2, 0, 4, 0x09}), 10).ok());
  EXPECT_EQ(*DecodeBitPositions(m, Bytes({2, 5, 4, 0x09}), 10), (std::vector<uint64_t>{5, 8}));
  EXPECT_FALSE(DecodeBitPositions(m, Bytes({2, 5, 4, 0x09}), 1).ok());
  // Dense: more holes than span, hole at the end, span out of range, count over the cap.
  bad(Bytes({3, 0, 3, 0, 5, 0x00}));
  bad(Bytes({3, 0, 1, 0, 1, 0x00}));           // a hole in a 1-bit span
  bad(Bytes({3, 0, 3, 0, 1, 0x02}));           // hole d=1 -> position 2 = last
  EXPECT_EQ(*DecodeBitPositions(m, Bytes({3, 0, 3, 0, 1, 0x00}), 10), (std::vector<uint64_t>{0, 2}));
  bad(Bytes({3, 0, 0xff, 0xff, 0x3f, 0, 0}));  // 2^20 - 1 positions: over the cap of 1000
  bad(Bytes({3, 0x80, 0x80, 0x40, 1, 0, 0}));  // lo out of range
  // Universe sizes outside what the codec speaks.
  EXPECT_FALSE(DecodeBitPositions(0, Bytes({0}), 10).ok());
  EXPECT_FALSE(DecodeBitPositions(kMaxUniverseBits + 1, Bytes({0}), 10).ok());
}

TEST(DeltaCodecTest, DecodingAgainstSmallerUniverseRejectsOutOfRange) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const uint64_t m = 1000 + rng() % 100000;
    auto pos = RandomPositions(rng, m, 1 + rng() % 500);
    const std::string enc = EncodeBitPositions(m, pos);
    const uint64_t smaller = pos.back();  // the last position no longer fits
    if (smaller == 0) continue;
    EXPECT_FALSE(DecodeBitPositions(smaller, enc, pos.size()).ok());
  }
}

TEST(DeltaCodecTest, EveryByteFlipDecodesToValidSetOrError) {
  std::mt19937_64 rng(77);
  const uint64_t m = 1 << 16;
  for (uint64_t b : {3, 40, 2000, 60000}) {
    const auto pos = RandomPositions(rng, m, b);
    const std::string enc = EncodeBitPositions(m, pos);
    for (size_t i = 0; i < enc.size(); i += 1 + enc.size() / 200) {
      std::string mutated = enc;
      mutated[i] = static_cast<char>(mutated[i] ^ (1 << (rng() % 8)));
      auto r = DecodeBitPositions(m, mutated, m);
      if (!r.ok()) {
        continue;
      }
      for (size_t j = 0; j < r->size(); ++j) {
        ASSERT_LT((*r)[j], m);
        if (j > 0) {
          ASSERT_LT((*r)[j - 1], (*r)[j]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace pollen::protocol

namespace pollen::protocol {
namespace {

TEST(DeltaCodecTest, PicksTheModeThatFitsTheDensity) {
  std::mt19937_64 rng(3);
  const uint64_t m = 1 << 16;
  auto mode = [&](uint64_t b) { return static_cast<int>(EncodeBitPositions(m, RandomPositions(rng, m, b))[0]); };
  EXPECT_EQ(mode(0), 0);
  EXPECT_EQ(mode(100), 1);        // sparse: Rice gaps
  // Half full: a bitmap is optimal (Rice with k = 0 costs exactly as much).
  EXPECT_LE(EncodeBitPositions(m, RandomPositions(rng, m, m / 2)).size(), m / 8 + 8);
  EXPECT_EQ(mode(m - 100), 3);    // nearly full: Rice-coded holes
  // A tight cluster in a huge universe: bitmap of the span, a few bytes.
  std::vector<uint64_t> cluster;
  for (uint64_t i = 0; i < 64; ++i) cluster.push_back((uint64_t{1} << 32) + 2 * i);
  const std::string enc = EncodeBitPositions(uint64_t{1} << 33, cluster);
  EXPECT_EQ(enc[0], 2);
  EXPECT_LE(enc.size(), 1 + 5 + 1 + 16u);
}

// One key of a blocked filter: one long gap to its 512-bit block, then six
// short ones inside it (a tree push, pollen-sim m = 989,696). Rice with the
// k that suits the short gaps (6) is the cheapest code, 15 bytes; the best
// of the candidates around the mean gap (k = 12..16) costs 16.
TEST(DeltaCodecTest, SmallSetsGetTheCheapestRiceParameter) {
  const uint64_t m = 989'696;
  const std::vector<uint64_t> key = {151'614, 151'700, 151'818, 151'894, 151'945, 152'061};
  const std::string enc = EncodeBitPositions(m, key);
  EXPECT_EQ(enc[0], 1);
  EXPECT_EQ(enc[1], 6);
  EXPECT_EQ(enc.size(), 15u);
  ExpectRoundTrip(m, key);
}

// The words of a set: bit i of words[w] <=> position 64w + i.
std::vector<uint64_t> WordsOf(uint64_t m, const std::vector<uint64_t>& pos) {
  std::vector<uint64_t> words((m + 63) / 64, 0);
  for (uint64_t p : pos) words[p / 64] |= uint64_t{1} << (p % 64);
  return words;
}

// DecodeBitmapToWords' span of words, placed in the whole universe's words.
std::vector<uint64_t> Widen(uint64_t m, const std::vector<uint64_t>& span, uint64_t first) {
  std::vector<uint64_t> words((m + 63) / 64, 0);
  for (size_t i = 0; i < span.size(); ++i) words.at(first + i) = span[i];
  return words;
}

TEST(DeltaCodecTest, BitmapOfWordsMatchesThePositionCoder) {
  std::mt19937_64 rng(606);
  for (uint64_t m : {uint64_t{1}, uint64_t{63}, uint64_t{64}, uint64_t{65}, uint64_t{1000}, uint64_t{93696},
                     (uint64_t{1} << 16) + 3}) {
    for (double fill : {0.0, 0.001, 0.05, 0.1, 0.5, 0.9, 1.0}) {
      const uint64_t b = std::max<uint64_t>(fill > 0 ? 1 : 0, static_cast<uint64_t>(fill * static_cast<double>(m)));
      const std::vector<uint64_t> pos = RandomPositions(rng, m, std::min(b, m));
      const std::vector<uint64_t> words = WordsOf(m, pos);
      const std::string enc = EncodeWordsAsBitmap(m, 0, words);
      ASSERT_EQ(enc[0], pos.empty() ? 0 : 2) << "m=" << m << " b=" << pos.size();
      // The general decoder reads it as the same set...
      auto dec = DecodeBitPositions(m, enc, pos.size());
      ASSERT_TRUE(dec.ok()) << dec.status() << " m=" << m << " b=" << pos.size();
      EXPECT_EQ(*dec, pos);
      // ... the word decoder too, with the count...
      std::vector<uint64_t> back = {42};
      uint64_t first = 9, count = 7;
      auto ok = DecodeBitmapToWords(m, enc, pos.size(), &back, &first, &count);
      ASSERT_TRUE(ok.ok() && *ok) << "m=" << m << " b=" << pos.size();
      EXPECT_EQ(Widen(m, back, first), words);
      EXPECT_EQ(count, pos.size());
      // ... from any span of words that holds the set ...
      if (!pos.empty()) {
        EXPECT_FALSE(DecodeBitmapToWords(m, enc, pos.size() - 1, &back, &first, &count).ok());
        const uint64_t first_word = pos.front() / 64, last_word = pos.back() / 64;
        const std::vector<uint64_t> span(words.begin() + first_word, words.begin() + last_word + 1);
        EXPECT_EQ(EncodeWordsAsBitmap(m, first_word, span), enc);
      }
      // ... and where the position coder picks the bitmap, its bytes are these.
      const std::string general = EncodeBitPositions(m, pos);
      if (general[0] == 2) {
        EXPECT_EQ(general, enc) << "m=" << m << " b=" << pos.size();
      }
    }
  }
}

TEST(DeltaCodecTest, BitmapToWordsLeavesOtherModesToThePositionDecoder) {
  std::mt19937_64 rng(607);
  const uint64_t m = 1 << 20;
  const std::string rice = EncodeBitPositions(m, RandomPositions(rng, m, 50));
  ASSERT_EQ(rice[0], 1);
  std::vector<uint64_t> words = {5};
  uint64_t first = 0, count = 0;
  auto r = DecodeBitmapToWords(m, rice, 1000, &words, &first, &count);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(words, std::vector<uint64_t>{5});
  EXPECT_FALSE(DecodeBitmapToWords(m, "", 10, &words, &first, &count).ok());
  EXPECT_FALSE(DecodeBitmapToWords(0, rice, 10, &words, &first, &count).ok());
  // A bitmap of two bits far up a huge universe: two words, not the universe's.
  const uint64_t huge = kMaxUniverseBits;
  // Mode 2 by hand (the position coder prefers Rice here): lo, len 69, bits 0 and 68.
  std::string far(1, '\2');
  for (uint64_t v : {huge - 70, uint64_t{69}}) {
    for (; v >= 0x80; v >>= 7) far.push_back(static_cast<char>(0x80 | (v & 0x7f)));
    far.push_back(static_cast<char>(v));
  }
  far += std::string("\x01\0\0\0\0\0\0\0\x10", 9);
  ASSERT_EQ(*DecodeBitPositions(huge, far, 10), (std::vector<uint64_t>{huge - 70, huge - 2}));
  ASSERT_TRUE(DecodeBitmapToWords(huge, far, 10, &words, &first, &count).ok());
  EXPECT_EQ(words.size(), 2u);
  EXPECT_EQ(first, (huge - 70) / 64);
  EXPECT_EQ(count, 2u);
}

// Every one-byte change (three masks) and every cut of `enc`, and `enc`
// with a byte more.
std::vector<std::string> Variants(const std::string& enc) {
  std::vector<std::string> variants;
  for (size_t i = 0; i < enc.size(); ++i) {
    for (int flip : {1, 0x80, 0xff}) {
      std::string v = enc;
      v[i] = static_cast<char>(v[i] ^ flip);
      variants.push_back(v);
    }
    variants.push_back(enc.substr(0, i));
  }
  variants.push_back(enc + '\0');
  return variants;
}

// Rice codes decode straight into words, at any offset of the positions in
// the words' universe, as the position decoder and FromBitPositions do,
// appended after what the vector held (a word of the same index as the first
// decoded one included: it is not folded into).
// A big filter's anti-entropy range (2^23 bits) at the fills a crawl reaches:
// past 4,096 gaps the Rice parameter is chosen on a sample of them, which
// must still land within 2% of the entropy bound (exact choice: 0.4% over;
// bench_protocol), and the word decoder must give back every position.
TEST(DeltaCodecTest, RangeSizedSetsRoundTripNearTheBound) {
  std::mt19937_64 rng(2026);
  const uint64_t m = uint64_t{1} << 23;
  for (uint64_t b : {5000, 40000, 125000, 250000}) {
    const std::vector<uint64_t> pos = RandomPositions(rng, m, b);
    ExpectRoundTrip(m, pos);
    const std::string enc = EncodeBitPositions(m, pos);
    EXPECT_LE(8.0 * static_cast<double>(enc.size()), 1.02 * EntropyBoundBits(m, b)) << "b=" << b;
    std::vector<crdt::WordBits> words;
    uint64_t count = 0;
    auto ok = DecodeRiceToWords(m, enc, b, 64 * 1000, &words, &count);
    ASSERT_TRUE(ok.ok() && *ok) << "b=" << b;
    EXPECT_EQ(count, b);
    EXPECT_EQ(words, crdt::FromBitPositions(pos, 64 * 1000));
  }
}

// A Rice header may claim as many positions as its bitstream could hold
// (one bit each at k = 0), far more than the universe has words: the word
// decoder's room stays within the universe's words, and such a set decodes
// (every position of a small universe) or fails cleanly.
TEST(DeltaCodecTest, RiceToWordsRoomIsBoundedByTheUniverse) {
  const uint64_t m = 1000;
  std::string enc = {1, 0};  // mode 1, k = 0
  enc.push_back(static_cast<char>(0xe8));  // count 1000 (varint)
  enc.push_back(7);
  enc.append(125, '\0');  // 1000 zero gaps: positions 0..999
  std::vector<crdt::WordBits> words;
  uint64_t count = 0;
  auto ok = DecodeRiceToWords(m, enc, m, 0, &words, &count);
  ASSERT_TRUE(ok.ok() && *ok) << ok.status();
  EXPECT_EQ(count, m);
  ASSERT_EQ(words.size(), 16u);  // 1000 bits: 15 full words and 40 bits
  EXPECT_EQ(words.back(), (crdt::WordBits{15, (uint64_t{1} << 40) - 1}));
  EXPECT_LE(words.capacity(), 1000u);
  // The same stream in a universe of 128 bits: 1000 positions claimed, at
  // most 4 words of room, and position 128 is out of range.
  std::vector<crdt::WordBits> small;
  EXPECT_FALSE(DecodeRiceToWords(128, enc, m, 0, &small, &count).ok());
  EXPECT_TRUE(small.empty());
  EXPECT_LE(small.capacity(), 4u);
}

TEST(DeltaCodecTest, RiceToWordsMatchesThePositionCoder) {
  std::mt19937_64 rng(609);
  uint64_t rice_sets = 0;
  for (uint64_t m : {uint64_t{1000}, uint64_t{93696}, uint64_t{1} << 20, uint64_t{1} << 33}) {
    for (uint64_t b : {1, 2, 7, 50, 900}) {
      for (uint64_t base_bit : {uint64_t{0}, uint64_t{64}, uint64_t{13}, uint64_t{93696} * 5}) {
        const std::vector<uint64_t> pos = RandomPositions(rng, m, std::min(b, m / 20));
        const std::string enc = EncodeBitPositions(m, pos);
        const crdt::WordBits before{(base_bit + pos.front()) / 64, 1};
        std::vector<crdt::WordBits> words = {before};
        uint64_t count = 99;
        auto ok = DecodeRiceToWords(m, enc, pos.size(), base_bit, &words, &count);
        ASSERT_TRUE(ok.ok()) << ok.status() << " m=" << m << " b=" << pos.size();
        if (enc[0] != 1) {  // another mode: nothing written
          EXPECT_FALSE(*ok);
          EXPECT_EQ(words.size(), 1u);
          continue;
        }
        ++rice_sets;
        ASSERT_TRUE(*ok);
        std::vector<crdt::WordBits> expected = {before};
        for (const crdt::WordBits& w : crdt::FromBitPositions(pos, base_bit)) expected.push_back(w);
        EXPECT_EQ(words, expected) << "m=" << m << " b=" << pos.size();
        EXPECT_EQ(count, pos.size());
        EXPECT_FALSE(DecodeRiceToWords(m, enc, pos.size() - 1, base_bit, &words, &count).ok());
      }
    }
  }
  EXPECT_GT(rice_sets, 40u);
}

// Every one-byte change and cut of Rice encodings: the word decoder accepts
// exactly what the position decoder accepts, as the same set, with its errors.
TEST(DeltaCodecTest, RiceToWordsRejectsWhatThePositionDecoderRejects) {
  std::mt19937_64 rng(610);
  for (uint64_t m : {uint64_t{1000}, uint64_t{1} << 16, uint64_t{1} << 26}) {
    const std::vector<uint64_t> pos = RandomPositions(rng, m, 40);
    const std::string enc = EncodeBitPositions(m, pos);
    ASSERT_EQ(enc[0], 1);
    for (const std::string& v : Variants(enc)) {
      std::vector<crdt::WordBits> words;
      uint64_t count = 0;
      auto as_words = DecodeRiceToWords(m, v, 100, 0, &words, &count);
      auto as_positions = DecodeBitPositions(m, v, 100);
      if (as_words.ok() && !*as_words) continue;  // another mode: not the word decoder's
      ASSERT_EQ(as_words.ok(), as_positions.ok()) << "m=" << m << " size " << v.size();
      if (as_words.ok()) {
        EXPECT_EQ(words, crdt::FromBitPositions(*as_positions, 0));
        EXPECT_EQ(count, as_positions->size());
      } else {
        EXPECT_EQ(as_words.status(), as_positions.status());
      }
    }
  }
}

// Every one-byte change and cut of bitmap encodings: the word decoder accepts
// exactly what the position decoder accepts, as the same set.
TEST(DeltaCodecTest, BitmapToWordsRejectsWhatThePositionDecoderRejects) {
  std::mt19937_64 rng(608);
  for (uint64_t m : {uint64_t{70}, uint64_t{1000}, uint64_t{4096}}) {
    const std::vector<uint64_t> pos = RandomPositions(rng, m, m / 3);
    const std::string enc = EncodeWordsAsBitmap(m, 0, WordsOf(m, pos));
    for (const std::string& v : Variants(enc)) {
      std::vector<uint64_t> words;
      uint64_t first = 0, count = 0;
      auto as_words = DecodeBitmapToWords(m, v, m, &words, &first, &count);
      auto as_positions = DecodeBitPositions(m, v, m);
      if (as_words.ok() && !*as_words) continue;  // another mode: not the word decoder's
      ASSERT_EQ(as_words.ok(), as_positions.ok()) << "m=" << m << " size " << v.size();
      if (as_words.ok()) {
        EXPECT_EQ(Widen(m, words, first), WordsOf(m, *as_positions));
        EXPECT_EQ(count, as_positions->size());
      }
    }
  }
}

}  // namespace
}  // namespace pollen::protocol
