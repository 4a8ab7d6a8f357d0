// Snapshots written before hash scheme 3 existed still load, answer as they
// did, and keep their layout and rate schedule as they grow. The files in
// testdata/ were written by commit b035a25e (its crdt/ library, a 30-line
// program: secret SecretFromSeed(2026), epoch 5, keys "old-key-<i>"):
//   fixed_1e-4.snap     "old-fixed", 2000 keys at 1e-4, fixed size: 86 blocks, k = 12 (one block per key)
//   scaling_1pct.snap   "old-scaling", capacity 500 at 1%, expansion 2, 3000 keys: 3 layers
#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "crdt/generations.h"
#include "crdt/snapshot.h"
#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(POLLEN_CRDT_TESTDATA) + "/" + name, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

struct OldFile {
  const char* file;
  int keys;
  double fpr;
  uint32_t layers;
};

class OldSnapshot : public ::testing::TestWithParam<OldFile> {};

TEST_P(OldSnapshot, LoadsAnswersAndGrowsAsBefore) {
  const OldFile& old = GetParam();
  const ClusterSecret secret = testing::SecretFromSeed(2026);
  const std::string bytes = ReadTestData(old.file);
  ASSERT_FALSE(bytes.empty()) << old.file;
  absl::StatusOr<std::unique_ptr<GenerationSet>> set = DecodeSnapshot(bytes, secret, nullptr);
  ASSERT_TRUE(set.ok()) << set.status();
  const FilterParams& params = (*set)->params();
  EXPECT_EQ(params.hash_scheme, kHashSchemeSipBlocked2);
  EXPECT_EQ(params.shape.parts, 1u);
  EXPECT_EQ((*set)->layers(5), old.layers);
  // Written back, the same bytes: nothing about a scheme 2 filter changed.
  EXPECT_EQ(EncodeSnapshot(**set), bytes);
  for (int i = 0; i < old.keys; ++i) {
    ASSERT_TRUE((*set)->MightContain("old-key-" + std::to_string(i))) << i;
  }
  int false_positives = 0;
  for (int i = 0; i < 100'000; ++i) false_positives += (*set)->MightContain("stranger-" + std::to_string(i));
  // The model expects ~10 and ~1000 (fixed secret and keys: deterministic);
  // a misread layout would answer ~100% or miss the keys above.
  EXPECT_LE(false_positives, 100'000 * old.fpr * 3 + 10);
  // Its layers keep scheme 2's schedule and layout: p (1 - r) r^L, one block.
  if (params.scaling()) {
    for (uint32_t layer = 0; layer < 6; ++layer) {
      const double rate = params.fpr * (1 - kTighteningRatio) * std::pow(kTighteningRatio, layer);
      EXPECT_DOUBLE_EQ(LayerFpr(params, layer), rate);
      EXPECT_EQ(*LayerShape(params, layer), *ChooseShape(LayerCapacity(params, layer), rate, Layout::kOneBlock));
    }
    for (int i = 0; i < 10'000; ++i) (*set)->Add("new-key-" + std::to_string(i));
    EXPECT_GT((*set)->layers(5), old.layers);
    for (int i = 0; i < old.keys; ++i) ASSERT_TRUE((*set)->MightContain("old-key-" + std::to_string(i))) << i;
    for (int i = 0; i < 10'000; ++i) ASSERT_TRUE((*set)->MightContain("new-key-" + std::to_string(i))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(WrittenByB035a25e, OldSnapshot,
                         ::testing::Values(OldFile{"fixed_1e-4.snap", 2000, 1e-4, 1},
                                           OldFile{"scaling_1pct.snap", 3000, 0.01, 3}));

}  // namespace
}  // namespace pollen::crdt
