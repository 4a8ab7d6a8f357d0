// PushDelivery: numbering, NACKs, probes and their bounds, then two ends
// over a lossy channel delivering every push without anti-entropy.
#include "node/core/push_delivery.h"

#include <gtest/gtest.h>

#include <set>

#include "node/core/rng.h"

namespace pollen::node {
namespace {

using std::chrono::milliseconds;
using Control = PushDelivery::Control;

PushDelivery::Body Body() { return std::make_shared<const wire::Gossip>(); }

Time At(int64_t ms) { return Time(milliseconds(ms)); }

TEST(PushDelivery, NumbersPushesPerLinkAndStream) {
  PushDelivery d({}, 1);
  const auto a1 = d.Send("a", Body(), 3, At(0));
  const auto a2 = d.Send("a", Body(), 3, At(1));
  const auto b1 = d.Send("b", Body(), 3, At(1));
  EXPECT_EQ(a1.seq, 1u);
  EXPECT_EQ(a2.seq, 2u);
  EXPECT_EQ(b1.seq, 1u);
  EXPECT_EQ(a1.stream, a2.stream);
  EXPECT_NE(a1.stream, b1.stream);
  EXPECT_NE(a1.stream, 0u);
  EXPECT_EQ(d.unacked("a"), 2u);
}

TEST(PushDelivery, AckedIsTheHighestAcknowledgedNumberOfTheCurrentStream) {
  PushDelivery d({}, 1);
  EXPECT_EQ(d.acked("a"), 0u);
  const auto p1 = d.Send("a", Body(), 3, At(0));
  (void)d.Send("a", Body(), 3, At(1));
  EXPECT_EQ(d.acked("a"), 0u);
  (void)d.OnFeedback("a", p1.stream + 1, 2, {}, At(2));  // another stream: ignored
  EXPECT_EQ(d.acked("a"), 0u);
  (void)d.OnFeedback("a", p1.stream, 1, {}, At(2));
  EXPECT_EQ(d.acked("a"), 1u);
  (void)d.OnFeedback("a", p1.stream, 0, {}, At(3));  // an old ack does not lower it
  EXPECT_EQ(d.acked("a"), 1u);
  (void)d.OnFeedback("a", p1.stream, 99, {}, At(3));  // never past the last number sent
  EXPECT_EQ(d.acked("a"), 2u);
  EXPECT_EQ(d.stream("a"), p1.stream);
  EXPECT_EQ(d.stream("b"), 0u);
  EXPECT_EQ(d.rx_stream("a"), 0u);
  d.OnPush("a", 41, 1, At(4));
  EXPECT_EQ(d.rx_stream("a"), 41u);
}

// In-order pushes are acked by the next frame back, or by a frame of their
// own once the link has been quiet for ack_delay (AQuietLinkIsAckedUnasked).
TEST(PushDelivery, InOrderPushesAreAckedByTheNextFrameBack) {
  PushDelivery rx({}, 2);
  for (uint64_t seq = 1; seq <= 3; ++seq) rx.OnPush("s", 7, seq, At(0));
  EXPECT_TRUE(rx.Due(At(99)).empty());  // nothing missing: no frame of its own yet
  const Control c = rx.TakeControl("s", At(10), true);
  EXPECT_EQ(c.ack_stream, 7u);
  EXPECT_EQ(c.ack, 3u);
  EXPECT_TRUE(c.nacks.empty());
  EXPECT_TRUE(rx.TakeControl("s", At(11), true).empty());  // said once
  EXPECT_TRUE(rx.Due(At(1000)).empty());                   // and not again unasked
}

TEST(PushDelivery, AGapIsNackedAfterTheDelayAndTheSenderResendsIt) {
  PushDelivery tx({}, 3), rx({}, 4);
  std::vector<PushDelivery::Numbered> sent;
  for (int i = 0; i < 3; ++i) sent.push_back(tx.Send("r", Body(), 5, At(i)));
  rx.OnPush("s", sent[0].stream, 1, At(1));
  rx.OnPush("s", sent[0].stream, 3, At(3));
  EXPECT_TRUE(rx.Due(At(4)).empty());  // reordering slack
  ASSERT_EQ(rx.Due(At(8)), std::vector<std::string>{"s"});
  const Control c = rx.TakeControl("s", At(8), false);
  EXPECT_EQ(c.ack, 1u);
  EXPECT_EQ(c.nacks, std::vector<uint64_t>{2});
  const auto resend = tx.OnFeedback("r", c.ack_stream, c.ack, c.nacks, At(9));
  ASSERT_EQ(resend.size(), 1u);
  EXPECT_EQ(resend[0].seq, 2u);
  EXPECT_EQ(resend[0].bits, 5u);
  EXPECT_EQ(tx.unacked("r"), 2u);  // 1 acked; 2 and 3 held
  rx.OnPush("s", sent[0].stream, 2, At(10));
  EXPECT_EQ(rx.TakeControl("s", At(11), true).ack, 3u);
  EXPECT_EQ(tx.abandoned() + rx.abandoned(), 0u);  // repaired here: nothing for anti-entropy
}

TEST(PushDelivery, ALostLastPushIsFoundByAProbe) {
  PushDelivery tx({}, 5), rx({}, 6);
  const auto p1 = tx.Send("r", Body(), 1, At(0));
  tx.Send("r", Body(), 1, At(10));  // lost
  rx.OnPush("s", p1.stream, 1, At(1));
  EXPECT_TRUE(tx.Due(At(159)).empty());  // probe_delay after the last push
  ASSERT_EQ(tx.Due(At(160)), std::vector<std::string>{"r"});
  const Control probe = tx.TakeControl("r", At(160), false);
  EXPECT_EQ(probe.stream, p1.stream);
  EXPECT_EQ(probe.probe, 2u);
  rx.OnProbe("s", probe.stream, probe.probe, At(161));
  ASSERT_EQ(rx.Due(At(161)), std::vector<std::string>{"s"});  // answered at once
  const Control answer = rx.TakeControl("s", At(161), false);
  EXPECT_EQ(answer.ack, 1u);
  EXPECT_EQ(answer.nacks, std::vector<uint64_t>{2});
  EXPECT_EQ(tx.OnFeedback("r", answer.ack_stream, answer.ack, answer.nacks, At(162)).size(), 1u);
}

TEST(PushDelivery, ProbesBackOffAndStopOnceAcked) {
  PushDelivery tx({}, 7);
  const auto p = tx.Send("r", Body(), 1, At(0));
  std::vector<int64_t> probes;
  for (int64_t ms = 0; ms <= 4000; ++ms) {
    if (tx.Due(At(ms)).empty()) continue;
    EXPECT_NE(tx.TakeControl("r", At(ms), false).probe, 0u);
    probes.push_back(ms);
  }
  // 150 ms, then doubling to 1200 ms; the push ages out after 3 s (retain).
  EXPECT_EQ(probes, (std::vector<int64_t>{150, 450, 1050, 2250}));
  EXPECT_EQ(tx.NextWakeup(), Time::max());
  // Acked pushes need no probe.
  tx.Send("r", Body(), 1, At(5000));
  tx.OnFeedback("r", p.stream, 2, {}, At(5001));
  EXPECT_EQ(tx.NextWakeup(), Time::max());
}

// A link whose last kCleanStreak pushes were all acked with no NACK is probed
// after quiet_probe_delay; a NACK brings back probe_delay at once.
TEST(PushDelivery, ACleanLinkIsProbedLater) {
  PushDelivery tx({}, 8);
  int64_t t = 0;
  uint32_t stream = 0;
  const auto first_probe_after = [&](int64_t sent_at) {
    for (int64_t ms = sent_at; ms <= sent_at + 3000; ++ms) {
      if (!tx.Due(At(ms)).empty()) return ms - sent_at;
    }
    return int64_t{-1};
  };
  for (uint64_t seq = 1; seq <= PushDelivery::kCleanStreak; ++seq, t += 10) {
    stream = tx.Send("r", Body(), 1, At(t)).stream;
    if (seq < PushDelivery::kCleanStreak) {
      EXPECT_EQ(first_probe_after(t), 150) << seq;  // not clean yet
    }
    tx.OnFeedback("r", stream, seq, {}, At(t + 1));
  }
  tx.Send("r", Body(), 1, At(t));
  EXPECT_EQ(first_probe_after(t), 1200);
  // A NACK (here for a push no longer held) ends the streak.
  tx.OnFeedback("r", stream, PushDelivery::kCleanStreak, {1}, At(t + 1));
  t += 10;
  tx.Send("r", Body(), 1, At(t));
  EXPECT_EQ(first_probe_after(t), 150);
}

// A refused push (a compact reference the receiver could not resolve) is
// NACKed at once; on a stream met for the first time, far into it (the
// receiver restarted), it is NACKed itself rather than the numbers below it,
// which the sender no longer holds.
TEST(PushDelivery, ARefusedPushIsNackedAtOnce) {
  PushDelivery rx({}, 9);
  rx.OnRefused("s", 7, 5000, At(0));
  ASSERT_EQ(rx.Due(At(0)), std::vector<std::string>{"s"});
  Control c = rx.TakeControl("s", At(0), false);
  EXPECT_EQ(c.ack_stream, 7u);
  EXPECT_EQ(c.ack, 4999u);
  EXPECT_EQ(c.nacks, std::vector<uint64_t>{5000});
  // Its resend arrives: nothing more to ask.
  rx.OnPush("s", 7, 5000, At(5));
  EXPECT_TRUE(rx.TakeControl("s", At(6), false).nacks.empty());
  // On a known stream, a refused push joins the gaps it leaves.
  rx.OnPush("s", 7, 5002, At(10));
  rx.OnRefused("s", 7, 5003, At(11));
  c = rx.TakeControl("s", At(11), false);
  EXPECT_EQ(c.ack, 5000u);
  EXPECT_EQ(c.nacks, (std::vector<uint64_t>{5001, 5003}));
}

TEST(PushDelivery, GivesUpOnAGapAfterMaxTries) {
  PushDelivery rx({}, 8);
  rx.OnPush("s", 3, 1, At(0));
  rx.OnPush("s", 3, 3, At(0));
  int nacks = 0;
  uint64_t last_ack = 0;
  for (int64_t ms = 0; ms < 5000; ++ms) {
    if (rx.Due(At(ms)).empty()) continue;
    const Control c = rx.TakeControl("s", At(ms), false);
    if (!c.nacks.empty()) ++nacks;
    if (c.ack_stream != 0) last_ack = c.ack;
  }
  EXPECT_EQ(nacks, static_cast<int>(PushDelivery::kMaxNackTries));
  EXPECT_EQ(last_ack, 3u);  // 2 given up: the ack moves past it, so the sender lets go
  EXPECT_EQ(rx.NextWakeup(), Time::max());
  EXPECT_EQ(rx.abandoned(), 1u);  // for anti-entropy to repair
}

TEST(PushDelivery, ANewStreamStartsAfresh) {
  PushDelivery rx({}, 9);
  rx.OnPush("s", 3, 10, At(0));  // 1..9 missing on stream 3
  EXPECT_EQ(rx.abandoned(), 0u);
  rx.OnPush("s", 4, 1, At(1));   // the sender restarted: stream 4
  EXPECT_EQ(rx.abandoned(), 1u);  // 1..9 of stream 3
  EXPECT_EQ(rx.NextWakeup(), At(1) + PushDelivery::Config{}.ack_delay);  // no NACK: only the ack of 1
  EXPECT_EQ(rx.TakeControl("s", At(2), true).ack, 1u);
  EXPECT_EQ(rx.NextWakeup(), Time::max());
}

// A receiver whose link goes quiet acks unasked just before the sender's
// probe would go (after quiet_probe_delay on a clean link, probe_delay on
// another), so the sender never probes: one frame instead of two. A frame
// that carries the ack first leaves nothing to send later.
TEST(PushDelivery, AQuietLinkIsAckedUnasked) {
  const PushDelivery::Config config;
  PushDelivery tx(config, 11), rx(config, 12);
  uint32_t stream = 0;
  for (uint64_t seq = 1; seq <= PushDelivery::kCleanStreak; ++seq) {  // make the link clean
    stream = tx.Send("r", Body(), 1, At(static_cast<int64_t>(seq))).stream;
    rx.OnPush("s", stream, seq, At(static_cast<int64_t>(seq)));
    const Control c = rx.TakeControl("s", At(static_cast<int64_t>(seq)), true);
    ASSERT_EQ(c.ack, seq);
    tx.OnFeedback("r", stream, c.ack, {}, At(static_cast<int64_t>(seq)));
  }
  // A burst of three pushes, then quiet.
  for (uint64_t seq = PushDelivery::kCleanStreak + 1; seq <= PushDelivery::kCleanStreak + 3; ++seq) {
    tx.Send("r", Body(), 1, At(100));
    rx.OnPush("s", stream, seq, At(100));
  }
  const Time ack_at = At(100) + config.quiet_ack_delay;
  EXPECT_TRUE(rx.Due(ack_at - milliseconds(1)).empty());
  ASSERT_EQ(rx.Due(ack_at), std::vector<std::string>{"s"});
  const Control c = rx.TakeControl("s", ack_at, false);
  EXPECT_EQ(c.ack_stream, stream);
  EXPECT_EQ(c.ack, PushDelivery::kCleanStreak + 3);
  EXPECT_EQ(c.probe, 0u);
  EXPECT_EQ(rx.NextWakeup(), Time::max());
  ASSERT_GT(tx.NextWakeup(), ack_at);  // the probe was not due yet
  tx.OnFeedback("r", stream, c.ack, {}, ack_at + milliseconds(1));
  EXPECT_EQ(tx.NextWakeup(), Time::max());  // nothing unacked: no probe

  // A link that is not clean (new here): the ack goes after ack_delay,
  // before the sender's probe_delay.
  PushDelivery tx2(config, 13), rx2(config, 14);
  const auto p = tx2.Send("r", Body(), 1, At(0));
  rx2.OnPush("s", p.stream, p.seq, At(0));
  const Time ack2_at = At(0) + config.ack_delay;
  EXPECT_TRUE(rx2.Due(ack2_at - milliseconds(1)).empty());
  ASSERT_EQ(rx2.Due(ack2_at), std::vector<std::string>{"s"});
  const Control c2 = rx2.TakeControl("s", ack2_at, false);
  EXPECT_EQ(c2.ack, 1u);
  tx2.OnFeedback("r", p.stream, c2.ack, {}, ack2_at + milliseconds(1));
  EXPECT_EQ(tx2.NextWakeup(), Time::max());
  // A frame that carried the ack before its time (a push back on the same
  // link) leaves no unasked ack to send.
  rx2.OnPush("s", p.stream, 2, At(500));
  EXPECT_EQ(rx2.TakeControl("s", At(510), true).ack, 2u);
  EXPECT_EQ(rx2.NextWakeup(), Time::max());
}

TEST(PushDelivery, FeedbackOnAnotherStreamIsIgnored) {
  PushDelivery tx({}, 10);
  const auto p = tx.Send("r", Body(), 1, At(0));
  EXPECT_TRUE(tx.OnFeedback("r", p.stream + 1, 1, {1}, At(1)).empty());
  EXPECT_EQ(tx.unacked("r"), 1u);
}

TEST(PushDelivery, WindowAndNacksAreBounded) {
  PushDelivery tx({}, 11), rx({}, 12);
  for (int i = 0; i < 100; ++i) tx.Send("r", Body(), 1, At(i));
  EXPECT_EQ(tx.unacked("r"), PushDelivery::kWindow);
  EXPECT_EQ(tx.abandoned(), 0u);  // pushed out unacked, but maybe delivered
  const auto stream = tx.Send("r", Body(), 1, At(100)).stream;
  EXPECT_TRUE(tx.OnFeedback("r", stream, 0, {5}, At(101)).empty());  // 5 is no longer held
  EXPECT_EQ(tx.abandoned(), 1u);  // a push lost for good
  rx.OnPush("s", 3, 1, At(0));
  EXPECT_EQ(rx.abandoned(), 0u);
  rx.OnPush("s", 3, 1000, At(0));  // far ahead: all but the last kWindow are given up
  EXPECT_EQ(rx.abandoned(), 1u);
  const Control c = rx.TakeControl("s", At(10), false);
  EXPECT_EQ(c.nacks.size(), PushDelivery::kMaxNacks);
  EXPECT_EQ(c.nacks.front(), 1000 - PushDelivery::kWindow + 1);
  EXPECT_EQ(c.ack, 1000 - PushDelivery::kWindow);
}

TEST(PushDelivery, RetainDropsLinksThatAreGone) {
  PushDelivery d({}, 13);
  d.Send("a", Body(), 1, At(0));
  d.Send("b", Body(), 1, At(0));
  d.Retain({"b"});
  EXPECT_EQ(d.unacked("a"), 0u);
  EXPECT_EQ(d.unacked("b"), 1u);
  EXPECT_EQ(d.abandoned(), 1u);  // a's unacked push
}

// Two ends over a channel that loses 10% of frames each way and delays each
// by 1-5 ms: every push arrives, by resends alone, with a few resends per
// loss. (Seeded; the give-up path needs four lost NACK/resend pairs in a
// row, p ≈ 0.19^4 per gap, and does not happen for this seed.)
TEST(PushDelivery, EveryPushArrivesOverALossyChannel) {
  PushDelivery tx({}, 14), rx({}, 15);
  Rng rng(16);
  struct Frame {
    int64_t at;
    bool to_rx;
    uint32_t stream;
    uint64_t seq;  // a push when nonzero
    Control control;
  };
  std::vector<Frame> wire;  // in flight
  auto send = [&](int64_t now, bool to_rx, uint32_t stream, uint64_t seq, Control control) {
    if (rng.Below(10) == 0) return;  // lost
    wire.push_back({now + 1 + static_cast<int64_t>(rng.Below(5)), to_rx, stream, seq, std::move(control)});
  };
  std::set<uint64_t> arrived;
  uint64_t sent = 0, resent = 0;
  for (int64_t ms = 0; ms < 10'000; ++ms) {
    if (ms < 4000 && ms % 20 == 0) {
      const auto p = tx.Send("r", Body(), 1, At(ms));
      ++sent;
      send(ms, true, p.stream, p.seq, tx.TakeControl("r", At(ms), true));
    }
    for (size_t i = 0; i < wire.size();) {
      if (wire[i].at != ms) {
        ++i;
        continue;
      }
      const Frame f = wire[i];
      wire.erase(wire.begin() + static_cast<std::ptrdiff_t>(i));
      const Control& c = f.control;
      if (f.to_rx) {
        if (f.seq != 0) {
          rx.OnPush("s", f.stream, f.seq, At(ms));
          arrived.insert(f.seq);
        }
        if (c.probe != 0) rx.OnProbe("s", c.stream, c.probe, At(ms));
      } else if (c.ack_stream != 0) {
        for (const auto& p : tx.OnFeedback("r", c.ack_stream, c.ack, c.nacks, At(ms))) {
          ++resent;
          send(ms, true, p.stream, p.seq, tx.TakeControl("r", At(ms), true));
        }
      }
    }
    if (!tx.Due(At(ms)).empty()) send(ms, true, 0, 0, tx.TakeControl("r", At(ms), false));
    if (!rx.Due(At(ms)).empty()) send(ms, false, 0, 0, rx.TakeControl("s", At(ms), false));
  }
  EXPECT_EQ(arrived.size(), sent);
  EXPECT_GT(resent, sent / 20);      // about 10% were lost and sent again
  EXPECT_LT(resent, sent * 3 / 10);  // without a storm of duplicates
  EXPECT_EQ(tx.unacked("r"), 0u);    // the last probe's answer emptied the window
  EXPECT_EQ(tx.abandoned() + rx.abandoned(), 0u);  // every loss repaired by resends
}

}  // namespace
}  // namespace pollen::node
