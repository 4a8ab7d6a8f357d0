// RecentRates: per-second rates of a node's counters over the last minute,
// from samples its callers take (each status page or /metrics request), for
// the status page. No thread of its own: one thread (the HTTP server's)
// samples and reads it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "node/core/types.h"

namespace pollen::runtime {

class RecentRates {
 public:
  struct Counters {
    uint64_t adds = 0, queries = 0, hits = 0, bytes_in = 0, bytes_out = 0;
  };
  struct Rates {
    double seconds = 0;  // the window they cover
    double adds = 0, queries = 0, hits = 0, bytes_in = 0, bytes_out = 0;  // per second
  };

  static constexpr node::Duration kWindow = std::chrono::seconds(60);
  static constexpr node::Duration kMinSpan = std::chrono::seconds(1);
  static constexpr size_t kMaxSamples = 256;

  // Records the counters at `now` (node time, non-decreasing).
  void Sample(node::Time now, const Counters& c);

  // Rates between the oldest sample still inside kWindow and the newest;
  // none until two samples are at least kMinSpan apart. A counter that went
  // down (it cannot, short of a restart) reads 0.
  std::optional<Rates> Over() const;

 private:
  std::deque<std::pair<node::Time, Counters>> samples_;  // oldest first, at most kMaxSamples
};

}  // namespace pollen::runtime
