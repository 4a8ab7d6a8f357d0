#include "crdt/keyed_hash.h"

#include <random>
#include <set>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

// An independent SipHash-2-4, written from the paper's specification, used to
// cross-check both the inlined SipHash24 and libsodium on random inputs (and to
// pin the reference vectors).
uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }
uint64_t Le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t SpecSipHash24(const SipKey& key, std::string_view data) {
  const uint64_t k0 = Le64(key.bytes.data()), k1 = Le64(key.bytes.data() + 8);
  uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
  auto round = [&] {
    v0 += v1; v1 = Rotl(v1, 13); v1 ^= v0; v0 = Rotl(v0, 32);
    v2 += v3; v3 = Rotl(v3, 16); v3 ^= v2;
    v0 += v3; v3 = Rotl(v3, 21); v3 ^= v0;
    v2 += v1; v1 = Rotl(v1, 17); v1 ^= v2; v2 = Rotl(v2, 32);
  };
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const size_t full = data.size() / 8 * 8;
  for (size_t i = 0; i < full; i += 8) {
    const uint64_t m = Le64(p + i);
    v3 ^= m; round(); round(); v0 ^= m;
  }
  uint64_t last = static_cast<uint64_t>(data.size() & 0xff) << 56;
  for (size_t i = full; i < data.size(); ++i) last |= static_cast<uint64_t>(p[i]) << (8 * (i - full));
  v3 ^= last; round(); round(); v0 ^= last;
  v2 ^= 0xff;
  round(); round(); round(); round();
  return v0 ^ v1 ^ v2 ^ v3;
}

SipKey ReferenceKey() {
  SipKey key;
  for (int i = 0; i < 16; ++i) key.bytes[i] = static_cast<uint8_t>(i);
  return key;
}

TEST(KeyedHash, MatchesSipHashReferenceVectors) {
  // From the SipHash paper's reference implementation (vectors.h): key
  // 00 01 .. 0f, message 00 01 .. (len-1), output read little-endian.
  const uint64_t kExpected[] = {
      0x726fdb47dd0e0e31ULL, 0x74f839c593dc67fdULL, 0x0d6c8009d9a94f5aULL, 0x85676696d7fb7e2dULL,
      0xcf2794e0277187b7ULL, 0x18765564cd99a68dULL, 0xcbc9466e58fee3ceULL, 0xab0200f58b01d137ULL,
      0x93f5f5799a932462ULL, 0x9e0082df0ba9e4b0ULL, 0x7a5dbbc594ddb9f3ULL, 0xf4b32f46226bada7ULL,
      0x751e8fbc860ee5fbULL, 0x14ea5627c0843d90ULL, 0xf723ca908e7af2eeULL, 0xa129ca6149be45e5ULL,
  };
  std::string message;
  for (size_t len = 0; len < std::size(kExpected); ++len) {
    EXPECT_EQ(SipHash24(ReferenceKey(), message), kExpected[len]) << "length " << len;
    EXPECT_EQ(SipHash24Sodium(ReferenceKey(), message), kExpected[len]) << "length " << len;
    EXPECT_EQ(SpecSipHash24(ReferenceKey(), message), kExpected[len]) << "length " << len;
    message.push_back(static_cast<char>(len));
  }
}

// The inlined SipHash24 must equal libsodium's crypto_shorthash bit for bit:
// random keys, every length from 0 to 300 bytes, and unaligned inputs.
TEST(KeyedHash, InlinedMatchesLibsodiumAndSpecOnRandomInputs) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    SipKey key;
    for (auto& b : key.bytes) b = static_cast<uint8_t>(rng());
    const std::string data = testing::RandomKey(rng, 100);
    const uint64_t expected = SipHash24Sodium(key, data);
    ASSERT_EQ(SipHash24(key, data), expected) << "input " << i;
    ASSERT_EQ(SpecSipHash24(key, data), expected) << "input " << i;
  }
  std::string buffer(320, '\0');
  for (char& c : buffer) c = static_cast<char>(rng());
  for (size_t len = 0; len <= 300; ++len) {
    for (size_t offset = 0; offset < 8; ++offset) {  // every alignment
      SipKey key;
      for (auto& b : key.bytes) b = static_cast<uint8_t>(rng());
      const std::string_view data(buffer.data() + offset, len);
      ASSERT_EQ(SipHash24(key, data), SipHash24Sodium(key, data)) << "length " << len << " offset " << offset;
    }
  }
}

TEST(KeyedHash, SubkeysDifferPerFilterAndGeneration) {
  const ClusterSecret secret = testing::SecretFromSeed(1);
  std::set<std::array<uint8_t, 16>> seen;
  for (uint64_t filter = 0; filter < 20; ++filter) {
    for (uint64_t gen = 0; gen < 20; ++gen) {
      EXPECT_TRUE(seen.insert(DeriveSipKey(secret, filter, gen).bytes).second);
    }
  }
  EXPECT_NE(DeriveSipKey(secret, 1, 1), DeriveSipKey(testing::SecretFromSeed(2), 1, 1));
  // A subkey is not a slice of the secret.
  const SipKey key = DeriveSipKey(secret, 0, 0);
  EXPECT_NE(0, std::memcmp(key.bytes.data(), secret.bytes.data(), 16));
  EXPECT_NE(0, std::memcmp(key.bytes.data(), secret.bytes.data() + 16, 16));
}

TEST(KeyedHash, SubkeysAndIdsAreStableAcrossRuns) {
  // Pinned values: a change here means every deployed filter would rehash.
  ClusterSecret secret;
  for (int i = 0; i < 32; ++i) secret.bytes[i] = static_cast<uint8_t>(i);
  const SipKey key = DeriveSipKey(secret, FilterIdForName("crawl:seen"), 3);
  EXPECT_EQ(SipHash24(key, "https://example.com/"), 0x0cafb2da048de441ULL);
  EXPECT_EQ(FilterIdForName("crawl:seen"), 0x79fbf28399b0b3c8ULL);
  EXPECT_EQ(KeyIdForSecret(secret), 0x803a9568644be6d7ULL);
}

TEST(KeyedHash, KeyIdDependsOnlyOnTheSecret) {
  EXPECT_EQ(KeyIdForSecret(testing::SecretFromSeed(5)), KeyIdForSecret(testing::SecretFromSeed(5)));
  EXPECT_NE(KeyIdForSecret(testing::SecretFromSeed(5)), KeyIdForSecret(testing::SecretFromSeed(6)));
  EXPECT_NE(FilterIdForName("a"), FilterIdForName("b"));
}

}  // namespace
}  // namespace pollen::crdt
