// Scaling filters (crdt/generations.h): a generation grows a stack of layers,
// each expansion times larger and tighter than the last. Checked here: the
// layer count follows RedisBloom's rule (open the next layer when the newest
// holds its capacity), no key is ever lost across growth, the compound
// false-positive rate stays under the rate asked for, growth is a
// max-register, and snapshots carry the whole stack.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "crdt/generations.h"
#include "crdt/snapshot.h"

namespace pollen::crdt {
namespace {

ClusterSecret Secret() {
  ClusterSecret s;
  s.bytes.fill(7);
  return s;
}

std::unique_ptr<GenerationSet> Scaling(uint64_t capacity, double fpr, uint32_t expansion, uint32_t generations = 1) {
  auto params = MakeParams("grow", capacity, fpr, generations, Secret(), expansion);
  EXPECT_TRUE(params.ok()) << params.status();
  auto set = GenerationSet::Create(*params, Secret(), 0);
  EXPECT_TRUE(set.ok()) << set.status();
  return *std::move(set);
}

// RedisBloom's rule: n distinct keys need the fewest layers whose capacities
// capacity * expansion^i sum to at least n (Pollen stops at kMaxLayers: with
// expansion 2 that is 2^32 times the first capacity).
uint32_t ExpectedLayers(uint64_t capacity, uint32_t expansion, uint64_t n) {
  uint32_t layers = 1;
  for (uint64_t total = capacity, cap = capacity; total < n; ++layers) {
    cap *= expansion;
    total += cap;
  }
  return std::min(layers, kMaxLayers);
}

TEST(Scaling, LayerRatesSumUnderTheRequestedRate) {
  for (uint32_t scheme : {kHashSchemeSipBlocked2, kHashSchemeSipSplit3}) {
    SCOPED_TRACE(scheme);
    auto params = *MakeParams("p", 1000, 0.01, 1, Secret(), 2, scheme);
    // Scheme 2 sizes layer 0 at p / 10; scheme 3 at 0.65 p, as a filter
    // reserved at its final capacity is that one layer (RedisBloom: p / 2).
    EXPECT_DOUBLE_EQ(LayerFpr(params, 0), scheme == kHashSchemeSipBlocked2 ? 0.001 : 0.0065);
    double sum = 0;
    for (uint32_t layer = 0; layer < kMaxLayers; ++layer) {
      EXPECT_EQ(LayerCapacity(params, layer), std::min<uint64_t>(1000ull << layer, UINT64_MAX));
      sum += LayerFpr(params, layer);
      if (layer > 0) {
        EXPECT_LT(LayerFpr(params, layer), LayerFpr(params, layer - 1));
      }
    }
    EXPECT_LT(sum, 0.01);
    EXPECT_EQ(*LayerShape(params, 0), params.shape);
    EXPECT_FALSE(LayerShape(params, kMaxLayers).ok());
    auto fixed = *MakeParams("f", 1000, 0.01, 1, Secret(), 0, scheme);
    EXPECT_FALSE(LayerShape(fixed, 1).ok());
    // Parameters that do not size layer 0 as the capacity and rate say are refused.
    params.capacity = 2000;
    EXPECT_FALSE(ValidateParams(params).ok());
  }
  // The same sizing under the other scheme is another shape: a peer reading
  // one scheme's parameters as the other's refuses them.
  auto two = *MakeParams("p", 1000, 0.01, 1, Secret(), 2, kHashSchemeSipBlocked2);
  two.hash_scheme = kHashSchemeSipSplit3;
  EXPECT_FALSE(ValidateParams(two).ok());
}

TEST(Scaling, GrowsAsRedisBloomAndNeverLosesAKey) {
  for (uint32_t expansion : {1u, 2u, 4u}) {
    auto set = Scaling(100, 0.01, expansion);
    std::vector<std::string> keys;
    for (int i = 0; i < 5000; ++i) keys.push_back("key-" + std::to_string(i));
    uint64_t added = 0;
    for (const std::string& k : keys) added += set->Add(k).was_new ? 1 : 0;
    EXPECT_EQ(set->layers(0), ExpectedLayers(100, expansion, added)) << "expansion " << expansion;
    for (const std::string& k : keys) ASSERT_TRUE(set->MightContain(k)) << k;
    std::vector<std::string_view> views(keys.begin(), keys.end());
    std::unique_ptr<bool[]> found(new bool[views.size()]);
    set->MightContainMany(views, std::span<bool>(found.get(), views.size()));
    for (size_t i = 0; i < views.size(); ++i) ASSERT_TRUE(found[i]);
    // Adding them again: all present, nothing new, no growth.
    const uint32_t layers = set->layers(0);
    for (const std::string& k : keys) EXPECT_FALSE(set->Add(k).was_new);
    EXPECT_EQ(set->layers(0), layers);
  }
}

// A batch test over a stack of layers in two generations (each layer one
// batch call, the keys found in newer layers dropped before older ones) must
// answer exactly as the single-key test, at lengths around the prefetch depth.
TEST(Scaling, BatchTestsOfAStackAgreeWithSingleTests) {
  auto set = Scaling(50, 0.01, 2, /*generations=*/2);
  std::vector<std::string> keys;
  for (int i = 0; i < 1500; ++i) keys.push_back("old-" + std::to_string(i));
  for (const std::string& k : keys) set->Add(k);
  ASSERT_TRUE(set->Advance(1).ok());
  for (int i = 0; i < 700; ++i) {
    keys.push_back("new-" + std::to_string(i));
    set->Add(keys.back());
  }
  ASSERT_GE(set->layers(0), 5u);
  ASSERT_GE(set->layers(1), 4u);
  for (int i = 0; i < 2000; ++i) keys.push_back("stranger-" + std::to_string(i));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  std::vector<std::string_view> mixed = views;
  std::shuffle(mixed.begin(), mixed.end(), std::mt19937_64(4));
  for (size_t n : {size_t{1}, size_t{127}, size_t{128}, size_t{129}, mixed.size()}) {
    std::unique_ptr<bool[]> found(new bool[n]);
    const auto probe = std::span<const std::string_view>(mixed).first(n);
    set->MightContainMany(probe, std::span<bool>(found.get(), n));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(found[i], set->MightContain(probe[i])) << "n=" << n << " i=" << i;
  }
  std::unique_ptr<bool[]> found(new bool[views.size()]);
  set->MightContainMany(views, std::span<bool>(found.get(), views.size()));
  for (size_t i = 0; i < 2200; ++i) ASSERT_TRUE(found[i]) << "false negative: " << keys[i];
}

TEST(Scaling, BatchAddsGrowLikeSingleAdds) {
  auto one = Scaling(100, 0.01, 2), many = Scaling(100, 0.01, 2);
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) keys.push_back("k" + std::to_string(i));
  std::vector<std::string_view> views(keys.begin(), keys.end());
  std::vector<KeyAdd> out(views.size());
  many->AddMany(views, out);
  for (const std::string& k : keys) one->Add(k);
  EXPECT_EQ(one->slots(), many->slots());
  for (uint64_t slot : one->slots()) EXPECT_TRUE(one->Sub(slot)->filter->SameContents(*many->Sub(slot)->filter));
  for (const std::string& k : keys) ASSERT_TRUE(many->MightContain(k));
}

// 1,000 -> 1,000,000 keys (10 layers at expansion 2). The layers' rates sum to
// 0.01 * (1 - 0.9^10) = 0.0065 at full capacity; 10^6 non-members give a
// binomial standard deviation of ~8e-5, so 0.0105 leaves >50 of them for the
// sizing model's own error.
TEST(Scaling, CompoundFalsePositiveRateStaysUnderTheRequestedRate) {
  auto set = Scaling(1000, 0.01, 2);
  std::vector<std::string> keys(1'000'000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = "member-" + std::to_string(i);
  std::vector<std::string_view> views(keys.begin(), keys.end());
  std::vector<KeyAdd> out(views.size());
  set->AddMany(views, out);
  EXPECT_EQ(set->layers(0), ExpectedLayers(1000, 2, 1'000'000));
  for (size_t i = 0; i < views.size(); i += 997) ASSERT_TRUE(set->MightContain(views[i]));
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = "stranger-" + std::to_string(i);
  std::vector<std::string_view> strangers(keys.begin(), keys.end());
  std::unique_ptr<bool[]> found(new bool[strangers.size()]);
  set->MightContainMany(strangers, std::span<bool>(found.get(), strangers.size()));
  size_t hits = 0;
  for (size_t i = 0; i < strangers.size(); ++i) hits += found[i] ? 1 : 0;
  const double rate = static_cast<double>(hits) / static_cast<double>(strangers.size());
  EXPECT_LE(rate, 0.0105) << hits << " false positives in " << strangers.size();
}

TEST(Scaling, GrowIsAMaxRegisterAndFixedFiltersDoNotGrow) {
  auto set = Scaling(100, 0.01, 2);
  EXPECT_TRUE(*set->Grow(0, 3));
  EXPECT_FALSE(*set->Grow(0, 2));
  EXPECT_FALSE(*set->Grow(0, 3));
  EXPECT_EQ(set->layers(0), 3u);
  EXPECT_EQ(set->Grow(5, 2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(set->Grow(0, kMaxLayers + 1).ok());
  auto fixed = GenerationSet::Create(*MakeParams("f", 100, 0.01, 1, Secret()), Secret(), 0);
  EXPECT_FALSE((*fixed)->Grow(0, 2).ok());
  // A merge into a layer not opened yet is refused; after Grow it lands.
  std::vector<WordBits> words{{0, 1}};
  EXPECT_EQ(set->Merge(SlotOf(0, 3), words, nullptr).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(*set->Grow(0, 4));
  EXPECT_TRUE(set->Merge(SlotOf(0, 3), words, nullptr).ok());
}

TEST(Scaling, RotationOpensAGenerationAtLayerZero) {
  auto set = Scaling(100, 0.01, 2, /*generations=*/2);
  for (int i = 0; i < 1000; ++i) set->Add("old-" + std::to_string(i));
  const uint32_t grown = set->layers(0);
  EXPECT_GT(grown, 1u);
  ASSERT_TRUE(*set->Advance(1));
  EXPECT_EQ(set->layers(1), 1u);
  EXPECT_EQ(set->layers(0), grown);  // the old generation keeps its stack
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(set->MightContain("old-" + std::to_string(i)));
  EXPECT_EQ(EpochOfSlot(set->Add("new").slot), 1u);
}

TEST(Scaling, SnapshotsCarryTheWholeStack) {
  auto set = Scaling(100, 0.01, 2, 2);
  for (int i = 0; i < 700; ++i) set->Add("a" + std::to_string(i));
  ASSERT_TRUE(*set->Advance(1));
  for (int i = 0; i < 300; ++i) set->Add("b" + std::to_string(i));
  const std::string bytes = EncodeSnapshot(*set);
  auto back = DecodeSnapshot(bytes, Secret(), &set->params());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->slots(), set->slots());
  for (uint64_t slot : set->slots()) EXPECT_TRUE((*back)->Sub(slot)->filter->SameContents(*set->Sub(slot)->filter));
  // Growth resumes where it stopped: the newest layer's count comes back
  // from its bits, so the next keys do not overfill it.
  const auto newest = (*back)->NewestSub();
  EXPECT_GT(newest->items.load(), 0u);
}

TEST(Scaling, ConcurrentAddersAcrossGrowthLoseNothing) {
  auto set = Scaling(64, 0.01, 2);
  constexpr int kThreads = 4, kKeys = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&set, t] {
      for (int i = 0; i < kKeys; ++i) set->Add("t" + std::to_string(t) + "-" + std::to_string(i));
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kKeys; ++i) ASSERT_TRUE(set->MightContain("t" + std::to_string(t) + "-" + std::to_string(i)));
  }
  // Racing adders may overshoot a layer by the adds in flight, never grow it twice.
  EXPECT_LE(set->layers(0), ExpectedLayers(64, 2, kThreads * kKeys));
  EXPECT_GE(set->layers(0), ExpectedLayers(64, 2, kThreads * kKeys) - 1);
}

}  // namespace
}  // namespace pollen::crdt
