#include "node/core/name_pool.h"

#include <atomic>
#include <cassert>
#include <cstdio>
#include <cstdlib>

#include "absl/hash/hash.h"

namespace pollen::node {

NamePool::NamePool() : index_(0, TextHash{this}, TextEq{this}) {}

size_t NamePool::TextHash::operator()(std::string_view text) const { return absl::Hash<std::string_view>{}(text); }

NamePool::Id NamePool::Find(std::string_view text) const {
  auto it = index_.find(text);
  return it == index_.end() ? kNone : *it;
}

namespace {
[[noreturn]] void FrozenViolation(const char* what) {
  std::fprintf(stderr, "NamePool: %s in shared mode (the caller must pin every string first)\n", what);
  std::abort();
}
}  // namespace

// Relaxed: a count is only compared with zero by the thread that changes it;
// the strings themselves do not change in shared mode.
uint32_t NamePool::Refs(const Entry& e) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(e.refs)).load(std::memory_order_relaxed);
}

NamePool::Id NamePool::Intern(std::string_view text) {
  if (const Id found = Find(text); found != kNone) {
    const uint32_t before =
        std::atomic_ref<uint32_t>(entries_[found].refs).fetch_add(1, std::memory_order_relaxed);
    assert(before > 0 && before < UINT32_MAX);
    (void)before;
    return found;
  }
  if (frozen_) FrozenViolation("Intern of a new string");
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
  assert(id < entries_.size() && Refs(entries_[id]) > 0);
  if (std::atomic_ref<uint32_t>(entries_[id].refs).fetch_sub(1, std::memory_order_relaxed) > 1) return;
  if (frozen_) FrozenViolation("Release of the last reference");
  index_.erase(id);  // before the text goes: the hasher reads it
  std::string().swap(entries_[id].text);  // frees a long string's buffer too
  free_.push_back(id);
}

const std::string& NamePool::at(Id id) const {
  assert(id < entries_.size() && Refs(entries_[id]) > 0);
  return entries_[id].text;
}

uint32_t NamePool::references(Id id) const { return id < entries_.size() ? Refs(entries_[id]) : 0; }

}  // namespace pollen::node
