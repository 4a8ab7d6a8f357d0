// Concurrent adds, tests, merges and rotations. Run under TSan in CI. The
// invariant: after the writers join, every key any of them added reads present.
#include <atomic>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "crdt/generations.h"
#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

// One block per key, and a key's bits over six blocks (hash scheme 3's split layout).
class ConcurrencyShapes : public ::testing::TestWithParam<FilterShape> {};

TEST_P(ConcurrencyShapes, AddersTestersAndMergersLeaveNoFalseNegatives) {
  auto target = *BlockedFilter::Create(GetParam());
  auto source = *BlockedFilter::Create(GetParam());
  constexpr int kAdders = 3, kPerThread = 20'000;
  std::vector<std::vector<uint64_t>> added(kAdders);
  std::vector<WordBits> source_bits;
  std::mt19937_64 srng(1);
  std::vector<uint64_t> merged_hashes(5000);
  for (auto& h : merged_hashes) {
    h = srng();
    source->Add(h).AppendTo(source_bits);
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kAdders; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t h = rng();
        target->Add(h);
        added[t].push_back(h);
        // Our own add is visible to us immediately.
        if (!target->MightContain(h)) std::abort();
      }
    });
  }
  threads.emplace_back([&] {  // merger: deltas in chunks, concurrently with adds
    for (size_t i = 0; i < source_bits.size(); i += 64) {
      const size_t n = std::min<size_t>(64, source_bits.size() - i);
      EXPECT_TRUE(target->Merge({source_bits.data() + i, n}, nullptr).ok());
    }
  });
  threads.emplace_back([&] {  // reader: summaries and probes while all of that happens
    std::mt19937_64 rng(7);
    uint64_t sink = 0;
    while (!stop.load()) {
      sink += target->MightContain(rng());
      sink += target->RangeSummary(rng() % 8, 64);
    }
    EXPECT_GE(sink, 0u);
  });
  for (size_t i = 0; i + 1 < threads.size(); ++i) threads[i].join();
  stop = true;
  threads.back().join();
  for (const auto& hashes : added) {
    for (uint64_t h : hashes) ASSERT_TRUE(target->MightContain(h));
  }
  for (uint64_t h : merged_hashes) ASSERT_TRUE(target->MightContain(h));
}

INSTANTIATE_TEST_SUITE_P(Layouts, ConcurrencyShapes, ::testing::Values(FilterShape{512, 7}, FilterShape{512, 24, 6}));

TEST(Concurrency, RotationDuringAddsKeepsEveryKeyInTheWindow) {
  const ClusterSecret secret = testing::SecretFromSeed(8);
  auto params = *MakeParams("rot", 50'000, 0.01, 3, secret);
  auto set = *GenerationSet::Create(params, secret, 0);
  constexpr int kThreads = 2, kPerThread = 10'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = std::to_string(t) + ":" + std::to_string(i);
        set->Add(key);
        if (!set->MightContain(key)) std::abort();
      }
    });
  }
  threads.emplace_back([&] {
    for (uint64_t e = 1; e <= 2; ++e) EXPECT_TRUE(*set->Advance(e));
  });
  for (auto& th : threads) th.join();
  // Three generations (0, 1, 2) cover every epoch that existed: nothing lost.
  EXPECT_EQ(set->epochs(), (std::vector<uint64_t>{0, 1, 2}));
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) ASSERT_TRUE(set->MightContain(std::to_string(t) + ":" + std::to_string(i)));
  }
}

}  // namespace
}  // namespace pollen::crdt
