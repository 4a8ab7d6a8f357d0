#include "node/core/name_pool.h"

#include <cassert>

#include "absl/hash/hash.h"

namespace pollen::node {

NamePool::NamePool() : index_(0, TextHash{this}, TextEq{this}) {}

size_t NamePool::TextHash::operator()(std::string_view text) const { return absl::Hash<std::string_view>{}(text); }

NamePool::Id NamePool::Find(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? kNone : *it;
}

NamePool::Id NamePool::Intern(std::string_view text) {
  if (const Id found = Find(text); found != kNone) {
    assert(entries_[found].refs < UINT32_MAX);
    ++entries_[found].refs;
    return found;
  }
  Id id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    assert(entries_.size() < kNone);
    id = static_cast<Id>(entries_.size());
    entries_.emplace_back();
  }
  entries_[id].text = std::string(text);
  entries_[id].refs = 1;
  index_.insert(id);  // after the text is in place: the hasher reads it
  return id;
}

void NamePool::Release(Id id) {
  assert(id < entries_.size() && entries_[id].refs > 0);
  if (--entries_[id].refs > 0) return;
  index_.erase(id);  // before the text goes: the hasher reads it
  std::string().swap(entries_[id].text);  // frees a long string's buffer too
  free_.push_back(id);
}

const std::string& NamePool::at(Id id) const {
  assert(id < entries_.size() && entries_[id].refs > 0);
  return entries_[id].text;
}

}  // namespace pollen::node
