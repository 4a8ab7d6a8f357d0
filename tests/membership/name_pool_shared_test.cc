// A frozen (shared-mode) NamePool under two threads, as pollen-sim's parallel
// windows use it: tables on both threads insert and erase the same pinned
// names at once, and every reference count comes out exact. Labelled
// "concurrency": CI runs it under TSan.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "node/core/member_table.h"
#include "node/core/name_pool.h"

namespace pollen::node {
namespace {

TEST(NamePoolShared, TablesOnTwoThreadsCountPinnedNamesExactly) {
  auto names = std::make_shared<NamePool>();
  auto addresses = std::make_shared<NamePool>();
  constexpr int kNames = 64;
  std::vector<NamePool::Id> pinned;
  for (int k = 0; k < kNames; ++k) {
    pinned.push_back(names->Intern("node-" + std::to_string(k)));
    addresses->Intern("sim-" + std::to_string(k) + ":7946");
  }
  names->Freeze();
  addresses->Freeze();
  auto churn = [&](int offset) {
    MemberTable table(names, addresses);
    for (int round = 0; round < 200; ++round) {
      for (int k = 0; k < kNames; ++k) {
        const int n = (k + offset) % kNames;
        table.Insert("node-" + std::to_string(n), "sim-" + std::to_string(n) + ":7946");
      }
      for (int k = 0; k < kNames; ++k) {
        const MemberSlot slot = table.Find("node-" + std::to_string(k));
        ASSERT_NE(slot, kNoSlot);
        ASSERT_EQ(table.address(table.at(slot)), "sim-" + std::to_string(k) + ":7946");
        table.Erase(slot);
      }
    }
  };
  std::thread other(churn, kNames / 2);
  churn(0);
  other.join();
  for (int k = 0; k < kNames; ++k) {
    EXPECT_EQ(names->references(pinned[static_cast<size_t>(k)]), 1u) << k;  // the pin alone
    EXPECT_EQ(names->Find("node-" + std::to_string(k)), pinned[static_cast<size_t>(k)]);
  }
  EXPECT_EQ(names->size(), static_cast<size_t>(kNames));
}

}  // namespace
}  // namespace pollen::node
