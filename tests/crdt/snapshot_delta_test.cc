// Dirty marks (BlockedFilter) and snapshot deltas (crdt/snapshot_delta.h):
// what marks a block, round trips over a base, both block forms, every
// corruption refused, and the property the incremental snapshots rest on:
// deltas taken while adds run, ORed into the base, give the final state.
#include "crdt/snapshot_delta.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "crdt/snapshot.h"
#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

const ClusterSecret kSecret = testing::SecretFromSeed(5);

std::vector<uint64_t> TakeAll(BlockedFilter& f) {
  std::vector<uint64_t> marks(f.dirty_word_count());
  f.TakeDirty(0, marks);
  std::vector<uint64_t> blocks;
  for (size_t i = 0; i < marks.size(); ++i) {
    for (uint64_t rest = marks[i]; rest != 0; rest &= rest - 1) blocks.push_back(i * 64 + std::countr_zero(rest));
  }
  return blocks;
}

TEST(DirtyMarks, NewBitsMarkTheirBlockAndTakeClearsThem) {
  auto f = *BlockedFilter::Create(FilterShape{1000, 7});
  EXPECT_TRUE(TakeAll(*f).empty());
  const AddResult a = f->Add(12345);
  EXPECT_EQ(TakeAll(*f), std::vector<uint64_t>{a.block});
  EXPECT_TRUE(TakeAll(*f).empty());                  // taken
  EXPECT_TRUE(f->Add(12345).was_present());           // no new bit: no mark
  EXPECT_TRUE(TakeAll(*f).empty());
  std::vector<AddResult> out(300);
  std::vector<uint64_t> hashes(300);
  for (size_t i = 0; i < hashes.size(); ++i) hashes[i] = 0x9e3779b97f4a7c15ULL * (i + 7);
  f->AddMany(hashes, out);                            // more than one batch of 64
  std::vector<uint64_t> want;
  for (const AddResult& r : out) {
    if (!r.was_present()) want.push_back(r.block);
  }
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  EXPECT_EQ(TakeAll(*f), want);
  // Merge marks only the blocks whose words gained a bit.
  const uint64_t before = f->LoadWord(8 * 3);
  ASSERT_TRUE(f->Merge(std::vector<WordBits>{{8 * 3, before}, {8 * 900 + 2, 1}}, nullptr).ok());
  EXPECT_EQ(TakeAll(*f), std::vector<uint64_t>{900});
  auto g = *BlockedFilter::Create(FilterShape{1000, 7});
  ASSERT_TRUE(g->Merge(std::vector<WordBits>{{8 * 17, 6}, {8 * 999 + 7, 1ULL << 63}}, nullptr).ok());
  ASSERT_TRUE(f->MergeFrom(*g, nullptr).ok());
  EXPECT_EQ(TakeAll(*f), (std::vector<uint64_t>{17, 999}));
  f->Add(777);
  f->ClearDirty();
  EXPECT_TRUE(TakeAll(*f).empty());
}

std::unique_ptr<GenerationSet> MakeSet(const std::string& name, uint64_t capacity) {
  absl::StatusOr<FilterParams> p = MakeParams(name, capacity, 0.01, 2, kSecret);
  EXPECT_TRUE(p.ok());
  return *GenerationSet::Create(*p, kSecret, 3);
}

std::vector<std::shared_ptr<const SubFilter>> LiveSubs(const GenerationSet& set) {
  std::vector<std::shared_ptr<const SubFilter>> subs;
  for (uint64_t slot : set.slots()) subs.push_back(set.Sub(slot));
  return subs;
}

void ClearMarks(const GenerationSet& set) {
  for (const auto& sub : LiveSubs(set)) sub->filter->ClearDirty();
}

std::string Delta(const GenerationSet& set, uint64_t* blocks = nullptr) {
  std::string out;
  const absl::Status s = StreamDelta(LiveSubs(set), [&](std::string_view b) {
    out.append(b);
    return absl::OkStatus();
  }, blocks);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// A base, then two deltas ORed in (in either order): the live state.
TEST(SnapshotDelta, BaseAndDeltasRoundTrip) {
  auto set = MakeSet("d", 20'000);
  for (int i = 0; i < 5'000; ++i) set->Add("a" + std::to_string(i));
  ASSERT_TRUE(*set->Advance(4));  // two generations: a delta spans both
  for (int i = 0; i < 500; ++i) set->Add("b" + std::to_string(i));
  ClearMarks(*set);
  const std::string base = EncodeSnapshot(*set);
  for (int i = 0; i < 300; ++i) set->Add("c" + std::to_string(i));
  uint64_t blocks1 = 0, blocks2 = 0, none = 7;
  const std::string d1 = Delta(*set, &blocks1);
  for (int i = 0; i < 300; ++i) set->Add("d" + std::to_string(i));
  const std::string d2 = Delta(*set, &blocks2);
  EXPECT_EQ(Delta(*set, &none).size(), 8 + 4 + 2 * (8 + 4 + 1) + 32u);  // nothing changed: empty lists
  EXPECT_EQ(none, 0u);
  EXPECT_GT(blocks1, 150u);  // 300 keys in ~390 blocks: some share one
  EXPECT_LT(d1.size(), blocks1 * 70);
  for (bool reversed : {false, true}) {
    auto back = *DecodeSnapshot(base, kSecret, &set->params());
    for (const std::string* d : reversed ? std::vector{&d2, &d1} : std::vector{&d1, &d2}) {
      absl::StatusOr<DeltaContents> c = DecodeDelta(*d, *back);
      ASSERT_TRUE(c.ok()) << c.status();
      for (const auto& [slot, words] : *c) ASSERT_TRUE(back->Merge(slot, words, nullptr).ok());
    }
    for (uint64_t slot : set->slots()) EXPECT_TRUE(back->Sub(slot)->filter->SameContents(*set->Sub(slot)->filter));
  }
}

// A small, nearly full filter: its blocks go as words (form 0xFF), a sparse
// one's as positions; both decode to the same bits.
TEST(SnapshotDelta, DenseBlocksGoAsWords) {
  auto set = MakeSet("dense", 200);
  ClearMarks(*set);
  const std::string base = EncodeSnapshot(*set);
  for (int i = 0; i < 2'000; ++i) set->Add("k" + std::to_string(i));
  uint64_t blocks = 0;
  const std::string d = Delta(*set, &blocks);
  EXPECT_GT(d.size(), blocks * 64);  // words, not positions
  auto back = *DecodeSnapshot(base, kSecret, &set->params());
  absl::StatusOr<DeltaContents> c = DecodeDelta(d, *back);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const auto& [slot, words] : *c) ASSERT_TRUE(back->Merge(slot, words, nullptr).ok());
  for (uint64_t slot : set->slots()) EXPECT_TRUE(back->Sub(slot)->filter->SameContents(*set->Sub(slot)->filter));
}

TEST(SnapshotDelta, RefusesEveryCorruptionAndForeignSlots) {
  auto set = MakeSet("c", 2'000);
  ClearMarks(*set);
  for (int i = 0; i < 20; ++i) set->Add("k" + std::to_string(i));
  const std::string d = Delta(*set);
  ASSERT_TRUE(DecodeDelta(d, *set).ok());
  for (size_t i = 0; i < d.size(); ++i) {
    std::string bad = d;
    bad[i] ^= 0x20;
    EXPECT_FALSE(DecodeDelta(bad, *set).ok()) << i;
  }
  for (size_t n = 0; n < d.size(); ++n) EXPECT_FALSE(DecodeDelta(d.substr(0, n), *set).ok()) << n;
  EXPECT_FALSE(DecodeDelta(d + "x", *set).ok());
  // The same delta against a set whose generations moved on: its slots are not live.
  auto later = MakeSet("c", 2'000);
  ASSERT_TRUE(*later->Advance(10));
  absl::StatusOr<DeltaContents> foreign = DecodeDelta(d, *later);
  EXPECT_FALSE(foreign.ok());
  EXPECT_TRUE(absl::IsDataLoss(foreign.status())) << foreign.status();
}

// The incremental snapshots' invariant, under real concurrency: deltas taken
// while another thread adds, plus one after it stops, ORed into the base,
// give exactly the final state (a block whose bits a delta missed stays
// marked for a later one).
TEST(SnapshotDelta, DeltasTakenDuringAddsMissNothing) {
  auto set = MakeSet("live", 400'000);
  for (int i = 0; i < 10'000; ++i) set->Add("base" + std::to_string(i));
  ClearMarks(*set);
  const std::string base = EncodeSnapshot(*set);
  std::atomic<bool> done{false};
  std::thread adder([&] {
    std::vector<std::string> keys(64);
    std::vector<std::string_view> views(64);
    std::vector<KeyAdd> out(64);
    for (int round = 0; round < 3'000; ++round) {
      for (size_t i = 0; i < keys.size(); ++i) {
        keys[i] = "r" + std::to_string(round) + "." + std::to_string(i);
        views[i] = keys[i];
      }
      if (round % 2 == 0) {
        set->AddMany(views, out);
      } else {
        for (const auto& k : views) set->Add(k);
      }
    }
    done = true;
  });
  std::vector<std::string> deltas;
  while (!done.load()) deltas.push_back(Delta(*set));
  adder.join();
  EXPECT_GT(deltas.size(), 1u);
  deltas.push_back(Delta(*set));
  auto back = *DecodeSnapshot(base, kSecret, &set->params());
  for (const std::string& d : deltas) {
    absl::StatusOr<DeltaContents> c = DecodeDelta(d, *back);
    ASSERT_TRUE(c.ok()) << c.status();
    for (const auto& [slot, words] : *c) ASSERT_TRUE(back->Merge(slot, words, nullptr).ok());
  }
  for (uint64_t slot : set->slots()) EXPECT_TRUE(back->Sub(slot)->filter->SameContents(*set->Sub(slot)->filter));
}

}  // namespace
}  // namespace pollen::crdt
