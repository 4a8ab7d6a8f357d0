// MemberTable: slots found by name, stable entries, reuse of erased slots,
// name order, against a std::map model under random inserts and erases.
#include "node/core/member_table.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "node/core/rng.h"

namespace pollen::node {
namespace {

MemberEntry Entry(const std::string& name, uint64_t incarnation) {
  MemberEntry e;
  e.name = name;
  e.address = name + ":1";
  e.incarnation = incarnation;
  return e;
}

TEST(MemberTable, FindsInsertedNamesAndForgetsErasedOnes) {
  MemberTable t;
  EXPECT_EQ(t.Find("a"), kNoSlot);
  const MemberSlot a = t.Insert(Entry("a", 1));
  const MemberSlot b = t.Insert(Entry("b", 2));
  EXPECT_NE(a, b);
  EXPECT_EQ(t.Find("a"), a);
  EXPECT_EQ(t.at(b).incarnation, 2u);
  EXPECT_EQ(t.at(b).slot, b);
  const MemberEntry* b_entry = &t.at(b);
  t.Erase(a);
  EXPECT_EQ(t.Find("a"), kNoSlot);
  EXPECT_EQ(t.size(), 1u);
  const MemberSlot c = t.Insert(Entry("c", 3));
  EXPECT_EQ(c, a);  // the freed slot is reused
  EXPECT_EQ(&t.at(b), b_entry);  // other entries did not move
  EXPECT_EQ(t.Find("c"), c);
  EXPECT_EQ(t.Find("a"), kNoSlot);
}

TEST(MemberTable, MatchesAMapUnderRandomInsertsAndErases) {
  MemberTable t;
  std::map<std::string, uint64_t> model;
  std::map<std::string, const MemberEntry*> addresses;  // entries never move while present
  Rng rng(7);
  for (int step = 0; step < 20000; ++step) {
    const std::string name = "node-" + std::to_string(rng.Below(300));
    const MemberSlot slot = t.Find(name);
    ASSERT_EQ(slot != kNoSlot, model.count(name) == 1) << name;
    if (slot == kNoSlot) {
      const MemberSlot added = t.Insert(Entry(name, static_cast<uint64_t>(step)));
      model[name] = static_cast<uint64_t>(step);
      addresses[name] = &t.at(added);
    } else if (rng.Below(2) == 0) {
      ASSERT_EQ(&t.at(slot), addresses[name]);
      ASSERT_EQ(t.at(slot).incarnation, model[name]);
      t.Erase(slot);
      model.erase(name);
      addresses.erase(name);
    }
    ASSERT_EQ(t.size(), model.size());
  }
  std::vector<std::string> sorted;
  for (MemberSlot slot : t.SortedByName()) sorted.push_back(t.at(slot).name);
  std::vector<std::string> expected;
  for (const auto& [name, incarnation] : model) expected.push_back(name);
  EXPECT_EQ(sorted, expected);
  size_t visited = 0;
  t.ForEach([&](const MemberEntry& e) {
    ++visited;
    EXPECT_EQ(model.at(e.name), e.incarnation);
  });
  EXPECT_EQ(visited, model.size());
}

}  // namespace
}  // namespace pollen::node
