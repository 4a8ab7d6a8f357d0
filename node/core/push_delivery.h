// PushDelivery: numbered tree pushes per link, with negative acknowledgements
// and tail probes, so a push lost to the network is sent again within a few
// round trips instead of waiting for anti-entropy (sans IO).
//
// Sender side, per link: each push gets the next number of the link's stream
// (a random 32-bit id per link and node start, so a restarted sender is a new
// stream). The last pushes are kept, at most kWindow of them and none older
// than `retain`, to be sent again when the receiver asks.
// Receiver side, per link: which numbers have arrived, as a cumulative ack
// plus a 64-bit mask above it.
//   - A gap (a number skipped) is NACKed after nack_delay, and again every
//     nack_retry while it stays open, kMaxNackTries times; then the receiver
//     gives up on it (anti-entropy repairs what it carried). A receiver that
//     meets a stream midway (it forgot the link, the sender did not) NACKs
//     at most the kWindow numbers below, once each try: bounded.
//   - A lost final push leaves no gap, so a sender whose link has been idle
//     for probe_delay with pushes unacked asks for an ack (again, backing off
//     to max_probe_interval, while the pushes are held). The receiver answers
//     at once with its ack, and NACKs whatever the probe shows missing. Busy
//     links are not probed: there the next push shows a gap. (Probing by the
//     age of the oldest unacked push instead cost an ack frame per link every
//     probe_delay: +55% tree bytes at N=100, 20 adds/s, no loss.)
//   - A link that has lost nothing lately is probed later: once kCleanStreak
//     pushes in a row were acked with no NACK between them, the first probe
//     after a burst waits quiet_probe_delay instead of probe_delay; any NACK
//     brings probe_delay back. Under 10% loss a run of kCleanStreak is rare
//     (0.9^64 = 0.1%), so lossy links keep the quick probe; on a clean link
//     the probe and its ack were a fifth of the tree's frames (pollen-sim,
//     N=100, 20 adds/s), and a last push lost there waits for the next push's
//     gap or quiet_probe_delay.
//   - Frames either way carry the cumulative ack when it is news; it trims
//     the sender's window.
//   - A receiver whose ack is still news when its link has been quiet for a
//     little less than the sender's probe delay sends it unasked, so a burst
//     ends in one ack instead of a probe and its answer: after ack_delay, or
//     quiet_ack_delay once kCleanStreak pushes in a row arrived with no NACK
//     (the receiver's view of the sender's clean streak; where the two
//     disagree, a probe still goes, or an ack goes early). (pollen-sim,
//     N=1000, 0.5 adds/s: probes and their acks were 1.4 of ~4.5 frames
//     per node per second.)
//
// Nothing here is needed for correctness (bits are merged by OR from any
// frame, and anti-entropy repairs whatever is lost for good: a window
// overrun, a give-up, a link that went away). It is for latency.
// Measured with pollen-sim, N=100, 10% loss, 20 adds/s (simulation/README.md):
// without it the 99.9% delivery time was 8.5 s median, 19.9 s max.
//
// Cost with no loss: the stream and number on each push (7-9 bytes), an ack
// when one is news, and one unasked ack per link after a burst (a probe and
// its answer too, when that ack is late or lost).
//
// Promises: bounded (kWindow pushes and one receive mask per link, at most
// kMaxNacks numbers per NACK); deterministic (ordered containers, stream ids
// from the caller's random numbers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node/core/types.h"
#include "protocol/wire.pb.h"

namespace pollen::node {

class PushDelivery {
 public:
  static constexpr size_t kWindow = 64;         // pushes kept per link (and the receive mask's width)
  static constexpr size_t kMaxNacks = 32;       // numbers in one NACK (the wire limit too)
  static constexpr uint32_t kMaxNackTries = 6;  // NACKs for one gap before giving up on it
  static constexpr uint64_t kMaxSeq = uint64_t{1} << 62;  // larger numbers are malformed (no overflow)
  static constexpr uint64_t kCleanStreak = 64;  // pushes acked with no NACK before a link counts as clean
  static_assert(kWindow <= 64, "the receive mask is one 64-bit word");
  struct Config {
    Duration nack_delay = std::chrono::milliseconds(5);    // slack for reordering
    Duration nack_retry = std::chrono::milliseconds(150);  // a few round trips plus a push delay
    Duration probe_delay = std::chrono::milliseconds(150);
    Duration quiet_probe_delay = std::chrono::milliseconds(1200);  // on a clean link; >= probe_delay
    // Below probe_delay and quiet_probe_delay by more than a round trip, or
    // the probe goes too.
    Duration ack_delay = std::chrono::milliseconds(100);
    Duration quiet_ack_delay = std::chrono::milliseconds(1100);
    Duration max_probe_interval = std::chrono::milliseconds(1200);
    Duration retain = std::chrono::seconds(3);  // older pushes are left to anti-entropy
  };
  using Body = std::shared_ptr<const wire::Gossip>;

  // A push to (re)send on a link.
  struct Numbered {
    uint32_t stream = 0;
    uint64_t seq = 0;
    Body body;
    uint64_t bits = 0;  // set bits it carries (for transmission counts)
  };
  // The control fields of a frame to a link: zero/empty where there is
  // nothing to say.
  struct Control {
    uint32_t stream = 0;  // our stream on this link (with probe)
    uint64_t probe = 0;   // ack requested: the last number sent in `stream`
    uint32_t ack_stream = 0;  // the link's stream, acknowledged
    uint64_t ack = 0;
    std::vector<uint64_t> nacks;  // ascending, at most kMaxNacks
    bool empty() const { return probe == 0 && ack_stream == 0 && nacks.empty(); }
  };

  // `stream_ids` seeds the per-link stream ids (the caller's random number).
  PushDelivery(Config config, uint64_t stream_ids);

  // ---- sender ----
  // Numbers a push on `link` and keeps it for resending.
  Numbered Send(const std::string& link, Body body, uint64_t bits, Time now);
  // The link's feedback on our stream: trims the window to `ack` and returns
  // the NACKed pushes still held, to send again. Feedback for another stream
  // (an earlier start of ours) is ignored.
  std::vector<Numbered> OnFeedback(const std::string& link, uint32_t stream, uint64_t ack,
                                   const std::vector<uint64_t>& nacks, Time now);

  // ---- receiver ----
  // A numbered push from `link` arrived. A new stream id resets the link.
  void OnPush(const std::string& link, uint32_t stream, uint64_t seq, Time now);
  // The link asked for an ack: it has sent up to `last`.
  void OnProbe(const std::string& link, uint32_t stream, uint64_t last, Time now);
  // A numbered push arrived but could not be used (a compact filter
  // reference this node cannot resolve): it counts as not received and is
  // NACKed at once. On a stream met for the first time, the numbers below it
  // are not asked for (they went to this node's previous life, or before the
  // link), so a refused push far into a stream is NACKed first, not after
  // kWindow older numbers the sender no longer holds.
  void OnRefused(const std::string& link, uint32_t stream, uint64_t seq, Time now);

  // ---- both ----
  // What a frame to `link` sent now should carry; marks it said. With
  // `piggyback` (a push is going anyway) it includes a probe only if one is
  // due, and no NACKs (they go alone, so pushes stay within the datagram
  // budget).
  Control TakeControl(const std::string& link, Time now, bool piggyback);
  // Links with a probe, an ack or a NACK due by `now`, in name order.
  std::vector<std::string> Due(Time now) const;
  Time NextWakeup() const;
  // Drops every link not in `links` (ascending).
  void Retain(const std::vector<std::string>& links);
  size_t unacked(const std::string& link) const;
  // The highest number of our current stream on `link` that the link has
  // acknowledged (every push up to it arrived or was given up); 0 if none.
  uint64_t acked(const std::string& link) const;
  // Our current stream on `link`, and the link's stream we receive; 0 if none.
  uint32_t stream(const std::string& link) const;
  uint32_t rx_stream(const std::string& link) const;
  // Times a push was lost for good, left to anti-entropy: on the receiver, a
  // gap given up (kMaxNackTries, shifted out of the mask, its stream
  // replaced, its link dropped); on the sender, a NACK for a push no longer
  // held, or a link dropped with pushes unacked. Only grows. Not counted: a
  // push sent again and delivered (repaired here), and an unacked push that
  // merely leaves a full or old window: a one-way busy link is acked only by
  // the next beacon (every 5 s), so that happens without any loss; if the
  // push was lost, the receiver's NACK or a probe's answer finds it gone.
  uint64_t abandoned() const { return abandoned_; }

 private:
  struct Sent {
    uint64_t seq = 0;
    Time at{};
    Body body;
    uint64_t bits = 0;
  };
  struct Link {
    // sender
    uint32_t stream = 0;
    uint64_t next_seq = 1;
    std::deque<Sent> window;
    Time probe_due = Time::max();
    Duration probe_interval{};
    uint64_t clean_streak = 0;  // pushes acked since the last NACK (saturates at kCleanStreak)
    uint64_t acked = 0;         // the link's cumulative ack of `stream`, at most next_seq - 1
    // receiver
    uint32_t rx_stream = 0;
    uint32_t replaced_rx_stream = 0;  // frames still in flight from it are ignored
    uint64_t contiguous = 0;  // every number up to here has arrived (or was given up)
    uint64_t above = 0;       // bit i: contiguous + 1 + i has arrived
    uint64_t highest = 0;     // the highest number known to have been sent
    uint64_t acked_said = 0;  // the last ack sent
    bool ack_due = false;
    Time quiet_ack_at = Time::max();  // an unasked ack, unless a frame carries it first
    uint64_t rx_clean_streak = 0;     // pushes arrived since the last NACK (saturates at kCleanStreak)
    Time nack_due = Time::max();
    uint32_t nack_tries = 0;
  };
  Link& At(const std::string& link);
  void Trim(Link& l, Time now);
  void ScheduleProbe(Link& l, Time at) const;
  Duration FirstProbeDelay(const Link& l) const;  // after a push or progress: by the link's clean streak
  void Extend(Link& l, uint64_t seq);
  void Advance(Link& l) const;
  void ResetReceive(Link& l, uint32_t stream);
  std::vector<uint64_t> Missing(const Link& l) const;
  Time DueAt(const Link& l) const;

  Config config_;
  uint64_t stream_ids_;
  std::map<std::string, Link> links_;
  // NextWakeup's answer, kept until the next call that changes a link (each
  // of them clears it): the node asks after every frame and tick, and the walk
  // of the links was 4% of pollen-sim's steady state at N=1000 (perf).
  mutable std::optional<Time> next_wakeup_;
  uint64_t abandoned_ = 0;
};

}  // namespace pollen::node
