#include "node/core/member_table.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "absl/hash/hash.h"

namespace pollen::node {

MemberTable::MemberTable(std::shared_ptr<NamePool> names)
    : names_(std::move(names)), index_(0, NameHash{this}, NameEq{this}) {
  assert(names_ != nullptr);
}

MemberTable::~MemberTable() {
  for (MemberEntry& e : slots_) {
    if (e.name == NamePool::kNone) continue;
    names_->Release(e.name);
    names_->Release(e.address);
  }
}

size_t MemberTable::NameHash::operator()(NameKey key) const { return absl::Hash<NamePool::Id>{}(key.id); }

MemberSlot MemberTable::Find(std::string_view name) const {
  const NamePool::Id id = names_->Find(name);
  if (id == NamePool::kNone) return kNoSlot;
  auto it = index_.find(NameKey{id});
  return it == index_.end() ? kNoSlot : *it;
}

MemberEntry& MemberTable::at(MemberSlot slot) {
  assert(slot < slots_.size() && slots_[slot].name != NamePool::kNone);
  return slots_[slot];
}

const MemberEntry& MemberTable::at(MemberSlot slot) const {
  assert(slot < slots_.size() && slots_[slot].name != NamePool::kNone);
  return slots_[slot];
}

void MemberTable::SetAddress(MemberEntry& e, std::string_view address) {
  assert(e.name != NamePool::kNone);
  const NamePool::Id old = e.address;
  e.address = names_->Intern(address);  // before the release: the same text keeps its id
  names_->Release(old);
}

MemberEntry& MemberTable::Insert(std::string_view name, std::string_view address) {
  assert(!name.empty());
  assert(Find(name) == kNoSlot);
  MemberSlot slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    assert(slots_.size() < kNoSlot);
    slot = static_cast<MemberSlot>(slots_.size());
    slots_.emplace_back();
  }
  MemberEntry& e = slots_[slot];
  e.name = names_->Intern(name);
  e.address = names_->Intern(address);
  e.slot = slot;
  index_.insert(slot);  // after the name is in place: the hasher reads it
  return e;
}

void MemberTable::Erase(MemberSlot slot) {
  MemberEntry& e = at(slot);
  index_.erase(slot);  // before the name goes: the hasher reads it
  names_->Release(e.name);
  names_->Release(e.address);
  e = MemberEntry{};
  free_.push_back(slot);
}

std::vector<MemberSlot> MemberTable::SortedByName() const {
  std::vector<MemberSlot> out(index_.begin(), index_.end());
  std::sort(out.begin(), out.end(), [this](MemberSlot a, MemberSlot b) { return name(slots_[a]) < name(slots_[b]); });
  return out;
}

}  // namespace pollen::node
