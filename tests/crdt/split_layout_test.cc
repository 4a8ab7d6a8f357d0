// Shapes of several parts (hash scheme 3's layout, crdt/sizing.h): a key's k
// bits spread over `parts` blocks. The promises of crdt/blocked_filter.h must
// hold for them exactly as for one block: no false negatives, Add reports
// exactly the bits it set (in every part's block), batch forms agree with
// single ones, and every changed block is marked dirty.
#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "crdt/block_probe.h"
#include "crdt/blocked_filter.h"
#include "crdt/generations.h"

namespace pollen::crdt {
namespace {

std::unique_ptr<BlockedFilter> Make(uint64_t blocks, uint32_t k, uint32_t parts) {
  absl::StatusOr<std::unique_ptr<BlockedFilter>> f = BlockedFilter::Create({blocks, k, parts});
  EXPECT_TRUE(f.ok()) << f.status();
  return *std::move(f);
}

// The split shapes hash scheme 3 makes, and two small ones where parts often share a block.
const FilterShape kShapes[] = {{4096, 12, 4}, {4096, 16, 4}, {4096, 18, 6}, {4096, 24, 6}, {1, 12, 4}, {3, 24, 6}};

TEST(SplitLayout, RejectsPartsThatDoNotDivideK) {
  EXPECT_FALSE(BlockedFilter::Create({64, 10, 4}).ok());
  EXPECT_FALSE(BlockedFilter::Create({64, 12, 0}).ok());
  EXPECT_FALSE(BlockedFilter::Create({64, 14, kMaxParts + 1}).ok());
  EXPECT_FALSE(BlockedFilter::Create({64, 24, 2}).ok());  // 12 bits in a part: more than AddResult packs
  EXPECT_TRUE(BlockedFilter::Create({64, 12, 4}).ok());
}

TEST(SplitLayout, NoFalseNegatives) {
  std::mt19937_64 rng(5);
  for (const FilterShape& shape : kShapes) {
    auto f = Make(shape.blocks, shape.k, shape.parts);
    std::vector<uint64_t> hashes(20000);
    for (uint64_t& h : hashes) h = rng();
    for (size_t i = 0; i < hashes.size(); ++i) f->Add(hashes[i]);
    for (uint64_t h : hashes) ASSERT_TRUE(f->MightContain(h)) << shape.k << "/" << shape.parts;
  }
}

// Each part sets k / parts bits of PartHash(h, i)'s block; the result names
// exactly the bits that were clear before, part by part.
TEST(SplitLayout, AddReportsExactlyTheNewBitsOfEveryPart) {
  std::mt19937_64 rng(6);
  // Small filters: every add compares all words before and after.
  for (const FilterShape& shape : {FilterShape{256, 12, 4}, FilterShape{256, 24, 6}, FilterShape{1, 12, 4},
                                   FilterShape{3, 24, 6}}) {
    auto f = Make(shape.blocks, shape.k, shape.parts);
    for (int i = 0; i < 1500; ++i) {
      const uint64_t h = rng();
      std::vector<uint64_t> before(f->word_count());
      for (uint64_t w = 0; w < f->word_count(); ++w) before[w] = f->LoadWord(w);
      const bool present = f->MightContain(h);
      const AddResult r = f->Add(h);
      ASSERT_EQ(r.was_present(), present);
      if (present) continue;
      ASSERT_EQ(r.parts, shape.parts);
      std::vector<uint64_t> expected = before;
      for (uint32_t p = 0; p < shape.parts; ++p) {
        const uint64_t part_hash = probe::PartHash(h, p);
        ASSERT_EQ(r.part_block(p), f->BlockOf(part_hash));
        const auto masks = f->MasksOf(part_hash);
        uint32_t bits = 0;
        for (uint64_t m : masks) bits += static_cast<uint32_t>(std::popcount(m));
        ASSERT_LE(bits, shape.k / shape.parts);
        ASSERT_GE(bits, 1u);
        for (uint32_t w = 0; w < kWordsPerBlock; ++w) expected[r.part_block(p) * kWordsPerBlock + w] |= masks[w];
      }
      std::vector<WordBits> reported;
      r.AppendTo(reported);
      std::vector<uint64_t> rebuilt = before;
      for (const WordBits& w : reported) {
        ASSERT_EQ(before[w.index] & w.bits, 0u) << "reported a bit that was set already";
        rebuilt[w.index] |= w.bits;
      }
      for (uint64_t w = 0; w < f->word_count(); ++w) {
        ASSERT_EQ(f->LoadWord(w), expected[w]) << "word " << w;
        ASSERT_EQ(rebuilt[w], expected[w]) << "word " << w;
      }
    }
  }
}

TEST(SplitLayout, BatchFormsAgreeWithSingleForms) {
  std::mt19937_64 rng(7);
  for (const FilterShape& shape : kShapes) {
    auto single = Make(shape.blocks, shape.k, shape.parts);
    auto batch = Make(shape.blocks, shape.k, shape.parts);
    std::vector<uint64_t> hashes(5000);
    for (uint64_t& h : hashes) h = rng();
    for (size_t i = 0; i < hashes.size(); i += 3) hashes[i] = hashes[i / 2];  // repeats
    std::vector<AddResult> results(hashes.size());
    batch->AddMany(hashes, results);
    for (size_t i = 0; i < hashes.size(); ++i) {
      const AddResult r = single->Add(hashes[i]);
      ASSERT_EQ(r.was_present(), results[i].was_present()) << i;
      if (r.was_present()) continue;
      std::vector<WordBits> a, b;
      r.AppendTo(a);
      results[i].AppendTo(b);
      ASSERT_EQ(a, b) << i;
    }
    EXPECT_TRUE(single->SameContents(*batch));
    std::vector<uint64_t> probes(hashes);
    for (size_t i = 0; i < 5000; ++i) probes.push_back(rng());
    std::unique_ptr<bool[]> many(new bool[probes.size()]);
    batch->MightContainMany(probes, std::span<bool>(many.get(), probes.size()));
    for (size_t i = 0; i < probes.size(); ++i) ASSERT_EQ(many[i], batch->MightContain(probes[i])) << i;
  }
}

// Every block an add changed is marked, in every part (so an incremental
// snapshot carries all of a key's bits), and none other.
TEST(SplitLayout, EveryChangedBlockIsMarkedDirty) {
  std::mt19937_64 rng(8);
  auto f = Make(8192, 24, 6);
  std::vector<uint64_t> hashes(700);
  for (uint64_t& h : hashes) h = rng();
  std::vector<AddResult> out(hashes.size());
  f->AddMany(std::span(hashes).first(350), std::span(out).first(350));
  for (size_t i = 350; i < hashes.size(); ++i) out[i] = f->Add(hashes[i]);
  std::set<uint64_t> changed;
  for (const AddResult& r : out) {
    std::vector<WordBits> words;
    r.AppendTo(words);
    for (const WordBits& w : words) changed.insert(w.index / kWordsPerBlock);
  }
  std::vector<uint64_t> marks(f->dirty_word_count());
  f->TakeDirty(0, marks);
  std::set<uint64_t> marked;
  for (uint64_t i = 0; i < marks.size(); ++i) {
    for (uint64_t m = marks[i]; m != 0; m &= m - 1) marked.insert(64 * i + static_cast<uint64_t>(std::countr_zero(m)));
  }
  EXPECT_EQ(marked, changed);
}

}  // namespace
}  // namespace pollen::crdt
