#include "crdt/siphash_many.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "crdt/keyed_hash.h"
#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

SipKey RandomSipKey(std::mt19937_64& rng) {
  SipKey key;
  for (auto& b : key.bytes) b = static_cast<uint8_t>(rng());
  return key;
}

std::vector<uint64_t> HashAll(const SipHasher& hasher, const std::vector<std::string_view>& keys) {
  std::vector<uint64_t> out(keys.size(), 0);
  SipHashMany(hasher, keys, out);
  return out;
}

// Eight keys of every length 0..300, each at a different alignment: the
// vector path sees full batches of equal lengths.
TEST(SipHashMany, MatchesSipHasherAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(11);
  const SipKey key = RandomSipKey(rng);
  const SipHasher hasher(key.bytes.data());
  for (size_t len = 0; len <= 300; ++len) {
    std::vector<std::string> storage(8);
    std::vector<std::string_view> keys;
    for (size_t lane = 0; lane < 8; ++lane) {
      storage[lane] = std::string(lane, '#') + testing::RandomKey(rng, 0) + std::string(len, '\0');
      for (char& c : storage[lane]) c = static_cast<char>(rng());
      keys.push_back(std::string_view(storage[lane]).substr(lane));  // offset `lane`
    }
    const std::vector<uint64_t> got = HashAll(hasher, keys);
    for (size_t lane = 0; lane < 8; ++lane) {
      ASSERT_EQ(got[lane], hasher(keys[lane])) << "len " << len << " lane " << lane;
      ASSERT_EQ(got[lane], SipHash24Sodium(key, keys[lane])) << "len " << len << " lane " << lane;
    }
  }
}

// Batches of 0..40 keys (so full groups of 8 and a scalar remainder) whose
// lengths differ within a group, including one long key among empty ones.
TEST(SipHashMany, MatchesSipHasherOnMixedBatches) {
  std::mt19937_64 rng(12);
  for (int round = 0; round < 2000; ++round) {
    const SipKey key = RandomSipKey(rng);
    const SipHasher hasher(key.bytes.data());
    const size_t n = rng() % 41;
    std::vector<std::string> storage;
    for (size_t i = 0; i < n; ++i) {
      const bool skewed = round % 3 == 0;
      storage.push_back(skewed && i % 8 != 3 ? std::string() : testing::RandomKey(rng, skewed ? 300 : 80));
    }
    std::vector<std::string_view> keys(storage.begin(), storage.end());
    const std::vector<uint64_t> got = HashAll(hasher, keys);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], hasher(keys[i])) << "round " << round << " key " << i;
  }
}

// Keys that end exactly where readable memory ends: a read of even one byte
// past a key's end (say, a whole-word load of its tail) faults.
TEST(SipHashMany, ReadsNothingPastTheEndOfAKey) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::mt19937_64 rng(13);
  const SipKey key = RandomSipKey(rng);
  const SipHasher hasher(key.bytes.data());
  for (size_t lane_count : {8, 16}) {
    std::vector<char*> regions;
    std::vector<std::string_view> keys;
    for (size_t i = 0; i < lane_count; ++i) {
      void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(mem, MAP_FAILED);
      char* base = static_cast<char*>(mem);
      ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);
      const size_t len = (i * 37 + lane_count) % 300;
      for (size_t b = 0; b < len; ++b) base[page - len + b] = static_cast<char>(rng());
      regions.push_back(base);
      keys.emplace_back(base + page - len, len);
    }
    const std::vector<uint64_t> got = HashAll(hasher, keys);
    for (size_t i = 0; i < lane_count; ++i) EXPECT_EQ(got[i], hasher(keys[i]));
    for (char* base : regions) munmap(base, 2 * page);
  }
}

}  // namespace
}  // namespace pollen::crdt
