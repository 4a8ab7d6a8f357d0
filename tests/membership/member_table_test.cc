// MemberTable and NamePool: slots found by name, stable entries, reuse of
// erased slots, name order and shared, counted names, against std::map models
// under random inserts, erases and address changes.
#include "node/core/member_table.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "node/core/name_pool.h"
#include "node/core/rng.h"

namespace pollen::node {
namespace {

MemberSlot Add(MemberTable& t, const std::string& name, uint64_t incarnation) {
  MemberEntry& e = t.Insert(name, name + ":1");
  e.incarnation = incarnation;
  return e.slot;
}

TEST(NamePool, InternsOnceCountsReferencesAndFreesAtZero) {
  NamePool pool;
  const NamePool::Id a = pool.Intern("alpha");
  EXPECT_EQ(pool.Intern("alpha"), a);
  EXPECT_EQ(pool.at(a), "alpha");
  EXPECT_EQ(pool.Find("alpha"), a);
  EXPECT_EQ(pool.Find("beta"), NamePool::kNone);
  const std::string* text = &pool.at(a);
  const NamePool::Id b = pool.Intern(std::string(40, 'b'));  // a heap-allocated string
  EXPECT_EQ(&pool.at(a), text);  // did not move
  pool.Release(a);
  EXPECT_EQ(pool.Find("alpha"), a);  // one reference left
  pool.Release(a);
  EXPECT_EQ(pool.Find("alpha"), NamePool::kNone);
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool.Intern("gamma"), a);  // the freed id is reused
  EXPECT_EQ(pool.at(b), std::string(40, 'b'));
}

TEST(NamePoolDeathTest, AFrozenPoolRefusesNewStringsAndLastReleases) {
  // Either would change the index under another thread's reads (shared mode).
  NamePool pool;
  const NamePool::Id a = pool.Intern("alpha");
  pool.Freeze();
  EXPECT_TRUE(pool.frozen());
  EXPECT_EQ(pool.Intern("alpha"), a);  // held text: counted, allowed
  EXPECT_EQ(pool.references(a), 2u);
  pool.Release(a);
  EXPECT_EQ(pool.references(a), 1u);
  EXPECT_DEATH(pool.Intern("beta"), "Intern of a new string in shared mode");
  EXPECT_DEATH(pool.Release(a), "Release of the last reference in shared mode");
  EXPECT_EQ(pool.at(a), "alpha");
}

TEST(MemberTable, FindsInsertedNamesAndForgetsErasedOnes) {
  auto pool = std::make_shared<NamePool>();
  MemberTable t(pool);
  EXPECT_EQ(t.Find("a"), kNoSlot);
  const MemberSlot a = Add(t, "a", 1);
  const MemberSlot b = Add(t, "b", 2);
  EXPECT_NE(a, b);
  EXPECT_EQ(t.Find("a"), a);
  EXPECT_EQ(t.at(b).incarnation, 2u);
  EXPECT_EQ(t.at(b).slot, b);
  EXPECT_EQ(t.name(t.at(b)), "b");
  EXPECT_EQ(t.address(t.at(b)), "b:1");
  const MemberEntry* b_entry = &t.at(b);
  t.Erase(a);
  EXPECT_EQ(t.Find("a"), kNoSlot);
  EXPECT_EQ(pool->Find("a"), NamePool::kNone);  // released
  EXPECT_EQ(t.size(), 1u);
  const MemberSlot c = Add(t, "c", 3);
  EXPECT_EQ(c, a);  // the freed slot is reused
  EXPECT_EQ(&t.at(b), b_entry);  // other entries did not move
  EXPECT_EQ(t.Find("c"), c);
  EXPECT_EQ(t.Find("a"), kNoSlot);
  t.SetAddress(t.at(c), "c:2");
  EXPECT_EQ(t.address(t.at(c)), "c:2");
  EXPECT_EQ(pool->Find("c:1"), NamePool::kNone);
}

TEST(MemberTable, TablesSharingAPoolKeepTheirOwnMembers) {
  auto pool = std::make_shared<NamePool>();
  {
    MemberTable one(pool), two(pool);
    Add(one, "x", 1);
    Add(two, "x", 2);
    Add(two, "y", 3);
    EXPECT_EQ(pool->size(), 4u);  // x, x:1, y, y:1
    EXPECT_EQ(one.Find("y"), kNoSlot);
    EXPECT_EQ(one.at(one.Find("x")).incarnation, 1u);
    EXPECT_EQ(two.at(two.Find("x")).incarnation, 2u);
    two.Erase(two.Find("x"));
    EXPECT_EQ(one.Find("x"), MemberSlot{0});  // still held by the other table
  }
  EXPECT_EQ(pool->size(), 0u);  // the tables released everything
}

// Apart, each pool holds only its own kind, every reference goes back to
// the pool it came from, and the name ids stay dense: a table's index is no
// longer than the names pool's id count.
TEST(MemberTable, NamesAndAddressesInPoolsOfTheirOwn) {
  auto names = std::make_shared<NamePool>();
  auto addresses = std::make_shared<NamePool>();
  {
    MemberTable one(names, addresses), two(names, addresses);
    for (int i = 0; i < 100; ++i) Add(one, "n" + std::to_string(i), 1);
    for (int i = 99; i >= 0; --i) Add(two, "n" + std::to_string(i), 1);
    EXPECT_EQ(names->size(), 100u);
    EXPECT_EQ(names->ids(), 100u);  // 0 .. 99: no address took a name id
    EXPECT_EQ(addresses->size(), 100u);
    EXPECT_EQ(names->Find("n7:1"), NamePool::kNone);
    EXPECT_EQ(addresses->Find("n7"), NamePool::kNone);
    const MemberSlot s = one.Find("n7");
    ASSERT_NE(s, kNoSlot);
    one.SetAddress(one.at(s), "elsewhere:2");
    EXPECT_EQ(one.address(one.at(s)), "elsewhere:2");
    EXPECT_NE(addresses->Find("n7:1"), NamePool::kNone);  // still two's
    two.Erase(two.Find("n7"));
    EXPECT_EQ(addresses->Find("n7:1"), NamePool::kNone);
    EXPECT_EQ(one.Find("n7"), s);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(two.Find("n" + std::to_string(i)) == kNoSlot, i == 7);
  }
  EXPECT_EQ(names->size(), 0u);
  EXPECT_EQ(addresses->size(), 0u);
}

TEST(MemberTable, MatchesAMapUnderRandomInsertsErasesAndMoves) {
  auto pool = std::make_shared<NamePool>();
  MemberTable t(pool);
  std::map<std::string, std::pair<uint64_t, std::string>> model;  // name -> (incarnation, address)
  std::map<std::string, const MemberEntry*> addresses;  // entries never move while present
  Rng rng(7);
  for (int step = 0; step < 20000; ++step) {
    const std::string name = "node-" + std::to_string(rng.Below(300));
    const MemberSlot slot = t.Find(name);
    ASSERT_EQ(slot != kNoSlot, model.count(name) == 1) << name;
    if (slot == kNoSlot) {
      const MemberSlot added = Add(t, name, static_cast<uint64_t>(step));
      model[name] = {static_cast<uint64_t>(step), name + ":1"};
      addresses[name] = &t.at(added);
    } else if (rng.Below(3) == 0) {
      const std::string moved = "host-" + std::to_string(rng.Below(5));  // shared by several members
      t.SetAddress(t.at(slot), moved);
      model[name].second = moved;
    } else if (rng.Below(2) == 0) {
      ASSERT_EQ(&t.at(slot), addresses[name]);
      ASSERT_EQ(t.at(slot).incarnation, model[name].first);
      ASSERT_EQ(t.address(t.at(slot)), model[name].second);
      t.Erase(slot);
      model.erase(name);
      addresses.erase(name);
    }
    ASSERT_EQ(t.size(), model.size());
  }
  std::vector<std::string> sorted;
  for (MemberSlot slot : t.SortedByName()) sorted.push_back(t.name(t.at(slot)));
  std::vector<std::string> expected;
  std::map<std::string, int> texts;  // what the pool must hold: every name and address in use
  for (const auto& [name, value] : model) {
    expected.push_back(name);
    texts[name] = 1;
    texts[value.second] = 1;
  }
  EXPECT_EQ(sorted, expected);
  EXPECT_EQ(pool->size(), texts.size());
  size_t visited = 0;
  t.ForEach([&](const MemberEntry& e) {
    ++visited;
    EXPECT_EQ(model.at(t.name(e)).first, e.incarnation);
  });
  EXPECT_EQ(visited, model.size());
}

}  // namespace
}  // namespace pollen::node
