// Statistical check of the false-positive rate against the blocked model.
//
// Each case inserts n = design capacity keys and probes N = 2,000,000 keys that
// were never inserted. Two sources of noise: the probes (binomial, variance
// N q (1 - q) with q the model FPR) and the filter itself (its true FPR is the
// mean of f(J_b) over B blocks with Poisson loads J_b, variance Var f(J) / B,
// which at these sizes is as large as the binomial part). The 99.9% interval is
// N q +- 3.29 sqrt(N q (1 - q) + N^2 Var f(J) / B). The secret and keys are
// fixed, so the result is deterministic: this test cannot flake, only be wrong.
#include <cmath>

#include <gtest/gtest.h>

#include "crdt/generations.h"
#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

// Var f(J) for J ~ Poisson(parts * n / blocks), f the per-block FPR of one
// part (k / parts bits) in the model.
double BlockFprVariance(FilterShape shape, double n) {
  const double lambda = n * shape.parts / shape.blocks;
  const uint32_t h = shape.k / shape.parts;
  double m1 = 0, m2 = 0;
  for (double j = 0; j < lambda + 12 * std::sqrt(lambda) + 30; ++j) {
    const double pmf = std::exp(-lambda + j * std::log(lambda) - std::lgamma(j + 1));
    const double f = std::pow(1 - std::pow(1 - 1.0 / kBlockBits, j * h), h);
    m1 += pmf * f;
    m2 += pmf * f * f;
  }
  return m2 - m1 * m1;
}

// Variance of the filter's true FPR. One part: the mean F of f over the
// blocks, Var f(J) / blocks. Several: a non-member's parts land in
// independent blocks, so the FPR is F^parts, and by the delta method its
// variance is (parts F^(parts - 1))^2 Var F.
double FilterFprVariance(FilterShape shape, double n) {
  const double q = ExpectedFpr(shape, n);
  const double f = std::pow(q, 1.0 / shape.parts);
  const double slope = shape.parts * std::pow(f, shape.parts - 1.0);
  return slope * slope * BlockFprVariance(shape, n) / shape.blocks;
}

struct FprCase {
  uint64_t capacity;
  double p;
  uint32_t hash_scheme;  // its layout: one block (2) or split (3)
};

class FprTest : public ::testing::TestWithParam<FprCase> {};

TEST_P(FprTest, MeasuredFprIsInsideModelIntervalAndUnderTarget) {
  const auto [capacity, p, hash_scheme] = GetParam();
  const ClusterSecret secret = testing::SecretFromSeed(99);
  absl::StatusOr<FilterParams> params = MakeParams("fpr", capacity, p, 1, secret, 0, hash_scheme);
  ASSERT_TRUE(params.ok()) << params.status();
  auto set = GenerationSet::Create(*params, secret, 0);
  ASSERT_TRUE(set.ok());
  for (uint64_t i = 0; i < capacity; ++i) (*set)->Add("member-" + std::to_string(i));

  constexpr uint64_t kProbes = 2'000'000;
  uint64_t false_positives = 0;
  for (uint64_t i = 0; i < kProbes; ++i) {
    false_positives += (*set)->MightContain("stranger-" + std::to_string(i));
  }
  const double q = ExpectedFpr(params->shape, static_cast<double>(capacity));
  const double mean = kProbes * q;
  const double filter_variance = FilterFprVariance(params->shape, capacity);
  const double half_width = 3.29 * std::sqrt(kProbes * q * (1 - q) + double(kProbes) * kProbes * filter_variance);
  const double measured = static_cast<double>(false_positives) / kProbes;
  std::printf("capacity=%lu p=%g scheme=%u blocks=%lu k=%u parts=%u bits/key=%.3f model=%.5f%% measured=%.5f%%\n",
              capacity, p, hash_scheme, params->shape.blocks, params->shape.k, params->shape.parts,
              double(params->shape.bits()) / capacity, q * 100, measured * 100);
  EXPECT_LE(q, p);
  EXPECT_GE(false_positives, mean - half_width);
  EXPECT_LE(false_positives, mean + half_width);
  // Not above p beyond the interval's noise (at 1e-5 the count is ~20, where
  // a fixed 10% margin would be noise too).
  EXPECT_LE(false_positives, kProbes * p + half_width);
}

// The split cases cover one part (1%), four (0.1%: k = 12) and six (k = 18
// at 1e-5, where 2,000,000 probes expect ~20 false positives: a wide but
// still two-sided interval). 1e-7 needs 10^9 probes: bench_filter's
// SplitFprAt1e7 (docs/crdt.md, "Layouts").
INSTANTIATE_TEST_SUITE_P(DesignCapacity, FprTest,
                         ::testing::Values(FprCase{1'000'000, 0.01, kHashSchemeSipBlocked2},
                                           FprCase{1'000'000, 0.001, kHashSchemeSipBlocked2},
                                           FprCase{1'000'000, 0.01, kHashSchemeSipSplit3},
                                           FprCase{1'000'000, 0.001, kHashSchemeSipSplit3},
                                           FprCase{200'000, 0.00001, kHashSchemeSipSplit3}));

}  // namespace
}  // namespace pollen::crdt
