#include "node/core/push_pacing.h"

#include <algorithm>
#include <cassert>

namespace pollen::node {

PushPacing::PushPacing(Duration gap) : gap_(gap) {
  assert(gap.count() >= 0);
  // kWindow / gap, rounded up; a gap longer than the window: one arrival.
  busy_arrivals_ = gap.count() == 0 ? 0 : std::max<uint64_t>(1, (kWindow + gap - Duration(1)) / gap);
  idle_arrivals_ = (busy_arrivals_ + 1) / 2;
}

void PushPacing::Roll(Time now) {
  if (window_start_ != Time::min() && now < window_start_ + kWindow) return;
  // A window with no arrival since the last one ended counts as empty.
  const bool adjacent = window_start_ != Time::min() && now < window_start_ + 2 * kWindow;
  const uint64_t last = adjacent ? arrivals_ : 0;
  busy_ = gap_.count() > 0 && last >= (busy_ ? idle_arrivals_ : busy_arrivals_);
  window_start_ = now;
  arrivals_ = 0;
}

void PushPacing::OnArrival(Time now) {
  Roll(now);
  ++arrivals_;
}

Time PushPacing::Earliest(Time now, uint64_t pending_words) {
  Roll(now);
  if (!busy_ || last_push_ == Time::min() || pending_words >= kFullWords) return now;
  return std::max(now, last_push_ + gap_);
}

}  // namespace pollen::node
