// WATCH's bookkeeping.
//
// A WATCHed filter counts as changed when its node::FilterVersion moved (a bit
// set by any client or by replication, a rotation, a creation, a replacement)
// or when a client ran a write command on it (TouchLog), as Redis counts every
// write to a key: a BF.ADD of an item already present touches its filter in
// RedisBloom, so it does here too. Writes are logged only while some session
// watches something, so the add path costs one relaxed load otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "node/core/node.h"

namespace pollen::resp {

class TouchLog {
 public:
  // Called by write commands after they succeed, from any RESP thread.
  void Touch(std::string_view key) {
    if (watchers_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard lock(mu_);
    auto it = touches_.find(key);
    if (it == touches_.end()) it = touches_.emplace(std::string(key), 0).first;
    ++it->second;
  }
  uint64_t Touches(std::string_view key) const {
    std::lock_guard lock(mu_);
    auto it = touches_.find(key);
    return it == touches_.end() ? 0 : it->second;
  }
  void AddWatcher() { watchers_.fetch_add(1, std::memory_order_acq_rel); }
  void RemoveWatcher() {
    std::lock_guard lock(mu_);
    // With no watcher left nobody compares counts: forget them (bounds the map
    // by the filters touched while someone watched).
    if (watchers_.fetch_sub(1, std::memory_order_acq_rel) == 1) touches_.clear();
  }

 private:
  std::atomic<int64_t> watchers_{0};
  mutable std::mutex mu_;
  std::map<std::string, uint64_t, std::less<>> touches_;  // guarded by mu_
};

// One session's WATCHed filters: what each looked like when watched.
class WatchSet {
 public:
  WatchSet() = default;
  WatchSet(const WatchSet&) = delete;
  WatchSet& operator=(const WatchSet&) = delete;
  ~WatchSet() { Clear(); }

  // Watches `key` unless already watched (the first WATCH's state counts).
  void Add(TouchLog& log, const node::Node& node, std::string_view key) {
    if (entries_.find(key) != entries_.end()) return;
    if (log_ == nullptr) {
      log_ = &log;
      log.AddWatcher();
    }
    entries_.emplace(std::string(key), Seen{node.Version(key), log.Touches(key)});
  }
  bool Unchanged(const node::Node& node) const {
    for (const auto& [key, seen] : entries_) {
      if (node.Version(key) != seen.version || log_->Touches(key) != seen.touches) return false;
    }
    return true;
  }
  void Clear() {
    if (log_ != nullptr) log_->RemoveWatcher();
    log_ = nullptr;
    entries_.clear();
  }
  bool empty() const { return entries_.empty(); }

 private:
  struct Seen {
    std::optional<node::FilterVersion> version;  // nullopt: absent when watched
    uint64_t touches = 0;
  };
  TouchLog* log_ = nullptr;  // set while entries_ is not empty
  std::map<std::string, Seen, std::less<>> entries_;
};

}  // namespace pollen::resp
