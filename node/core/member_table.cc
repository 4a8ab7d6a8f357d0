#include "node/core/member_table.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/hash/hash.h"

namespace pollen::node {

MemberTable::MemberTable() : index_(0, NameHash{this}, NameEq{this}) {}

size_t MemberTable::NameHash::operator()(std::string_view name) const { return absl::Hash<std::string_view>{}(name); }

size_t MemberTable::NameHash::operator()(MemberSlot slot) const {
  return (*this)(std::string_view(table->slots_[slot].name));
}

MemberSlot MemberTable::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? kNoSlot : *it;
}

MemberEntry& MemberTable::at(MemberSlot slot) {
  assert(slot < slots_.size() && !slots_[slot].name.empty());
  return slots_[slot];
}

const MemberEntry& MemberTable::at(MemberSlot slot) const {
  assert(slot < slots_.size() && !slots_[slot].name.empty());
  return slots_[slot];
}

MemberSlot MemberTable::Insert(MemberEntry entry) {
  assert(!entry.name.empty());
  assert(Find(entry.name) == kNoSlot);
  MemberSlot slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
    slots_[slot] = std::move(entry);
  } else {
    assert(slots_.size() < kNoSlot);
    slot = static_cast<MemberSlot>(slots_.size());
    slots_.push_back(std::move(entry));
  }
  slots_[slot].slot = slot;
  index_.insert(slot);  // after the name is in place: the hasher reads it
  return slot;
}

void MemberTable::Erase(MemberSlot slot) {
  assert(slot < slots_.size() && !slots_[slot].name.empty());
  index_.erase(slot);  // before the name goes: the hasher reads it
  slots_[slot] = MemberEntry{};
  free_.push_back(slot);
}

std::vector<MemberSlot> MemberTable::SortedByName() const {
  std::vector<MemberSlot> out(index_.begin(), index_.end());
  std::sort(out.begin(), out.end(), [this](MemberSlot a, MemberSlot b) { return slots_[a].name < slots_[b].name; });
  return out;
}

}  // namespace pollen::node
