// NodeClock: how one simulated node's clock reads virtual time.
//
// local(v) = offset + (1 + drift) * v, with offset >= 0 and |drift| < 0.5, so
// every node's clock is monotonic and non-negative. ToVirtual is the inverse,
// rounded up, so a node woken at ToVirtual(t) reads a local time >= t.
#pragma once

#include <cassert>
#include <cmath>

#include "node/core/types.h"

namespace pollen::sim {

struct NodeClock {
  node::Duration offset{0};
  double drift = 0.0;  // e.g. 1e-4 = 100 ppm fast

  node::Time ToLocal(node::Time virtual_time) const {
    assert(offset.count() >= 0 && std::fabs(drift) < 0.5);
    const double scaled = static_cast<double>(virtual_time.count()) * (1.0 + drift);
    return offset + node::Time(static_cast<int64_t>(std::floor(scaled)));
  }
  node::Time ToVirtual(node::Time local_time) const {
    const double since = static_cast<double>((local_time - offset).count());
    const double v = std::ceil(since / (1.0 + drift));
    node::Time result(static_cast<int64_t>(v < 0 ? 0 : v));
    // Guard against floating-point rounding: step forward until local >= target.
    for (int i = 0; i < 4 && ToLocal(result) < local_time; ++i) result += node::Time(1);
    return result;
  }
};

}  // namespace pollen::sim
