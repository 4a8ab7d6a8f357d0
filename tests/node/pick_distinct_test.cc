// PickDistinct (node/core/rng.h): the random peer picks of gossip and
// membership. Seeded, so every expectation is deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "node/core/rng.h"

namespace pollen::node {
namespace {

TEST(PickDistinct, DistinctInRangeAndCappedAtN) {
  Rng rng(3);
  for (size_t n : {0u, 1u, 2u, 3u, 7u, 12u, 100u, 5000u}) {
    for (size_t k : {0u, 1u, 3u, 8u, 64u}) {
      const std::vector<size_t> picked = PickDistinct(rng, n, k);
      ASSERT_EQ(picked.size(), std::min(n, k)) << n << " " << k;
      const std::set<size_t> unique(picked.begin(), picked.end());
      ASSERT_EQ(unique.size(), picked.size()) << n << " " << k;
      for (size_t i : picked) ASSERT_LT(i, n);
    }
  }
}

// Both ways (rejection for k*4 <= n, Fisher-Yates above) are uniform: every
// index is picked trials*k/n times within 5% (the count's standard deviation
// is about 1% of its mean here).
TEST(PickDistinct, EveryIndexEquallyLikely) {
  Rng rng(11);
  for (size_t n : {6u, 40u}) {  // k = 3: Fisher-Yates at n = 6, rejection at n = 40
    constexpr size_t kTrials = 200000, kPick = 3;
    std::vector<size_t> hits(n, 0);
    for (size_t t = 0; t < kTrials; ++t) {
      for (size_t i : PickDistinct(rng, n, kPick)) ++hits[i];
    }
    const double expected = static_cast<double>(kTrials * kPick) / static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(static_cast<double>(hits[i]), expected, 0.05 * expected) << "n=" << n << " index " << i;
    }
  }
}

TEST(PickDistinct, SameSeedSamePicks) {
  Rng a(5), b(5);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(PickDistinct(a, 1000, 3), PickDistinct(b, 1000, 3));
}

}  // namespace
}  // namespace pollen::node
