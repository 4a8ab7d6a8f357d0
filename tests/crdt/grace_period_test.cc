#include "crdt/grace_period.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "crdt/generations.h"
#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

// Synchronize must not return while a section entered before it is open. The
// sleep only gives a broken Synchronize time to return early; a correct one
// passes however slow the machine is.
TEST(GracePeriod, SynchronizeWaitsForAnOpenSection) {
  GracePeriod grace;
  std::atomic<bool> synced{false};
  std::thread writer;
  {
    const GracePeriod::Section section = grace.Enter();
    writer = std::thread([&] {
      grace.Synchronize();
      synced.store(true);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(synced.load());
  }
  writer.join();
  EXPECT_TRUE(synced.load());
}

TEST(GracePeriod, SynchronizeWithNoReadersReturns) {
  GracePeriod grace;
  for (int i = 0; i < 100; ++i) grace.Synchronize();
  { const GracePeriod::Section nested_outer = grace.Enter(); const GracePeriod::Section nested_inner = grace.Enter(); }
  grace.Synchronize();  // both sections ended: must not wait
}

// Readers check a canary in an object that a writer keeps replacing, poisoning
// and freeing after Synchronize: a reader that saw a freed object would read
// the poison (and ASan would report the use after free, TSan the race).
TEST(GracePeriod, NoReaderSeesAFreedObject) {
  struct Object {
    std::atomic<uint64_t> canary{0xC0FFEE};
  };
  GracePeriod grace;
  std::atomic<Object*> current{new Object};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const GracePeriod::Section section = grace.Enter();
        const Object* o = current.load(std::memory_order_seq_cst);
        if (o->canary.load(std::memory_order_relaxed) != 0xC0FFEE) bad.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  while (reads.load() < 3) std::this_thread::yield();  // readers are running
  for (int i = 0; i < 2000; ++i) {
    Object* old = current.exchange(new Object, std::memory_order_seq_cst);
    grace.Synchronize();
    old->canary.store(0xDEAD, std::memory_order_relaxed);
    delete old;
  }
  stop.store(true);
  for (auto& r : readers) r.join();
  delete current.load();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
}

// GenerationSet's lock-free reads under rotations that drop generations: two
// threads add and test while a third advances 300 epochs with G = 2. Every
// key must read present right after its add unless the window moved past its
// epoch in between; after the run, the keys of the last epoch all read present.
TEST(GracePeriod, GenerationSetReadsSurviveRotationsThatDropGenerations) {
  const ClusterSecret secret = testing::SecretFromSeed(21);
  auto set = *GenerationSet::Create(*MakeParams("drop", 1'000, 0.01, 2, secret), secret, 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> missed{0}, adds{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        adds.fetch_add(1, std::memory_order_relaxed);
        const std::string key = std::to_string(t) + ":" + std::to_string(i);
        const KeyAdd added = set->Add(key);
        const bool present = set->MightContain(key);
        // Present unless the window left the add's epoch: epoch now >= added + 2.
        if (!present && set->epoch() < EpochOfSlot(added.slot) + 2) missed.fetch_add(1);
        bool many[1] = {false};
        const std::string_view keys[1] = {key};
        set->MightContainMany(keys, many);
      }
    });
  }
  while (adds.load() < 2) std::this_thread::yield();  // both threads are running
  for (uint64_t e = 1; e <= 300; ++e) {
    ASSERT_TRUE(*set->Advance(e));
    std::this_thread::yield();  // let the adders run between rotations
  }
  stop.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(missed.load(), 0u);
  EXPECT_EQ(set->epochs(), (std::vector<uint64_t>{299, 300}));
  for (int i = 0; i < 100; ++i) {
    const std::string key = "after:" + std::to_string(i);
    set->Add(key);
    EXPECT_TRUE(set->MightContain(key));
  }
}

}  // namespace
}  // namespace pollen::crdt
