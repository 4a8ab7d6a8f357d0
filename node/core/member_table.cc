#include "node/core/member_table.h"

#include <algorithm>
#include <cassert>
#include <utility>


namespace pollen::node {

MemberTable::MemberTable(std::shared_ptr<NamePool> names, std::shared_ptr<NamePool> addresses)
    : names_(std::move(names)), addresses_(std::move(addresses)) {
  assert(names_ != nullptr && addresses_ != nullptr);
}

MemberTable::~MemberTable() {
  slots_.ForEach([this](MemberEntry& e) {
    if (e.name == NamePool::kNone) return;
    names_->Release(e.name);
    addresses_->Release(e.address);
  });
}

MemberSlot MemberTable::Find(std::string_view name) const {
  const NamePool::Id id = names_->Find(name);
  return id < slot_of_id_.size() ? slot_of_id_[id] : kNoSlot;  // kNone is never below the size
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
  e.address = addresses_->Intern(address);  // before the release: the same text keeps its id
  addresses_->Release(old);
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
  e.address = addresses_->Intern(address);
  e.slot = slot;
  if (e.name >= slot_of_id_.size()) {
    // Doubling keeps growth amortized O(1); the pool's id count bounds it
    // (no id is larger), which in pollen-sim, where every table ends up
    // holding nearly every id, leaves no doubling slack.
    const size_t ids = names_->ids();
    assert(e.name < ids);
    if (e.name >= slot_of_id_.capacity()) slot_of_id_.reserve(std::min(ids, std::max<size_t>(2 * slot_of_id_.capacity(), e.name + 1)));
    slot_of_id_.resize(size_t{e.name} + 1, kNoSlot);
  }
  assert(slot_of_id_[e.name] == kNoSlot);
  slot_of_id_[e.name] = slot;
  ++size_;
  return e;
}

void MemberTable::Erase(MemberSlot slot) {
  MemberEntry& e = at(slot);
  assert(slot_of_id_[e.name] == slot && size_ > 0);
  slot_of_id_[e.name] = kNoSlot;  // before the name goes: its id may be reused
  --size_;
  names_->Release(e.name);
  addresses_->Release(e.address);
  e = MemberEntry{};
  free_.push_back(slot);
}

std::vector<MemberSlot> MemberTable::SortedByName() const {
  std::vector<MemberSlot> out;
  out.reserve(size_);
  ForEach([&](const MemberEntry& e) { out.push_back(e.slot); });
  std::sort(out.begin(), out.end(), [this](MemberSlot a, MemberSlot b) { return name(slots_[a]) < name(slots_[b]); });
  return out;
}

}  // namespace pollen::node
