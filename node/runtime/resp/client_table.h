// ClientTable: the open RESP connections as CLIENT LIST / CLIENT KILL see
// them. No I/O and no Asio: a connection registers a ClientRecord and a close
// callback, updates the record as it serves commands, and unregisters when it
// closes. Thread-safe (one mutex for the table; the per-command updates of a
// record are relaxed atomics and take no lock).
//
// Promises: ids are unique for the table's lifetime and increase (CLIENT ID);
// List() is sorted by id; Kill() never calls a close callback for the calling
// client (it reports it instead, so the caller can close after its reply) and
// calls the others outside the table lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pollen::resp {

// One connection's state. addr/laddr/fd/created are fixed at construction;
// the rest changes while the connection runs.
class ClientRecord {
 public:
  using Clock = std::chrono::steady_clock;

  ClientRecord(uint64_t id, std::string addr, std::string laddr, int64_t fd, Clock::time_point created);

  uint64_t id() const { return id_; }
  const std::string& addr() const { return addr_; }
  const std::string& laddr() const { return laddr_; }
  int64_t fd() const { return fd_; }
  Clock::time_point created() const { return created_; }

  // Name (CLIENT SETNAME). Any thread.
  void set_name(std::string_view name);
  std::string name() const;

  // The last command ("bf.add", "client|list"): `cmd` must have static
  // storage duration and be NUL-terminated (a string literal). Any thread.
  void set_last_command(const char* cmd) { last_cmd_.store(cmd, std::memory_order_relaxed); }
  const char* last_command() const { return last_cmd_.load(std::memory_order_relaxed); }

  // Last time the client sent something (for idle=). Any thread.
  void touch(Clock::time_point now);
  Clock::time_point last_interaction() const;

  // Bytes of unparsed input held (qbuf=). Any thread.
  void set_query_buffer(uint64_t bytes) { qbuf_.store(bytes, std::memory_order_relaxed); }
  void set_resp(int version) { resp_.store(version, std::memory_order_relaxed); }  // HELLO 2|3
  int resp() const { return resp_.load(std::memory_order_relaxed); }
  uint64_t query_buffer() const { return qbuf_.load(std::memory_order_relaxed); }

 private:
  const uint64_t id_;
  const std::string addr_;
  const std::string laddr_;
  const int64_t fd_;
  const Clock::time_point created_;
  mutable std::mutex name_mu_;
  std::string name_;  // guarded by name_mu_
  std::atomic<const char*> last_cmd_{"NULL"};
  std::atomic<int64_t> last_interaction_ns_;
  std::atomic<uint64_t> qbuf_{0};
  std::atomic<int> resp_{2};
};

// Which clients CLIENT KILL closes; an unset field matches every client.
struct KillFilter {
  std::optional<uint64_t> id;
  std::optional<std::string> addr;
  std::optional<std::string> laddr;
  bool match_none = false;  // e.g. TYPE master: Pollen has only normal clients
  bool skip_self = true;    // SKIPME yes (the default of the filter form)
};

class ClientTable {
 public:
  ClientTable() = default;
  ClientTable(const ClientTable&) = delete;
  ClientTable& operator=(const ClientTable&) = delete;

  uint64_t NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed); }

  // `close` is called (from any thread, at most once per Kill) to close the
  // connection; it must not call back into the table synchronously.
  void Add(std::shared_ptr<ClientRecord> record, std::function<void()> close);
  void Remove(uint64_t id);
  size_t size() const;

  std::vector<std::shared_ptr<const ClientRecord>> List() const;
  std::shared_ptr<const ClientRecord> Find(uint64_t id) const;

  struct KillResult {
    size_t killed = 0;       // including self when it matched
    bool self_matched = false;  // the caller must close itself after replying
  };
  KillResult Kill(const KillFilter& filter, uint64_t self_id);

 private:
  struct Entry {
    std::shared_ptr<ClientRecord> record;
    std::function<void()> close;
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> clients_;  // guarded by mu_
  std::atomic<uint64_t> next_id_{1};
};

// One CLIENT LIST / CLIENT INFO line in Redis 7's field order, without the
// trailing newline. `now` gives age= and idle=.
std::string FormatClientLine(const ClientRecord& record, ClientRecord::Clock::time_point now);

}  // namespace pollen::resp
