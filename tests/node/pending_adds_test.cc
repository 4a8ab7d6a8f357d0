// PendingAdds: the hand-off of newly set bits from client threads to
// the driver (run under TSan in CI: label "concurrency").
#include "node/core/dissemination.h"

#include <atomic>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace pollen::node {
namespace {

// One result with bit `bit` (0..63) set in word `word` (0..7) of `block`.
crdt::AddResult OneBit(uint64_t block, uint32_t word, uint32_t bit) {
  crdt::AddResult r;
  r.block = block;
  r.new_bits[word] = uint64_t{1} << bit;
  return r;
}

std::vector<PendingAdds::Entry> Drained(PendingAdds& pending, PendingAdds::DropReport* dropped) {
  std::vector<PendingAdds::Entry> out;
  pending.Drain(&out, dropped);
  return out;
}

TEST(PendingAdds, DrainReturnsEntriesInPushOrderAndEmpties) {
  PendingAdds pending(100);
  crdt::AddResult two_words = OneBit(3, 1, 5);
  two_words.new_bits[6] = 0x90;
  pending.Push(7, 1, std::vector<crdt::AddResult>{OneBit(2, 0, 1), two_words});
  pending.Push(8, 2, std::vector<crdt::AddResult>{OneBit(9, 7, 63)});
  pending.Push(8, 2, std::vector<crdt::AddResult>{crdt::AddResult{}});  // no new bits: nothing queued
  PendingAdds::DropReport dropped{99, {}, true};
  const std::vector<PendingAdds::Entry> got = Drained(pending, &dropped);
  EXPECT_EQ(dropped.words, 0u);
  EXPECT_TRUE(dropped.by_generation.empty());
  EXPECT_FALSE(dropped.untracked);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(std::make_tuple(got[0].filter_uid, got[0].slot, got[0].word.index, got[0].word.bits),
            std::make_tuple(7u, 1u, 2u * 8 + 0, uint64_t{1} << 1));
  EXPECT_EQ(std::make_tuple(got[1].word.index, got[1].word.bits), std::make_tuple(3u * 8 + 1, uint64_t{1} << 5));
  EXPECT_EQ(std::make_tuple(got[2].word.index, got[2].word.bits), std::make_tuple(3u * 8 + 6, uint64_t{0x90}));
  EXPECT_EQ(std::make_tuple(got[3].filter_uid, got[3].slot, got[3].word.index), std::make_tuple(8u, 2u, 9u * 8 + 7));
  EXPECT_TRUE(Drained(pending, &dropped).empty());
}

// The buffer handed to Drain becomes the queue of the next pushes: during a
// bulk load two allocations take turns (RecycleBuffer keeps a used one).
TEST(PendingAdds, DrainHandsTheCallersBufferToTheNextPushes) {
  PendingAdds pending(100);
  PendingAdds::DropReport dropped;
  std::vector<PendingAdds::Entry> first(64, PendingAdds::Entry{1, 0, {0, 1}});
  const PendingAdds::Entry* first_data = first.data();
  pending.Push(7, 1, std::vector<crdt::AddResult>{OneBit(2, 0, 1)});
  pending.Drain(&first, &dropped);  // first's old entries are dropped, not returned
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].filter_uid, 7u);
  pending.Push(8, 1, std::vector<crdt::AddResult>{OneBit(3, 0, 1)});
  std::vector<PendingAdds::Entry> second;
  pending.Drain(&second, &dropped);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].filter_uid, 8u);
  EXPECT_EQ(second.data(), first_data);  // pushed into the buffer handed in first
}

TEST(PendingAdds, PushesPastTheBoundAreDroppedWholeAndCounted) {
  PendingAdds pending(3);
  pending.Push(1, 0, std::vector<crdt::AddResult>{OneBit(0, 0, 0), OneBit(1, 0, 0)});  // 2 words: fits
  pending.Push(1, 0, std::vector<crdt::AddResult>{OneBit(2, 0, 0), OneBit(3, 0, 0)});  // would be 4: dropped
  pending.Push(1, 0, std::vector<crdt::AddResult>{OneBit(4, 0, 0)});                   // 3: fits
  PendingAdds::DropReport dropped;
  std::vector<PendingAdds::Entry> got = Drained(pending, &dropped);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(dropped.words, 2u);
  // Draining frees the room again.
  pending.Push(1, 0, std::vector<crdt::AddResult>{OneBit(5, 0, 0), OneBit(6, 0, 0), OneBit(7, 0, 0)});
  got = Drained(pending, &dropped);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(dropped.words, 0u);
}

// What was dropped is told per generation (words and newly set bits), so the
// driver can count the bits and mark that generation's summaries stale
// without scanning the filters.
TEST(PendingAdds, DroppedWordsAreToldPerGeneration) {
  PendingAdds pending(1);
  crdt::AddResult three_bits = OneBit(4, 2, 1);
  three_bits.new_bits[2] |= 0x30;
  three_bits.new_bits[5] = 1;
  pending.Push(5, 0, std::vector<crdt::AddResult>{OneBit(0, 0, 0)});  // fills the queue
  pending.Push(5, 0, std::vector<crdt::AddResult>{three_bits});       // 2 words, 4 bits: dropped
  pending.Push(6, 2, std::vector<crdt::AddResult>{OneBit(1, 0, 0)});  // dropped
  pending.Push(5, 0, std::vector<crdt::AddResult>{OneBit(2, 3, 3)});  // dropped
  PendingAdds::DropReport dropped;
  EXPECT_EQ(Drained(pending, &dropped).size(), 1u);
  EXPECT_EQ(dropped.words, 4u);
  EXPECT_FALSE(dropped.untracked);
  ASSERT_EQ(dropped.by_generation.size(), 2u);
  const PendingAdds::Dropped& a = dropped.by_generation[0];
  const PendingAdds::Dropped& b = dropped.by_generation[1];
  EXPECT_EQ(std::make_tuple(a.filter_uid, a.slot, a.words, a.bits), std::make_tuple(5u, 0u, 3u, 5u));
  EXPECT_EQ(std::make_tuple(b.filter_uid, b.slot, b.words, b.bits), std::make_tuple(6u, 2u, 1u, 1u));
  // Past kMaxDroppedGenerations generations, the report says it lost track.
  pending.Push(5, 0, std::vector<crdt::AddResult>{OneBit(0, 0, 0)});
  for (uint64_t uid = 0; uid <= PendingAdds::kMaxDroppedGenerations; ++uid) {
    pending.Push(100 + uid, 0, std::vector<crdt::AddResult>{OneBit(1, 0, 0)});
  }
  EXPECT_EQ(Drained(pending, &dropped).size(), 1u);
  EXPECT_EQ(dropped.words, PendingAdds::kMaxDroppedGenerations + 1);
  EXPECT_TRUE(dropped.untracked);
  EXPECT_TRUE(dropped.by_generation.empty());
}

// Four pushers and a draining thread: every pushed word comes out exactly
// once or is counted as dropped, and each pusher's words come out in order.
TEST(PendingAdds, ConcurrentPushesAreDrainedExactlyOnce) {
  constexpr int kPushers = 4, kPerPusher = 5000;
  PendingAdds pending(2000);
  std::atomic<int> finished{0};
  std::vector<PendingAdds::Entry> drained;
  uint64_t dropped_total = 0;
  std::thread drainer([&] {
    while (true) {
      const bool last = finished.load() == kPushers;  // read before the final drain
      PendingAdds::DropReport dropped;
      for (const PendingAdds::Entry& e : Drained(pending, &dropped)) drained.push_back(e);
      dropped_total += dropped.words;
      if (last) break;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> pushers;
  for (int t = 0; t < kPushers; ++t) {
    pushers.emplace_back([&, t] {
      for (int i = 0; i < kPerPusher; ++i) {
        pending.Push(static_cast<uint64_t>(t), 0, std::vector<crdt::AddResult>{OneBit(static_cast<uint64_t>(i), 0, 0)});
      }
      ++finished;
    });
  }
  for (auto& p : pushers) p.join();
  drainer.join();
  EXPECT_EQ(drained.size() + dropped_total, uint64_t{kPushers} * kPerPusher);
  std::set<std::pair<uint64_t, uint64_t>> seen;
  std::vector<int64_t> last_block(kPushers, -1);
  for (const PendingAdds::Entry& e : drained) {
    EXPECT_TRUE(seen.insert({e.filter_uid, e.word.index}).second) << "drained twice";
    const int64_t block = static_cast<int64_t>(e.word.index / 8);
    EXPECT_GT(block, last_block[e.filter_uid]) << "out of push order";
    last_block[e.filter_uid] = block;
  }
}

}  // namespace
}  // namespace pollen::node
