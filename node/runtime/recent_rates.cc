#include "node/runtime/recent_rates.h"

#include <cassert>
#include <chrono>

namespace pollen::runtime {

void RecentRates::Sample(node::Time now, const Counters& c) {
  if (!samples_.empty() && now < samples_.back().first) now = samples_.back().first;
  samples_.emplace_back(now, c);
  // Keep one sample at or beyond the window's start, so a page loaded once a
  // minute still has a baseline.
  while (samples_.size() > 2 && samples_[1].first <= now - kWindow) samples_.pop_front();
  while (samples_.size() > kMaxSamples) samples_.pop_front();
  assert(samples_.size() <= kMaxSamples);
}

std::optional<RecentRates::Rates> RecentRates::Over() const {
  if (samples_.size() < 2) return std::nullopt;
  const auto& [t0, a] = samples_.front();
  const auto& [t1, b] = samples_.back();
  if (t1 - t0 < kMinSpan) return std::nullopt;
  const double s = std::chrono::duration<double>(t1 - t0).count();
  auto per_second = [s](uint64_t from, uint64_t to) { return to >= from ? static_cast<double>(to - from) / s : 0.0; };
  Rates r;
  r.seconds = s;
  r.adds = per_second(a.adds, b.adds);
  r.queries = per_second(a.queries, b.queries);
  r.hits = per_second(a.hits, b.hits);
  r.bytes_in = per_second(a.bytes_in, b.bytes_in);
  r.bytes_out = per_second(a.bytes_out, b.bytes_out);
  return r;
}

}  // namespace pollen::runtime
