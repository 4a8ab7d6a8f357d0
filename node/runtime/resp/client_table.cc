#include "node/runtime/resp/client_table.h"

#include <cassert>

#include "absl/strings/str_cat.h"

namespace pollen::resp {
namespace {

int64_t ToNs(ClientRecord::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int64_t SecondsBetween(ClientRecord::Clock::time_point from, ClientRecord::Clock::time_point to) {
  if (to <= from) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(to - from).count();
}

}  // namespace

ClientRecord::ClientRecord(uint64_t id, std::string addr, std::string laddr, int64_t fd, Clock::time_point created)
    : id_(id), addr_(std::move(addr)), laddr_(std::move(laddr)), fd_(fd), created_(created),
      last_interaction_ns_(ToNs(created)) {}

void ClientRecord::set_name(std::string_view name) {
  std::lock_guard<std::mutex> lock(name_mu_);
  name_.assign(name.data(), name.size());
}

std::string ClientRecord::name() const {
  std::lock_guard<std::mutex> lock(name_mu_);
  return name_;
}

void ClientRecord::touch(Clock::time_point now) {
  last_interaction_ns_.store(ToNs(now), std::memory_order_relaxed);
}

ClientRecord::Clock::time_point ClientRecord::last_interaction() const {
  return Clock::time_point(std::chrono::nanoseconds(last_interaction_ns_.load(std::memory_order_relaxed)));
}

void ClientTable::Add(std::shared_ptr<ClientRecord> record, std::function<void()> close) {
  assert(record != nullptr);
  const uint64_t id = record->id();
  std::lock_guard<std::mutex> lock(mu_);
  const bool inserted = clients_.emplace(id, Entry{std::move(record), std::move(close)}).second;
  assert(inserted);
  (void)inserted;
}

void ClientTable::Remove(uint64_t id) {
  std::function<void()> close;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  close = std::move(it->second.close);
  clients_.erase(it);
}

size_t ClientTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return clients_.size();
}

std::vector<std::shared_ptr<const ClientRecord>> ClientTable::List() const {
  std::vector<std::shared_ptr<const ClientRecord>> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(clients_.size());
  for (const auto& [id, e] : clients_) out.push_back(e.record);
  return out;
}

std::shared_ptr<const ClientRecord> ClientTable::Find(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : it->second.record;
}

ClientTable::KillResult ClientTable::Kill(const KillFilter& filter, uint64_t self_id) {
  KillResult result;
  if (filter.match_none) return result;
  std::vector<std::function<void()>> to_close;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, e] : clients_) {
      if (filter.id.has_value() && id != *filter.id) continue;
      if (filter.addr.has_value() && e.record->addr() != *filter.addr) continue;
      if (filter.laddr.has_value() && e.record->laddr() != *filter.laddr) continue;
      if (id == self_id) {
        if (filter.skip_self) continue;
        result.self_matched = true;
      } else if (e.close) {
        to_close.push_back(e.close);
      }
      ++result.killed;
    }
  }
  for (auto& close : to_close) close();
  return result;
}

std::string FormatClientLine(const ClientRecord& r, ClientRecord::Clock::time_point now) {
  // Fields Pollen does not track (multi, pub/sub, memory accounting) carry
  // Redis' values for a plain idle client, so parsers find every field.
  return absl::StrCat("id=", r.id(), " addr=", r.addr(), " laddr=", r.laddr(), " fd=", r.fd(), " name=", r.name(),
                      " age=", SecondsBetween(r.created(), now), " idle=", SecondsBetween(r.last_interaction(), now),
                      " flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=", r.query_buffer(),
                      " qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=",
                      r.last_command(), " user=default redir=-1 resp=", r.resp());
}

}  // namespace pollen::resp
