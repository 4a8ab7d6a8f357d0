#include "node/core/push_delivery.h"

#include <algorithm>
#include <cassert>

#include "crdt/mix64.h"

namespace pollen::node {

PushDelivery::PushDelivery(Config config, uint64_t stream_ids) : config_(config), stream_ids_(stream_ids) {
  assert(config_.probe_delay.count() > 0 && config_.max_probe_interval >= config_.probe_delay);
  assert(config_.quiet_probe_delay >= config_.probe_delay && config_.quiet_probe_delay <= config_.max_probe_interval);
  assert(config_.quiet_probe_delay < config_.retain);
  assert(config_.ack_delay.count() > 0 && config_.ack_delay < config_.probe_delay);
  assert(config_.quiet_ack_delay >= config_.ack_delay && config_.quiet_ack_delay < config_.quiet_probe_delay);
  assert(config_.nack_retry.count() > 0 && config_.retain.count() > 0);
}

PushDelivery::Link& PushDelivery::At(const std::string& link) {
  auto [it, inserted] = links_.try_emplace(link);
  if (inserted) {
    // SplitMix64 over a counter: distinct ids per link, reproducible per seed.
    const uint64_t z = crdt::Mix64(stream_ids_ += crdt::kGoldenGamma);
    it->second.stream = std::max<uint32_t>(1, static_cast<uint32_t>(z >> 32));
  }
  return it->second;
}

// ---- sender ----

void PushDelivery::Trim(Link& l, Time now) {
  while (!l.window.empty() && l.window.front().at + config_.retain < now) l.window.pop_front();
  if (l.window.empty()) l.probe_due = Time::max();
}

Duration PushDelivery::FirstProbeDelay(const Link& l) const {
  return l.clean_streak >= kCleanStreak ? config_.quiet_probe_delay : config_.probe_delay;
}

// A probe is worth sending only while the newest push is still held.
void PushDelivery::ScheduleProbe(Link& l, Time at) const {
  l.probe_due = !l.window.empty() && at <= l.window.back().at + config_.retain ? at : Time::max();
}

PushDelivery::Numbered PushDelivery::Send(const std::string& link, Body body, uint64_t bits, Time now) {
  next_wakeup_.reset();
  assert(body != nullptr);
  Link& l = At(link);
  Trim(l, now);
  if (l.window.size() == kWindow) l.window.pop_front();  // its loss is left to anti-entropy
  const Numbered n{l.stream, l.next_seq++, body, bits};
  l.window.push_back(Sent{n.seq, now, std::move(body), bits});
  // Probes are for an idle link: on a busy one the next push shows a gap.
  l.probe_interval = FirstProbeDelay(l);
  ScheduleProbe(l, now + l.probe_interval);
  return n;
}

std::vector<PushDelivery::Numbered> PushDelivery::OnFeedback(const std::string& link, uint32_t stream, uint64_t ack,
                                                             const std::vector<uint64_t>& nacks, Time now) {
  next_wakeup_.reset();
  std::vector<Numbered> resend;
  auto it = links_.find(link);
  if (it == links_.end() || stream != it->second.stream) return resend;
  Link& l = it->second;
  l.acked = std::max(l.acked, std::min(ack, l.next_seq - 1));
  const size_t before = l.window.size();
  while (!l.window.empty() && l.window.front().seq <= ack) l.window.pop_front();
  l.clean_streak = nacks.empty() ? std::min<uint64_t>(kCleanStreak, l.clean_streak + (before - l.window.size())) : 0;
  if (l.window.size() != before) {  // progress: the probe clock starts again
    l.probe_interval = FirstProbeDelay(l);
    ScheduleProbe(l, now + l.probe_interval);
  }
  Trim(l, now);
  for (uint64_t seq : nacks) {
    auto sent = std::find_if(l.window.begin(), l.window.end(), [seq](const Sent& s) { return s.seq == seq; });
    if (sent != l.window.end()) {
      resend.push_back(Numbered{l.stream, sent->seq, sent->body, sent->bits});
    } else if (seq < l.next_seq) {
      ++abandoned_;  // missing there and no longer held here
    }
  }
  return resend;
}

// ---- receiver ----

void PushDelivery::Advance(Link& l) const {
  if ((l.above & 1) == 0) return;
  while ((l.above & 1) != 0) {
    l.above >>= 1;
    ++l.contiguous;
  }
  l.nack_tries = 0;  // a new oldest gap, if any
}

// Raises the frontier to `seq`; numbers more than kWindow below it are given
// up (counted as arrived): the mask holds kWindow numbers.
void PushDelivery::Extend(Link& l, uint64_t seq) {
  l.highest = std::max(l.highest, seq);
  if (l.highest <= l.contiguous + kWindow) return;
  const uint64_t shift = l.highest - kWindow - l.contiguous;
  const uint64_t shifted_out = shift >= 64 ? ~uint64_t{0} : (uint64_t{1} << shift) - 1;
  if (shift > 64 || (l.above & shifted_out) != shifted_out) ++abandoned_;  // a number never arrived
  l.above = shift >= 64 ? 0 : l.above >> shift;
  l.contiguous += shift;
  l.nack_tries = 0;
  Advance(l);
}

void PushDelivery::ResetReceive(Link& l, uint32_t stream) {
  if (l.highest > l.contiguous) ++abandoned_;  // the old stream's gaps
  l.replaced_rx_stream = l.rx_stream;
  l.rx_stream = stream;
  l.contiguous = l.above = l.highest = l.acked_said = 0;
  l.ack_due = false;
  l.quiet_ack_at = Time::max();
  l.rx_clean_streak = 0;
  l.nack_due = Time::max();
  l.nack_tries = 0;
}

std::vector<uint64_t> PushDelivery::Missing(const Link& l) const {
  std::vector<uint64_t> missing;
  const uint64_t last = std::min(l.highest, l.contiguous + kWindow);
  for (uint64_t seq = l.contiguous + 1; seq <= last && missing.size() < kMaxNacks; ++seq) {
    if ((l.above & (uint64_t{1} << (seq - l.contiguous - 1))) == 0) missing.push_back(seq);
  }
  return missing;
}

void PushDelivery::OnPush(const std::string& link, uint32_t stream, uint64_t seq, Time now) {
  next_wakeup_.reset();
  assert(stream != 0 && seq != 0);
  Link& l = At(link);
  if (stream == l.replaced_rx_stream) return;          // late, from before a restart
  if (stream != l.rx_stream) ResetReceive(l, stream);  // the sender (re)started this link
  if (seq <= l.contiguous) return;                     // a duplicate
  Extend(l, seq);
  if (seq > l.contiguous) l.above |= uint64_t{1} << (seq - l.contiguous - 1);
  Advance(l);
  if (l.highest == l.contiguous) {
    l.nack_due = Time::max();  // the gap filled
  } else if (l.nack_due == Time::max()) {
    l.nack_due = now + config_.nack_delay;
  }
  l.rx_clean_streak = std::min(l.rx_clean_streak + 1, kCleanStreak);
  if (l.contiguous > l.acked_said) {  // from the last push
    l.quiet_ack_at = now + (l.rx_clean_streak >= kCleanStreak ? config_.quiet_ack_delay : config_.ack_delay);
  }
}

void PushDelivery::OnProbe(const std::string& link, uint32_t stream, uint64_t last, Time now) {
  next_wakeup_.reset();
  assert(stream != 0);
  Link& l = At(link);
  if (stream == l.replaced_rx_stream) return;
  if (stream != l.rx_stream) ResetReceive(l, stream);
  Extend(l, last);
  l.ack_due = true;
  // NACK at once, unless a NACK is out and its retry pending: a probe that
  // crosses a resend must not use up a try.
  if (l.highest == l.contiguous) {
    l.nack_due = Time::max();
  } else if (l.nack_due == Time::max()) {
    l.nack_due = now;
  }
}

void PushDelivery::OnRefused(const std::string& link, uint32_t stream, uint64_t seq, Time now) {
  next_wakeup_.reset();
  assert(stream != 0 && seq != 0);
  Link& l = At(link);
  if (stream == l.replaced_rx_stream) return;
  if (stream != l.rx_stream) {
    ResetReceive(l, stream);
    l.contiguous = l.highest = seq - 1;
  }
  Extend(l, seq);
  if (seq <= l.contiguous) return;  // counted as arrived or given up already: nothing to ask for
  l.ack_due = true;
  l.nack_due = now;  // at once, older gaps with it (a refusal is rare: one early NACK is cheap)
}

// ---- both ----

PushDelivery::Control PushDelivery::TakeControl(const std::string& link, Time now, bool piggyback) {
  next_wakeup_.reset();
  Control c;
  auto it = links_.find(link);
  if (it == links_.end()) return c;
  Link& l = it->second;
  Trim(l, now);
  if (!l.window.empty() && l.probe_due <= now) {
    c.stream = l.stream;
    c.probe = l.next_seq - 1;
    l.probe_interval = std::min(2 * l.probe_interval, config_.max_probe_interval);
    ScheduleProbe(l, now + l.probe_interval);
  }
  if (!piggyback && l.nack_due <= now) {
    if (l.nack_tries >= kMaxNackTries) {
      // Give up on the oldest run of missing numbers, all of it: every bit
      // below the lowest arrived one (or, with none above, up to highest).
      ++abandoned_;
      if (l.above == 0) {
        l.contiguous = l.highest;
      } else {
        l.above |= (l.above & (~l.above + 1)) - 1;
        Advance(l);
      }
      l.nack_tries = 0;
    }
    c.nacks = Missing(l);
    if (c.nacks.empty()) {
      l.nack_due = Time::max();
    } else {
      ++l.nack_tries;
      l.rx_clean_streak = 0;
      l.nack_due = now + config_.nack_retry;
      l.ack_due = true;  // the NACK frame names the stream and its ack
    }
  }
  if (l.rx_stream != 0 && (l.ack_due || l.contiguous > l.acked_said)) {
    c.ack_stream = l.rx_stream;
    c.ack = l.contiguous;
    l.acked_said = l.contiguous;
    l.ack_due = false;
    l.quiet_ack_at = Time::max();
  }
  if (l.quiet_ack_at <= now) l.quiet_ack_at = Time::max();  // nothing left to say (never due for good)
  return c;
}

Time PushDelivery::DueAt(const Link& l) const {
  Time due = std::min(l.nack_due, l.quiet_ack_at);
  if (!l.window.empty()) due = std::min(due, l.probe_due);
  if (l.ack_due) due = Time::min();
  return due;
}

std::vector<std::string> PushDelivery::Due(Time now) const {
  std::vector<std::string> due;
  for (const auto& [name, l] : links_) {
    if (DueAt(l) <= now) due.push_back(name);
  }
  return due;
}

Time PushDelivery::NextWakeup() const {
  if (next_wakeup_) return *next_wakeup_;
  Time next = Time::max();
  for (const auto& [name, l] : links_) next = std::min(next, DueAt(l));
  next_wakeup_ = next;
  return next;
}

void PushDelivery::Retain(const std::vector<std::string>& links) {
  next_wakeup_.reset();
  assert(std::is_sorted(links.begin(), links.end()));
  for (auto it = links_.begin(); it != links_.end();) {
    if (std::binary_search(links.begin(), links.end(), it->first)) {
      ++it;
      continue;
    }
    // Unacked pushes, and gaps, on a link that goes away.
    if (!it->second.window.empty() || it->second.highest > it->second.contiguous) ++abandoned_;
    it = links_.erase(it);
  }
}

size_t PushDelivery::unacked(const std::string& link) const {
  auto it = links_.find(link);
  return it == links_.end() ? 0 : it->second.window.size();
}

uint64_t PushDelivery::acked(const std::string& link) const {
  auto it = links_.find(link);
  return it == links_.end() ? 0 : it->second.acked;
}

uint32_t PushDelivery::stream(const std::string& link) const {
  auto it = links_.find(link);
  return it == links_.end() ? 0 : it->second.stream;
}

uint32_t PushDelivery::rx_stream(const std::string& link) const {
  auto it = links_.find(link);
  return it == links_.end() ? 0 : it->second.rx_stream;
}

}  // namespace pollen::node
