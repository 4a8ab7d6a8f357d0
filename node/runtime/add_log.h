// AddLog: the append-only log of adds, in numbered segment files
// "<dir>/adds-<id>.log" (format in add_log_format.h).
//
// Promises:
//   - Append is thread-safe. Records reach the file in one background writer
//     thread (group commit), so concurrent clients share write() and fsync()
//     calls. With kAlways, Append returns only after the record is fsynced
//     (Redis "appendfsync always": durable before the reply). With kEverySec
//     the writer fsyncs at most a second after a write; with kNone the OS
//     decides. In every mode the bytes are handed to the OS within a few
//     milliseconds, so a process crash (not an OS crash) loses at most those.
//   - Bounded: Append blocks while more than kMaxPendingBytes wait for the
//     writer (back-pressure instead of unbounded memory).
//   - Rotate() closes the current segment (written and fsynced) and starts
//     the next one: every Append that returned before Rotate() began is in an
//     older segment, every Append that starts after Rotate() returned is in a
//     newer one. Used around snapshots (see persistence.h).
//   - After a write or fsync error, Append reports that error (sticky).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "node/runtime/config.h"

namespace pollen::runtime {

std::string AddLogSegmentPath(const std::string& dir, uint64_t id);
// Segment ids present in `dir`, ascending.
std::vector<uint64_t> ListAddLogSegments(const std::string& dir);

class AddLog {
 public:
  static constexpr size_t kMaxPendingBytes = 64u << 20;

  // Creates segment `first_id` (which must not exist) and starts the writer.
  static absl::StatusOr<std::unique_ptr<AddLog>> Open(const std::string& dir, uint64_t first_id, AppendFsync mode);
  ~AddLog();  // Close()
  AddLog(const AddLog&) = delete;
  AddLog& operator=(const AddLog&) = delete;

  // Logs one record per key. Filter names longer than kMaxLoggedFilterBytes or
  // keys longer than kMaxLoggedKeyBytes are refused (InvalidArgument).
  absl::Status Append(std::string_view filter, std::span<const std::string_view> keys);
  // As Append, but only queues the records (like AppendCreate without `wait`).
  absl::Status AppendQueued(std::string_view filter, std::span<const std::string_view> keys);

  // Logs a create record (a filter's catalog entry, add_log_format.h). With
  // `wait` it returns like Append (under kAlways: once fsynced); without, it
  // only queues the record, and a later Append or WaitDurable makes it
  // durable (records reach the file in Append order). Bad sizes are refused.
  absl::Status AppendCreate(std::string_view filter, std::string_view entry, bool wait);
  // Logs a delete record (a tombstone), queued or waited for like AppendCreate.
  absl::Status AppendDelete(std::string_view filter, uint64_t deleted_through, bool wait);

  // Under kAlways: returns once every record appended before the call is
  // fsynced. Under kEverySec / kNone: returns at once (their promise holds).
  absl::Status WaitDurable();
  // WaitDurable without waiting: `done` gets what WaitDurable would return,
  // on the writer thread once the fsync is done (without the log's locks
  // held; notices run in the order they were asked for), or at once on the
  // caller's thread when there is nothing to wait for (kEverySec, kNone,
  // already durable, failed, closed). Close runs the notices still due.
  void NotifyDurable(std::function<void(absl::Status)> done);

  // Finishes the current segment and opens the next; returns the id of the
  // segment that was closed.
  absl::StatusOr<uint64_t> Rotate();

  // Writes and fsyncs everything appended so far.
  absl::Status Flush();

  // Flushes, stops the writer and closes the file. Idempotent.
  absl::Status Close();

  uint64_t current_segment() const;
  uint64_t records_appended() const;
  uint64_t fsyncs() const;

 private:
  AddLog(std::string dir, AppendFsync mode);
  // Adds `records` records (written by `encode` into pending_) and, with
  // `wait` under kAlways, waits until they are fsynced.
  template <typename EncodeFn>
  absl::Status Enqueue(size_t records, bool wait, EncodeFn encode);
  absl::Status AppendAdds(std::string_view filter, std::span<const std::string_view> keys, bool wait);
  absl::Status OpenSegmentLocked(uint64_t id);  // io_mu_ held
  void WriterLoop();
  // Writes what is pending (io_mu_ held); fsyncs when `sync`.
  absl::Status WritePendingLocked(bool sync);
  // Runs the notices that are due: fsynced, or the log failed or closed (mu_
  // not held).
  void RunDueNotices();

  const std::string dir_;
  const AppendFsync mode_;

  std::mutex io_mu_;  // the file: fd_, segment_; taken before mu_
  int fd_ = -1;
  std::atomic<uint64_t> segment_{0};

  mutable std::mutex mu_;  // the buffer and the sequence numbers
  std::condition_variable work_cv_;   // writer: work to do
  std::condition_variable done_cv_;   // appenders: progress made
  std::string pending_;
  uint64_t appended_seq_ = 0;  // Appends buffered
  uint64_t written_seq_ = 0;   // handed to write()
  uint64_t synced_seq_ = 0;    // fsynced
  uint64_t records_ = 0;
  uint64_t fsyncs_ = 0;
  uint64_t sync_waiters_ = 0;
  struct Notice {
    uint64_t seq;  // appended_seq_ when asked
    std::function<void(absl::Status)> done;
  };
  std::deque<Notice> notices_;  // NotifyDurable, in seq order
  absl::Status error_;
  bool stopping_ = false;
  bool closed_ = false;
  std::thread writer_;
};

}  // namespace pollen::runtime
