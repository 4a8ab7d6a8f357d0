#include "crdt/sizing.h"

#include <bit>
#include <map>
#include <tuple>
#include <mutex>
#include <utility>

#include <math.h>  // lgamma_r

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace pollen::crdt {
namespace {

// x^k for a small non-negative integer k, by squaring (std::pow is ~10x slower
// and this runs in the innermost loop of sizing).
double IntPow(double x, uint32_t k) {
  double result = 1;
  while (k > 0) {
    if (k & 1) result *= x;
    x *= x;
    k >>= 1;
  }
  return result;
}

// E[g(q^J)] for J ~ Poisson(lambda), summed over lambda +- 12 sd (+ a margin for
// small lambda): the mass outside is below 1e-30, far under any p we size for.
// Both the pmf and q^j advance by one multiplication per term (only the first
// term pays for lgamma and pow): sizing runs once per filter creation, and a
// simulated cluster of N nodes with N digest filters creates N^2 of them.
template <typename G>
double PoissonExpectation(double lambda, double q, G g) {
  if (lambda <= 0) return g(1.0);
  const double sd = std::sqrt(lambda);
  const double lo = std::max(0.0, std::floor(lambda - 12 * sd - 10));
  const double hi = std::ceil(lambda + 12 * sd + 30);
  // lgamma_r, not std::lgamma: the latter writes the global signgam, a data
  // race when several threads size filters at once (found by TSan).
  int sign = 0;
  double pmf = std::exp(-lambda + lo * std::log(lambda) - ::lgamma_r(lo + 1, &sign));
  double q_j = std::pow(q, lo);
  double sum = 0;
  for (double j = lo; j <= hi; j += 1) {
    sum += pmf * g(q_j);
    pmf *= lambda / (j + 1);
    q_j *= q;
  }
  return sum;
}

// Probability that one probe leaves a given bit of the block clear, to the k:
// q^j is then the chance that a bit is clear after j keys.
double ClearAfterOneKey(uint32_t k) { return std::pow(1.0 - 1.0 / kBlockBits, k); }

}  // namespace

absl::Status ValidateShape(FilterShape shape) {
  if (shape.parts < 1 || shape.parts > kMaxParts || shape.k % shape.parts != 0 ||
      (shape.parts > 1 && shape.k / shape.parts > kMaxBitsPerPart)) {
    return absl::InvalidArgumentError(absl::StrCat("parts = ", shape.parts, " outside [1, ", kMaxParts,
                                                   "], not a divisor of k = ", shape.k, ", or over ",
                                                   kMaxBitsPerPart, " bits per part"));
  }
  if (shape.blocks == 0 || shape.blocks > kMaxBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("block count ", shape.blocks, " outside [1, ", kMaxBlocks, "]"));
  }
  if (shape.k < kMinK || shape.k > kMaxK) {
    return absl::InvalidArgumentError(absl::StrCat("k = ", shape.k, " outside [", kMinK, ", ", kMaxK, "]"));
  }
  return absl::OkStatus();
}

uint32_t PartsFor(Layout layout, uint32_t k) {
  if (layout == Layout::kOneBlock || k < 12) return 1;
  return k < 18 ? 4 : 6;
}

double ExpectedFpr(FilterShape shape, double n) {
  // Each block holds J ~ Poisson(parts * n / blocks) key-parts of h bits; a
  // block with j of them passes a non-member's part with (1 - q^j)^h, and
  // the parts fall in independent blocks.
  const uint32_t h = shape.k / shape.parts;
  const double lambda = n * shape.parts / static_cast<double>(shape.blocks);
  const double per_part =
      PoissonExpectation(lambda, ClearAfterOneKey(h), [&](double q_j) { return IntPow(1.0 - q_j, h); });
  return IntPow(per_part, shape.parts);
}

double ExpectedSetBits(FilterShape shape, double n) {
  const uint32_t h = shape.k / shape.parts;
  const double lambda = n * shape.parts / static_cast<double>(shape.blocks);
  const double per_block =
      PoissonExpectation(lambda, ClearAfterOneKey(h), [](double q_j) { return kBlockBits * (1.0 - q_j); });
  return per_block * static_cast<double>(shape.blocks);
}

absl::StatusOr<FilterShape> ChooseShape(uint64_t capacity, double fpr, Layout layout) {
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
    const uint32_t parts = PartsFor(layout, k);
    if (k % parts != 0) continue;
    // Find the least block count meeting fpr for this k. FPR falls as blocks
    // grow, so bracket by doubling, then bisect.
    uint64_t hi = start;
    while (ExpectedFpr({hi, k, parts}, n) > fpr) {
      if (hi >= kMaxBlocks) break;
      hi = std::min(kMaxBlocks, hi * 2);
    }
    if (ExpectedFpr({hi, k, parts}, n) > fpr) continue;  // this k cannot meet fpr within limits
    uint64_t lo = hi == start ? start - 1 : hi / 2;  // lo fails (or is 0)
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (ExpectedFpr({mid, k, parts}, n) <= fpr) hi = mid; else lo = mid;
    }
    const double achieved = ExpectedFpr({hi, k, parts}, n);
    if (best.blocks == 0 || hi < best.blocks || (hi == best.blocks && achieved < best_fpr)) {
      best = {hi, k, parts};
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

FillEstimate EstimateFillCached(FilterShape shape, uint64_t set_bits) {
  static std::mutex mu;
  static absl::flat_hash_map<std::tuple<uint64_t, uint32_t, uint32_t, uint64_t>, FillEstimate> cache;
  constexpr size_t kMaxCached = 1 << 16;  // ~2.5 MB at most
  const std::tuple<uint64_t, uint32_t, uint32_t, uint64_t> key(shape.blocks, shape.k, shape.parts, set_bits);
  {
    std::lock_guard lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  FillEstimate estimate;
  estimate.items = EstimateCardinality(shape, set_bits);
  estimate.fpr = std::isinf(estimate.items) ? 1.0 : ExpectedFpr(shape, estimate.items);  // EstimateFpr, one bisection
  std::lock_guard lock(mu);
  if (cache.size() >= kMaxCached) cache.clear();
  cache.emplace(key, estimate);
  return estimate;
}

absl::StatusOr<FilterShape> ChooseShapeCached(uint64_t capacity, double fpr, Layout layout) {
  static std::mutex mu;
  static std::map<std::tuple<uint64_t, uint64_t, Layout>, FilterShape> cache;
  constexpr size_t kMaxCached = 1024;
  const auto key = std::make_tuple(capacity, std::bit_cast<uint64_t>(fpr), layout);
  {
    std::lock_guard lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  absl::StatusOr<FilterShape> shape = ChooseShape(capacity, fpr, layout);
  if (shape.ok()) {
    std::lock_guard lock(mu);
    if (cache.size() >= kMaxCached) cache.clear();
    cache[key] = *shape;
  }
  return shape;
}

}  // namespace pollen::crdt
