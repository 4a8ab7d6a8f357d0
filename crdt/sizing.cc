#include "crdt/sizing.h"

#include <math.h>  // lgamma_r

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace pollen::crdt {
namespace {

// f(j): FPR of one block that holds j keys, k probes with replacement.
double BlockFpr(double j, uint32_t k) {
  const double bit_clear = std::pow(1.0 - 1.0 / kBlockBits, j * k);
  return std::pow(1.0 - bit_clear, k);
}

// E[g(J)] for J ~ Poisson(lambda), summed over lambda +- 12 sd (+ a margin for
// small lambda): the mass outside is below 1e-30, far under any p we size for.
template <typename G>
double PoissonExpectation(double lambda, G g) {
  if (lambda <= 0) return g(0.0);
  const double sd = std::sqrt(lambda);
  const double lo = std::max(0.0, std::floor(lambda - 12 * sd - 10));
  const double hi = std::ceil(lambda + 12 * sd + 30);
  double sum = 0;
  const double log_lambda = std::log(lambda);
  for (double j = lo; j <= hi; j += 1) {
    // lgamma_r: std::lgamma writes the global signgam, a data race when
    // several threads ask for estimates at once (found by TSan).
    int sign = 0;
    const double log_pmf = -lambda + j * log_lambda - ::lgamma_r(j + 1, &sign);
    sum += std::exp(log_pmf) * g(j);
  }
  return sum;
}

}  // namespace

absl::Status ValidateShape(FilterShape shape) {
  if (shape.blocks == 0 || shape.blocks > kMaxBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("block count ", shape.blocks, " outside [1, ", kMaxBlocks, "]"));
  }
  if (shape.k < kMinK || shape.k > kMaxK) {
    return absl::InvalidArgumentError(absl::StrCat("k = ", shape.k, " outside [", kMinK, ", ", kMaxK, "]"));
  }
  return absl::OkStatus();
}

double ExpectedFpr(FilterShape shape, double n) {
  const double lambda = n / static_cast<double>(shape.blocks);
  return PoissonExpectation(lambda, [&](double j) { return BlockFpr(j, shape.k); });
}

double ExpectedSetBits(FilterShape shape, double n) {
  const double lambda = n / static_cast<double>(shape.blocks);
  const double per_block = PoissonExpectation(lambda, [&](double j) {
    return kBlockBits * (1.0 - std::pow(1.0 - 1.0 / kBlockBits, j * shape.k));
  });
  return per_block * static_cast<double>(shape.blocks);
}

absl::StatusOr<FilterShape> ChooseShape(uint64_t capacity, double fpr) {
  if (capacity == 0) return absl::InvalidArgumentError("capacity must be at least 1");
  if (!(fpr > 0.0 && fpr < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("false-positive rate ", fpr, " outside (0, 1)"));
  }
  const double n = static_cast<double>(capacity);
  // No Bloom filter beats n log2(1/p) / ln 2 bits (the classic optimum), and the
  // blocked one needs more: start the search there. This also keeps the load
  // per block (and so the cost of each model evaluation) bounded.
  const double least_bits = n * std::log2(1.0 / fpr) / std::log(2.0);
  if (least_bits / kBlockBits > static_cast<double>(kMaxBlocks)) {
    return absl::InvalidArgumentError(absl::StrCat("capacity ", capacity, " at false-positive rate ", fpr,
                                                   " needs more than the maximum of ", kMaxBlocks,
                                                   " blocks (", kMaxBlocks * 64 / (1 << 20), " MiB)"));
  }
  const uint64_t start = std::max<uint64_t>(1, static_cast<uint64_t>(least_bits / kBlockBits));
  FilterShape best{0, 0};
  double best_fpr = 1.0;
  for (uint32_t k = kMinK; k <= kMaxK; ++k) {
    // Find the least block count meeting fpr for this k. FPR falls as blocks
    // grow, so bracket by doubling, then bisect.
    uint64_t hi = start;
    while (ExpectedFpr({hi, k}, n) > fpr) {
      if (hi >= kMaxBlocks) break;
      hi = std::min(kMaxBlocks, hi * 2);
    }
    if (ExpectedFpr({hi, k}, n) > fpr) continue;  // this k cannot meet fpr within limits
    uint64_t lo = hi == start ? start - 1 : hi / 2;  // lo fails (or is 0)
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (ExpectedFpr({mid, k}, n) <= fpr) hi = mid; else lo = mid;
    }
    const double achieved = ExpectedFpr({hi, k}, n);
    if (best.blocks == 0 || hi < best.blocks || (hi == best.blocks && achieved < best_fpr)) {
      best = {hi, k};
      best_fpr = achieved;
    }
  }
  if (best.blocks == 0) {
    return absl::InvalidArgumentError(absl::StrCat("capacity ", capacity, " at false-positive rate ", fpr,
                                                   " needs more than the maximum of ", kMaxBlocks,
                                                   " blocks (", kMaxBlocks * 64 / (1 << 20), " MiB)"));
  }
  return best;
}

double EstimateCardinality(FilterShape shape, uint64_t set_bits) {
  if (set_bits == 0) return 0;
  if (set_bits >= shape.bits()) return std::numeric_limits<double>::infinity();
  const double target = static_cast<double>(set_bits);
  double lo = 0;
  double hi = 1;
  while (ExpectedSetBits(shape, hi) < target) {
    hi *= 2;
    if (hi > 1e18) return std::numeric_limits<double>::infinity();
  }
  for (int i = 0; i < 64 && hi - lo > 0.5; ++i) {
    const double mid = (lo + hi) / 2;
    if (ExpectedSetBits(shape, mid) < target) lo = mid; else hi = mid;
  }
  return (lo + hi) / 2;
}

double EstimateFpr(FilterShape shape, uint64_t set_bits) {
  const double n = EstimateCardinality(shape, set_bits);
  if (std::isinf(n)) return 1.0;
  return ExpectedFpr(shape, n);
}

}  // namespace pollen::crdt
