#include "crdt/generations.h"

#include <random>

#include <gtest/gtest.h>

#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

const ClusterSecret kSecret = testing::SecretFromSeed(42);

std::unique_ptr<GenerationSet> MakeSet(uint32_t generations, uint64_t epoch = 0) {
  absl::StatusOr<FilterParams> params = MakeParams("gens", 10'000, 0.01, generations, kSecret);
  EXPECT_TRUE(params.ok()) << params.status();
  auto set = GenerationSet::Create(*params, kSecret, epoch);
  EXPECT_TRUE(set.ok()) << set.status();
  return *std::move(set);
}

TEST(Generations, RejectsInvalidParams) {
  // Names are binary-safe up to the limit, like Redis keys.
  EXPECT_TRUE(MakeParams("", 100, 0.01, 2, kSecret).ok());
  EXPECT_TRUE(MakeParams(std::string("has space\0\xff\r\n", 13), 100, 0.01, 2, kSecret).ok());
  EXPECT_TRUE(MakeParams(std::string(kMaxFilterNameBytes, 'x'), 100, 0.01, 2, kSecret).ok());
  EXPECT_FALSE(MakeParams(std::string(kMaxFilterNameBytes + 1, 'x'), 100, 0.01, 2, kSecret).ok());
  EXPECT_FALSE(MakeParams("f", 100, 0.01, 0, kSecret).ok());
  EXPECT_FALSE(MakeParams("f", 100, 0.01, kMaxGenerations + 1, kSecret).ok());
  EXPECT_FALSE(MakeParams("f", 0, 0.01, 2, kSecret).ok());
  EXPECT_FALSE(MakeParams("f", 100, 1.0, 2, kSecret).ok());
  absl::StatusOr<FilterParams> params = MakeParams("f", 100, 0.01, 2, kSecret);
  ASSERT_TRUE(params.ok());
  FilterParams bad = *params;
  bad.filter_id ^= 1;  // another identity (a copy's, a renamed filter's) is valid
  EXPECT_TRUE(ValidateParams(bad).ok());
  bad.filter_id = kRoutingKeyId;  // but not the routing key's
  EXPECT_FALSE(ValidateParams(bad).ok());
  bad = *params;
  bad.hash_scheme = 99;
  EXPECT_FALSE(ValidateParams(bad).ok());
  // A set cannot be built under a different secret than its key id says.
  EXPECT_FALSE(GenerationSet::Create(*params, testing::SecretFromSeed(43), 0).ok());
}

TEST(Generations, CreateOpensTheWholeWindow) {
  EXPECT_EQ(MakeSet(3, 0)->epochs(), (std::vector<uint64_t>{0}));
  EXPECT_EQ(MakeSet(3, 1)->epochs(), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(MakeSet(3, 10)->epochs(), (std::vector<uint64_t>{8, 9, 10}));
}

TEST(Generations, AdvanceOpensNewAndDropsOld) {
  auto set = MakeSet(2);
  EXPECT_EQ(set->epoch(), 0u);
  EXPECT_TRUE(*set->Advance(1));
  EXPECT_EQ(set->epochs(), (std::vector<uint64_t>{0, 1}));
  EXPECT_TRUE(*set->Advance(2));
  EXPECT_EQ(set->epochs(), (std::vector<uint64_t>{1, 2}));
  // Lower or equal epochs change nothing (max-register).
  EXPECT_FALSE(*set->Advance(2));
  EXPECT_FALSE(*set->Advance(0));
  EXPECT_EQ(set->epochs(), (std::vector<uint64_t>{1, 2}));
  // A jump opens every epoch of the new window.
  EXPECT_TRUE(*set->Advance(9));
  EXPECT_EQ(set->epochs(), (std::vector<uint64_t>{8, 9}));
}

TEST(Generations, NoFalseNegativesInsideTheWindowAcrossRotation) {
  auto set = MakeSet(2);
  std::vector<std::string> old_keys, new_keys;
  for (int i = 0; i < 2000; ++i) old_keys.push_back("old-" + std::to_string(i));
  for (const auto& k : old_keys) set->Add(k);
  ASSERT_TRUE(*set->Advance(1));
  for (int i = 0; i < 2000; ++i) new_keys.push_back("new-" + std::to_string(i));
  for (const auto& k : new_keys) EXPECT_EQ(set->Add(k).slot, SlotOf(1, 0));
  for (const auto& k : old_keys) ASSERT_TRUE(set->MightContain(k)) << k;
  for (const auto& k : new_keys) ASSERT_TRUE(set->MightContain(k)) << k;
  // Once epoch 0 leaves the window, its keys are (almost all) gone.
  ASSERT_TRUE(*set->Advance(2));
  int still_there = 0;
  for (const auto& k : old_keys) still_there += set->MightContain(k);
  EXPECT_LT(still_there, 100);  // only false positives remain (~1%)
  for (const auto& k : new_keys) ASSERT_TRUE(set->MightContain(k));
}

TEST(Generations, AddAnswersWhetherTheKeyWasNew) {
  auto set = MakeSet(2);
  EXPECT_TRUE(set->Add("a").was_new);
  EXPECT_FALSE(set->Add("a").was_new);
  ASSERT_TRUE(*set->Advance(1));
  // A key seen only in the previous generation is new to the newest one.
  EXPECT_TRUE(set->Add("a").was_new);
}

TEST(Generations, EachGenerationHashesWithItsOwnKey) {
  auto set = MakeSet(3, 2);
  EXPECT_NE(set->Sub(SlotOf(0, 0))->key, set->Sub(SlotOf(1, 0))->key);
  EXPECT_NE(set->Sub(SlotOf(1, 0))->key, set->Sub(SlotOf(2, 0))->key);
  EXPECT_EQ(set->Sub(SlotOf(2, 0))->key, DeriveSipKey(kSecret, set->params().filter_id, 2));
  EXPECT_EQ(set->Sub(SlotOf(7, 0)), nullptr);
}

TEST(Generations, MergeTargetsOneLiveEpoch) {
  auto a = MakeSet(2, 1), b = MakeSet(2, 1);
  std::vector<WordBits> delta;
  a->Add("x").bits.AppendTo(delta);
  EXPECT_TRUE(b->Merge(SlotOf(1, 0), delta, nullptr).ok());
  EXPECT_TRUE(b->MightContain("x"));
  EXPECT_EQ(b->Merge(SlotOf(5, 0), delta, nullptr).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(b->Merge(SlotOf(0, 0), std::vector<WordBits>{{1ull << 40, 1}}, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Generations, BatchFormsAgreeWithSingleForms) {
  auto single = MakeSet(2, 1), batch = MakeSet(2, 1);
  std::vector<std::string> storage;
  for (int i = 0; i < 1000; ++i) storage.push_back("k" + std::to_string(i % 700));
  std::vector<std::string_view> keys(storage.begin(), storage.end());
  std::vector<KeyAdd> adds(keys.size());
  batch->AddMany(keys, adds);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(single->Add(keys[i]).was_new, adds[i].was_new) << i;
  for (int i = 0; i < 1000; ++i) storage.push_back("absent" + std::to_string(i));
  keys.assign(storage.begin(), storage.end());
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  batch->MightContainMany(keys, {found.get(), keys.size()});
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(found[i], batch->MightContain(keys[i])) << i;
}

// The batch forms' prefetch pipeline has edges at every batch length up to
// and past its depth; each length must give exactly the single forms' results,
// across two live generations (keys in the older one are still found).
TEST(Generations, BatchFormsAgreeAtEveryShortLength) {
  for (size_t n = 0; n <= 40; ++n) {
    auto single = MakeSet(2, 1), batch = MakeSet(2, 1);
    std::vector<std::string> storage;
    for (size_t i = 0; i < n; ++i) storage.push_back("old" + std::to_string(i % 30));
    std::vector<std::string_view> keys(storage.begin(), storage.end());
    std::vector<KeyAdd> adds(n);
    batch->AddMany(keys, adds);
    for (size_t i = 0; i < n; ++i) {
      const KeyAdd expected = single->Add(keys[i]);
      ASSERT_EQ(adds[i].was_new, expected.was_new) << "n=" << n << " i=" << i;
      ASSERT_EQ(adds[i].bits.block, expected.bits.block);
      ASSERT_EQ(adds[i].bits.new_bits, expected.bits.new_bits);
    }
    ASSERT_TRUE(batch->Advance(2).ok());
    std::vector<std::string> probes;
    for (size_t i = 0; i < n; ++i) probes.push_back(i % 2 ? "old" + std::to_string(i % 30) : "new" + std::to_string(i));
    std::vector<std::string_view> probe_views(probes.begin(), probes.end());
    for (size_t i = 0; i < n; i += 4) batch->Add(probe_views[i]);  // some new keys land in epoch 2
    std::unique_ptr<bool[]> found(new bool[n + 1]);
    batch->MightContainMany(probe_views, {found.get(), n});
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(found[i], batch->MightContain(probe_views[i])) << "n=" << n << " i=" << i;
      if (i % 2 == 1 || i % 4 == 0) {
        ASSERT_TRUE(found[i]) << "false negative, n=" << n << " i=" << i;
      }
    }
  }
}

}  // namespace
}  // namespace pollen::crdt
