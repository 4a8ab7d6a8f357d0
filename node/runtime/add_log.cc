#include "node/runtime/add_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "node/runtime/add_log_format.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

absl::Status Errno(std::string_view what) {
  return absl::InternalError(Cat(what, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("add log write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

void SyncDir(const std::string& dir) {
  const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}

}  // namespace

std::string AddLogSegmentPath(const std::string& dir, uint64_t id) {
  char name[48];
  std::snprintf(name, sizeof name, "adds-%020" PRIu64 ".log", id);
  return Cat(dir, "/", name);
}

std::vector<uint64_t> ListAddLogSegments(const std::string& dir) {
  std::vector<uint64_t> ids;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ids;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (!ConsumePrefix(&name, "adds-") || !ConsumeSuffix(&name, ".log") || name.size() != 20) continue;
    uint64_t id = 0;
    if (ParseUnsigned(name, &id)) ids.push_back(id);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

AddLog::AddLog(std::string dir, AppendFsync mode) : dir_(std::move(dir)), mode_(mode) {}

absl::StatusOr<std::unique_ptr<AddLog>> AddLog::Open(const std::string& dir, uint64_t first_id, AppendFsync mode) {
  std::unique_ptr<AddLog> log(new AddLog(dir, mode));
  {
    std::lock_guard io(log->io_mu_);
    if (absl::Status s = log->OpenSegmentLocked(first_id); !s.ok()) return s;
  }
  log->writer_ = std::thread([p = log.get()] { p->WriterLoop(); });
  return log;
}

AddLog::~AddLog() { (void)Close(); }

absl::Status AddLog::OpenSegmentLocked(uint64_t id) {
  const std::string path = AddLogSegmentPath(dir_, id);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Errno(Cat("create ", path));
  if (absl::Status s = WriteAll(fd, kAddLogMagic); !s.ok()) {
    ::close(fd);
    return s;
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return Errno("fsync new add log");
  }
  SyncDir(dir_);
  fd_ = fd;
  segment_ = id;
  return absl::OkStatus();
}

template <typename EncodeFn>
absl::Status AddLog::Enqueue(size_t records, bool wait, EncodeFn encode) {
  std::unique_lock lock(mu_);
  if (!error_.ok()) return error_;
  if (closed_) return absl::FailedPreconditionError("add log closed");
  done_cv_.wait(lock, [&] { return pending_.size() < kMaxPendingBytes || !error_.ok() || closed_; });
  if (!error_.ok()) return error_;
  if (closed_) return absl::FailedPreconditionError("add log closed");
  const bool was_idle = appended_seq_ == written_seq_;
  encode(&pending_);
  records_ += records;
  const uint64_t seq = ++appended_seq_;
  const bool sync_wait = wait && mode_ == AppendFsync::kAlways;
  if (sync_wait) ++sync_waiters_;
  // The writer wakes for the first append after it caught up; later ones ride along.
  if (was_idle || sync_wait) work_cv_.notify_one();
  if (!sync_wait) return absl::OkStatus();
  done_cv_.wait(lock, [&] { return synced_seq_ >= seq || !error_.ok(); });
  --sync_waiters_;
  return error_;
}

absl::Status AddLog::Append(std::string_view filter, std::span<const std::string_view> keys) {
  return AppendAdds(filter, keys, true);
}

absl::Status AddLog::AppendQueued(std::string_view filter, std::span<const std::string_view> keys) {
  return AppendAdds(filter, keys, false);
}

absl::Status AddLog::AppendAdds(std::string_view filter, std::span<const std::string_view> keys, bool wait) {
  if (filter.size() > kMaxLoggedFilterBytes) return absl::InvalidArgumentError("filter name too long for the add log");
  for (std::string_view k : keys) {
    if (k.size() > kMaxLoggedKeyBytes) return absl::InvalidArgumentError("key too long for the add log");
  }
  return Enqueue(keys.size(), wait, [&](std::string* out) {
    for (std::string_view k : keys) AppendAddRecord(filter, k, out);
  });
}

absl::Status AddLog::AppendCreate(std::string_view filter, std::string_view entry, bool wait) {
  if (filter.size() > kMaxLoggedFilterBytes) return absl::InvalidArgumentError("filter name too long for the add log");
  if (entry.empty() || entry.size() > kMaxLoggedEntryBytes) {
    return absl::InvalidArgumentError("catalog entry size out of range for the add log");
  }
  return Enqueue(1, wait, [&](std::string* out) { AppendCreateRecord(filter, entry, out); });
}

absl::Status AddLog::AppendDelete(std::string_view filter, uint64_t deleted_through, bool wait) {
  if (filter.size() > kMaxLoggedFilterBytes) return absl::InvalidArgumentError("filter name too long for the add log");
  return Enqueue(1, wait, [&](std::string* out) { AppendDeleteRecord(filter, deleted_through, out); });
}

absl::Status AddLog::WaitDurable() {
  if (mode_ != AppendFsync::kAlways) return absl::OkStatus();
  std::unique_lock lock(mu_);
  if (!error_.ok()) return error_;
  if (closed_) return absl::FailedPreconditionError("add log closed");
  const uint64_t seq = appended_seq_;
  if (synced_seq_ >= seq) return absl::OkStatus();
  ++sync_waiters_;
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return synced_seq_ >= seq || !error_.ok(); });
  --sync_waiters_;
  return error_;
}

void AddLog::NotifyDurable(std::function<void(absl::Status)> done) {
  absl::Status now;
  {
    std::lock_guard lock(mu_);
    // Queued behind earlier notices even when already durable, so notices
    // run in the order they were asked for.
    if (mode_ == AppendFsync::kAlways && error_.ok() && !closed_ &&
        (synced_seq_ < appended_seq_ || !notices_.empty())) {
      notices_.push_back(Notice{appended_seq_, std::move(done)});
      work_cv_.notify_one();
      return;
    }
    now = closed_ && error_.ok() ? absl::FailedPreconditionError("add log closed") : error_;
  }
  done(now);
}

void AddLog::RunDueNotices() {
  std::vector<Notice> due;
  absl::Status failed;
  uint64_t synced = 0;
  {
    std::lock_guard lock(mu_);
    failed = error_.ok() ? absl::FailedPreconditionError("add log closed") : error_;
    synced = synced_seq_;
    // Bounded by the queue: each notice leaves it once.
    while (!notices_.empty() && (notices_.front().seq <= synced_seq_ || !error_.ok() || closed_)) {
      due.push_back(std::move(notices_.front()));
      notices_.pop_front();
    }
  }
  for (Notice& n : due) n.done(n.seq <= synced ? absl::OkStatus() : failed);
}

absl::Status AddLog::WritePendingLocked(bool sync) {
  std::string batch;
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    batch.swap(pending_);
    seq = appended_seq_;
  }
  done_cv_.notify_all();  // room in the buffer again
  absl::Status s = batch.empty() ? absl::OkStatus() : WriteAll(fd_, batch);
  if (s.ok() && sync && ::fsync(fd_) != 0) s = Errno("add log fsync");
  std::lock_guard lock(mu_);
  if (!s.ok()) {
    if (error_.ok()) error_ = s;
  } else {
    written_seq_ = seq;
    if (sync) {
      synced_seq_ = seq;
      ++fsyncs_;
    }
  }
  done_cv_.notify_all();
  return s;
}

void AddLog::WriterLoop() {
  using Clock = std::chrono::steady_clock;
  auto last_sync = Clock::now();
  std::unique_lock lock(mu_);
  while (true) {
    // Wake for new data, or each second to fsync under everysec.
    work_cv_.wait_for(lock, std::chrono::milliseconds(mode_ == AppendFsync::kAlways ? 1000 : 100),
                      [&] {
                        return stopping_ || appended_seq_ != written_seq_ || !error_.ok() ||
                               (sync_waiters_ > 0 && synced_seq_ != appended_seq_) || !notices_.empty();
                      });
    if (!error_.ok()) {  // sticky: nothing more is written; wait to be closed
      lock.unlock();
      RunDueNotices();  // each gets the error
      lock.lock();
      work_cv_.wait(lock, [&] { return stopping_; });
      return;
    }
    const bool stop = stopping_;
    const bool dirty_data = appended_seq_ != written_seq_;
    const bool need_sync_always =
        mode_ == AppendFsync::kAlways &&
        (sync_waiters_ > 0 || (!notices_.empty() && synced_seq_ < notices_.back().seq));
    const bool unsynced = synced_seq_ != appended_seq_;
    lock.unlock();
    if (!stop && mode_ != AppendFsync::kAlways && dirty_data) {
      // Gather a millisecond of appends into one write().
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    {
      std::lock_guard io(io_mu_);
      bool sync = need_sync_always;
      if (mode_ == AppendFsync::kEverySec && unsynced && Clock::now() - last_sync >= std::chrono::seconds(1)) {
        sync = true;
      }
      if (dirty_data || sync) {
        if (fd_ >= 0) (void)WritePendingLocked(sync);
        if (sync) last_sync = Clock::now();
      }
    }
    RunDueNotices();
    lock.lock();
    if (stop) return;
  }
}

absl::StatusOr<uint64_t> AddLog::Rotate() {
  std::lock_guard io(io_mu_);
  if (fd_ < 0) return absl::FailedPreconditionError("add log closed");
  if (absl::Status s = WritePendingLocked(true); !s.ok()) return s;
  const uint64_t closed = segment_;
  ::close(fd_);
  fd_ = -1;
  if (absl::Status s = OpenSegmentLocked(closed + 1); !s.ok()) {
    std::lock_guard lock(mu_);
    if (error_.ok()) error_ = s;
    return s;
  }
  return closed;
}

absl::Status AddLog::Flush() {
  std::lock_guard io(io_mu_);
  if (fd_ < 0) return absl::FailedPreconditionError("add log closed");
  return WritePendingLocked(true);
}

absl::Status AddLog::Close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return error_;
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  absl::Status s;
  {
    std::lock_guard io(io_mu_);
    if (fd_ >= 0) {
      s = WritePendingLocked(true);
      ::close(fd_);
      fd_ = -1;
    }
  }
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    done_cv_.notify_all();
  }
  RunDueNotices();  // fsynced by the last write, or told the log closed
  std::lock_guard lock(mu_);
  return s.ok() ? error_ : s;
}

uint64_t AddLog::current_segment() const { return segment_.load(); }
uint64_t AddLog::records_appended() const {
  std::lock_guard lock(mu_);
  return records_;
}
uint64_t AddLog::fsyncs() const {
  std::lock_guard lock(mu_);
  return fsyncs_;
}

}  // namespace pollen::runtime
