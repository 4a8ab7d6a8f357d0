#include "protocol/replay_window.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>

namespace pollen::protocol {

ReplayWindow::ReplayWindow(size_t max_senders)
    : max_senders_(max_senders), index_(0, BySender{&records_}, BySender{&records_}) {
  if (max_senders == 0 || max_senders >= kNil) {
    std::fprintf(stderr, "ReplayWindow: max_senders must be 1 .. %u\n", unsigned{kNil} - 1);
    std::abort();
  }
}

bool ReplayWindow::Accept(uint64_t sender, uint64_t counter) {
  auto it = index_.find(sender);
  if (it == index_.end()) {
    const Index i = NewRecord(sender);
    records_[i].highest = counter;
    return true;
  }
  const Index i = *it;
  Record& r = records_[i];
  const bool fresh = counter > r.highest ? Advance(r, counter) : Backfill(r, counter);
  if (fresh && i != newest_) {
    Unlink(i);
    LinkNewest(i);
  }
  return fresh;
}

ReplayWindow::Index ReplayWindow::NewRecord(uint64_t sender) {
  Index i;
  if (index_.size() < max_senders_) {
    assert(records_.size() == index_.size());
    i = static_cast<Index>(records_.size());
    records_.emplace_back();
  } else {
    // Full: the least recently accepted sender gives up its record. Out of
    // the index first, while the record still names it.
    i = oldest_;
    assert(i != kNil);
    index_.erase(i);
    Unlink(i);
    FreeRing(records_[i]);
    records_[i] = Record{};
  }
  records_[i].sender = sender;
  index_.insert(i);
  LinkNewest(i);
  return i;
}

void ReplayWindow::Unlink(Index i) {
  Record& r = records_[i];
  if (r.older != kNil) records_[r.older].newer = r.newer; else oldest_ = r.newer;
  if (r.newer != kNil) records_[r.newer].older = r.older; else newest_ = r.older;
  r.older = r.newer = kNil;
}

void ReplayWindow::LinkNewest(Index i) {
  Record& r = records_[i];
  r.older = newest_;
  r.newer = kNil;
  if (newest_ != kNil) records_[newest_].newer = i; else oldest_ = i;
  newest_ = i;
}

bool ReplayWindow::Advance(Record& r, uint64_t counter) {
  const uint64_t shift = counter - r.highest;
  if (r.ring != kNil && shift >= kWindow) {
    FreeRing(r);  // nothing seen is left in the window: back to distances
  } else if (r.ring != kNil) {
    // Forget the slots that now belong to counters highest+1 .. counter
    // (they held counters kWindow older), a word at a time: at most kWords + 1
    // iterations (bit by bit, a receiver that sees every 30th counter of a
    // sender spent 3% of pollen-sim N=100 here; perf).
    Ring& ring = RingOf(r);
    uint64_t pos = (r.highest + 1) % kWindow;  // first slot to clear
    uint64_t left = shift;
    while (left > 0) {
      const uint64_t bit = pos % 64;
      const uint64_t n = std::min<uint64_t>(left, 64 - bit);
      const uint64_t mask = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << bit;
      ring[pos / 64] &= ~mask;
      left -= n;
      pos = (pos + n) % kWindow;
    }
    ring[(counter % kWindow) / 64] |= uint64_t{1} << (counter % 64);
  } else {
    // Every distance grows by `shift`; the old highest is now `shift` below.
    std::array<uint16_t, kInline + 1> kept;
    size_t n = 0;
    if (shift < kWindow) {
      kept[n++] = static_cast<uint16_t>(shift);
      for (const uint16_t d : r.below) {
        if (d != 0 && d + shift < kWindow) kept[n++] = static_cast<uint16_t>(d + shift);
      }
    }
    r.below.fill(0);
    if (n > kInline) {
      r.highest = counter;
      std::copy_n(kept.begin(), kInline, r.below.begin());
      ToRing(r);
      const uint64_t last = counter - kept[kInline];
      RingOf(r)[(last % kWindow) / 64] |= uint64_t{1} << (last % 64);
      return true;
    }
    std::copy_n(kept.begin(), n, r.below.begin());
  }
  r.highest = counter;
  return true;
}

bool ReplayWindow::Backfill(Record& r, uint64_t counter) {
  const uint64_t behind = r.highest - counter;
  if (behind == 0 || behind >= kWindow) return false;  // the highest itself, or too old to tell
  if (r.ring != kNil) {
    uint64_t& word = RingOf(r)[(counter % kWindow) / 64];
    const uint64_t mask = uint64_t{1} << (counter % 64);
    if (word & mask) return false;
    word |= mask;
    return true;
  }
  if (std::find(r.below.begin(), r.below.end(), static_cast<uint16_t>(behind)) != r.below.end()) return false;
  const auto unused = std::find(r.below.begin(), r.below.end(), uint16_t{0});
  if (unused != r.below.end()) {
    *unused = static_cast<uint16_t>(behind);
    return true;
  }
  ToRing(r);
  RingOf(r)[(counter % kWindow) / 64] |= uint64_t{1} << (counter % 64);
  return true;
}

// The ring of the highest and the distances below it.
void ReplayWindow::ToRing(Record& r) {
  assert(r.ring == kNil);
  if (free_rings_.empty()) {
    assert(rings_.size() < kNil);  // at most one per record
    r.ring = static_cast<Index>(rings_.size());
    rings_.emplace_back();
  } else {
    r.ring = free_rings_.back();
    free_rings_.pop_back();
  }
  Ring& ring = RingOf(r);
  ring.fill(0);
  const auto set = [&ring](uint64_t c) { ring[(c % kWindow) / 64] |= uint64_t{1} << (c % 64); };
  set(r.highest);
  for (const uint16_t d : r.below) {
    if (d != 0) set(r.highest - d);
  }
  r.below.fill(0);
}

void ReplayWindow::FreeRing(Record& r) {
  if (r.ring == kNil) return;
  free_rings_.push_back(r.ring);
  r.ring = kNil;
}

}  // namespace pollen::protocol
