#include "node/runtime/persistence.h"

#include <sodium.h>

#include "node/core/printable_name.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <stop_token>
#include <thread>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "crdt/snapshot.h"
#include "crdt/snapshot_delta.h"
#include "node/runtime/add_log_reader.h"
#include "node/runtime/tombstone_file.h"
#include "spdlog/spdlog.h"
#include "node/runtime/sv.h"

namespace pollen::runtime {

namespace {

constexpr std::string_view kSnapPrefix = "snap-";
constexpr std::string_view kSnapSuffix = ".pln";
// A snapshot file is written in pieces of this many bytes (crdt::StreamSnapshot).
constexpr size_t kSnapshotPieceBytes = size_t{1} << 20;
// Far above any filter a node can hold (max-filter-bytes), to refuse absurd sizes only.
constexpr size_t kMaxSnapshotFileBytes = size_t{256} << 30;

uint64_t UnixNow() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// Delta files: "delta-" <20-digit seq> "-" <encoded filter name> ".pln".
constexpr std::string_view kDeltaPrefix = "delta-";
constexpr size_t kDeltaSeqDigits = 20;

std::string DeltaFileName(uint64_t seq, std::string_view encoded_name) {
  std::string digits = Cat(seq);
  return Cat(kDeltaPrefix, std::string(kDeltaSeqDigits - digits.size(), '0'), digits, "-", encoded_name, kSnapSuffix);
}

// The encoded filter name of a delta file ListDeltaFiles returned.
std::string_view DeltaFileFilter(std::string_view file) {
  const size_t skip = kDeltaPrefix.size() + kDeltaSeqDigits + 1;
  return file.substr(skip, file.size() - skip - kSnapSuffix.size());
}

// (seq, file name) of every delta file, by seq.
std::vector<std::pair<uint64_t, std::string>> ListDeltaFiles(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    uint64_t seq = 0;
    if (n.size() > kDeltaPrefix.size() + kDeltaSeqDigits + 1 + kSnapSuffix.size() &&
        n.substr(0, kDeltaPrefix.size()) == kDeltaPrefix && n[kDeltaPrefix.size() + kDeltaSeqDigits] == '-' &&
        n.substr(n.size() - kSnapSuffix.size()) == kSnapSuffix &&
        absl::SimpleAtoi(AV(n.substr(kDeltaPrefix.size(), kDeltaSeqDigits)), &seq)) {
      out.emplace_back(seq, std::string(n));
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ListSnapshotFiles(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.size() >= kSnapPrefix.size() + kSnapSuffix.size() && n.substr(0, kSnapPrefix.size()) == kSnapPrefix &&
        n.substr(n.size() - kSnapSuffix.size()) == kSnapSuffix) {
      names.emplace_back(n);
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// A file mapped read-only, for everything recovery loads (snapshots, deltas,
// tombstones): snapshots are as big as the filters, and a copy on the heap doubled a restart's
// memory (a 1 GiB filter restarted at a 2.1 GiB peak). The mapping's pages
// are the page cache's, dropped when it goes.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(Cat("open ", path, ": ", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size < 0 || static_cast<uint64_t>(st.st_size) > kMaxSnapshotFileBytes) {
      ::close(fd);
      return absl::InvalidArgumentError(Cat(path, ": size out of range"));
    }
    const size_t size = static_cast<size_t>(st.st_size);
    void* data = size == 0 ? nullptr : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (data == MAP_FAILED) return absl::InternalError(Cat("mmap ", path, ": ", std::strerror(errno)));
    if (data != nullptr) ::madvise(data, size, MADV_SEQUENTIAL);
    return std::unique_ptr<MappedFile>(new MappedFile(data, size));
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return std::string_view(static_cast<const char*>(data_), size_); }
  // The reader is done with bytes [0, n): their pages leave this process's
  // resident set (MADV_DONTNEED; the page cache keeps them, and a later read
  // maps them again, so this changes no byte). Called as a big snapshot
  // loads: without it a restart held the whole file and the whole filter
  // resident at once (VmHWM 8.2 GiB for a 4 GiB filter). In steps of at
  // least kReleaseStep, to keep the calls few.
  void ReleaseBefore(size_t n) {
    static constexpr size_t kReleaseStep = size_t{64} << 20;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t end = std::min(n, size_) / page * page;
    if (end < released_ + kReleaseStep && end < size_ / page * page) return;
    if (end <= released_) return;
    (void)::madvise(static_cast<char*>(data_) + released_, end - released_, MADV_DONTNEED);
    released_ = end;
  }

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
  size_t released_ = 0;  // ReleaseBefore: pages below this offset were dropped
};

}  // namespace

std::string EncodeFileName(std::string_view name) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (absl::ascii_isalnum(u) || c == '.' || c == '_' || c == '-') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  if (out.size() <= kMaxEncodedNameBytes) return out;
  unsigned char digest[16];
  crypto_generichash(digest, sizeof(digest), reinterpret_cast<const unsigned char*>(name.data()), name.size(), nullptr, 0);
  out = "~";
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

absl::StatusOr<std::string> DecodeFileName(std::string_view enc) {
  if (!enc.empty() && enc[0] == '~') return absl::InvalidArgumentError("hashed name: the snapshot holds it");
  std::string out;
  for (size_t i = 0; i < enc.size(); ++i) {
    if (enc[i] != '%') {
      out += enc[i];
      continue;
    }
    if (i + 2 >= enc.size()) return absl::InvalidArgumentError("bad escape");
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(enc[i + 1]), lo = hex(enc[i + 2]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("bad escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Persistence>> Persistence::Open(const std::string& dir, AppendFsync mode) {
  if (dir.empty()) return absl::InvalidArgumentError("option 'data-dir': empty");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(Cat("option 'data-dir': cannot create '", dir, "': ", std::strerror(errno)));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(Cat("option 'data-dir': '", dir, "' is not a directory"));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(Cat("option 'data-dir': '", dir, "' is not writable"));
  }
  // One daemon per directory: an advisory lock held for the process lifetime.
  const std::string lock_path = Cat(dir, "/LOCK");
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    return absl::InvalidArgumentError(Cat("option 'data-dir': '", dir, "' is in use by another pollend (", lock_path, ")"));
  }
  auto p = std::unique_ptr<Persistence>(new Persistence(dir, mode));
  p->lock_fd_ = lock_fd;
  return p;
}

Persistence::~Persistence() {
  (void)Close();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void Persistence::MoveAside(const std::string& path, std::string_view why) {
  const std::string aside = Cat(path, ".corrupt-", UnixNow());
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    spdlog::error("persistence: cannot move corrupt file {} aside: {}", path, std::strerror(errno));
  } else {
    spdlog::error("persistence: {} is unusable ({}); moved to {}; continuing from what is intact", path, why, aside);
  }
  files_moved_aside_.fetch_add(1);
}

namespace {

// Recovery fills each filter that has a snapshot on disk: the driver thread
// verifies the file (CRC-32C over all of it), then ORs it in from the first
// word. The filter's memory is fresh, and the kernel zeroes each page at its
// first write: at 4 GiB that was the largest part of a restart (clear_page:
// 33% of its CPU after the checksum change, 40-53% before; perf, 2026-12-05),
// and slow where this VM's balloon has handed the memory back to the host.
// So a second thread faults the same memory in, from the last word backwards
// in 64 MiB pieces, while the driver verifies and then ORs forwards: the two
// cores split the work, and they meet in the middle. Populating keeps every
// word's value, so it races with nothing (BlockedFilter::Populate).
void PopulateBackwards(const std::stop_token& stop, const std::vector<std::weak_ptr<const crdt::SubFilter>>& subs) {
  constexpr uint64_t kPieceWords = uint64_t{8} << 20;  // 64 MiB
  for (const auto& weak : subs) {
    uint64_t end = 0;
    bool started = false;
    while (!stop.stop_requested()) {  // at most word_count / kPieceWords + 1 pieces
      // Held one piece at a time: a sub-filter that recovery drops (the
      // snapshot moved the filter's window) is not kept alive, only skipped.
      std::shared_ptr<const crdt::SubFilter> sub = weak.lock();
      if (sub == nullptr) break;
      if (!started) end = sub->filter->word_count(), started = true;
      if (end == 0) break;
      const uint64_t first = end > kPieceWords ? end - kPieceWords : 0;
      sub->filter->Populate(first, end - first);
      end = first;
    }
  }
}

class Prefaulter {
 public:
  explicit Prefaulter(std::vector<std::weak_ptr<const crdt::SubFilter>> subs)
      : thread_([subs = std::move(subs)](std::stop_token stop) { PopulateBackwards(stop, subs); }) {}

 private:
  std::jthread thread_;  // its destructor asks it to stop and joins it
};

// Huge pages for whatever part of the recovered filters the kernel filled in
// 4 KiB pages (when it had no free 2 MiB pages, or huge pages were off then),
// 2 MiB at a time while the node serves: 4 GiB of 4 KiB pages took ~8 s of
// one core; 1 GiB already in huge pages takes ~20 ms.
void RestoreHugePages(const std::stop_token& stop, const std::vector<std::weak_ptr<const crdt::SubFilter>>& subs) {
  constexpr uint64_t kPieceWords = uint64_t{2} << 17;  // 2 MiB
  uint64_t collapsed = 0;
  for (const auto& weak : subs) {
    if (auto sub = weak.lock()) sub->filter->AdviseHugePages(true);
    for (uint64_t first = 0; !stop.stop_requested(); first += kPieceWords) {  // word_count / kPieceWords pieces
      std::shared_ptr<const crdt::SubFilter> sub = weak.lock();
      if (sub == nullptr || first >= sub->filter->word_count()) break;
      const uint64_t count = std::min(kPieceWords, sub->filter->word_count() - first);
      sub->filter->CollapseHugePages(first, count);
      collapsed += count * 8;
    }
  }
  spdlog::info("persistence: huge pages back for {} MiB of filter memory{}", collapsed >> 20,
               stop.stop_requested() ? " (stopped early)" : "");
}

// Below this, a filter is zeroed in a few milliseconds: no thread for it.
constexpr uint64_t kPrefaultMinBytes = uint64_t{64} << 20;

}  // namespace

absl::StatusOr<RecoveryStats> Persistence::Recover(node::Node* node, node::Time now,
                                                   const node::FilterConfig& default_filter) {
  RecoveryStats stats;
  // Tombstones first: a snapshot or a create record of a deleted filter that
  // is still on disk must not bring it back.
  const std::string tomb_path = Cat(dir_, "/", kTombstoneFileName);
  if (::access(tomb_path.c_str(), F_OK) == 0) {
    auto file = MappedFile::Open(tomb_path);
    auto tombs = file.ok() ? DecodeTombstones((*file)->bytes())
                           : absl::StatusOr<std::map<std::string, uint64_t>>(file.status());
    if (tombs.ok()) {
      for (const auto& [name, through] : *tombs) {
        if (node->ImportTombstone(name, through, now).ok()) ++stats.tombstones_loaded;
      }
    } else {
      // Deleted filters may come back from old files here, and from peers
      // that still hold them; peers that remember the deletion remove them again.
      MoveAside(tomb_path, SV(tombs.status().message()));
      ++stats.files_moved_aside;
    }
  }
  // The filters about to be filled from a base file: fault their memory in
  // alongside (Prefaulter). Joined when Recover returns.
  // The filters with no base file (a new or wiped data dir) are faulted in
  // too, in the background once Recover returns (huge_pages_restorer_): such
  // a node is about to take the filter from its peers (catch-up), and the
  // first touch of each page on the thread that merges cost a joining node
  // 28% of its CPU at 512 MiB (clear_page; perf, 2026-12-05), 1.8-2.3
  // s/GiB on this VM when the memory comes back from the host. A node that
  // takes no catch-up pays no more memory for it than soon after: keys hash
  // uniformly over the filter, and 10^6 keys at k = 7 touch most 4 KiB pages
  // of a 4 GiB filter.
  std::unique_ptr<Prefaulter> prefaulter;
  std::vector<std::weak_ptr<const crdt::SubFilter>> restore_huge_pages;
  std::vector<std::weak_ptr<const crdt::SubFilter>> fresh;
  uint64_t fresh_bytes = 0;
  {
    std::vector<std::weak_ptr<const crdt::SubFilter>> subs;
    uint64_t bytes = 0;
    for (const node::Node::SnapshotSource& source : node->SnapshotSources()) {
      const std::string base = Cat(dir_, "/", kSnapPrefix, EncodeFileName(source.name), kSnapSuffix);
      const bool has_base = ::access(base.c_str(), F_OK) == 0;
      for (const auto& sub : source.subs) {
        (has_base ? subs : fresh).push_back(sub);
        (has_base ? bytes : fresh_bytes) += sub->filter->word_count() * 8;
      }
    }
    if (fresh_bytes < kPrefaultMinBytes) fresh.clear();
    if (bytes >= kPrefaultMinBytes) {
      spdlog::info("persistence: faulting in {} MiB of filter memory alongside recovery", bytes >> 20);
      restore_huge_pages = subs;
      prefaulter = std::make_unique<Prefaulter>(std::move(subs));
    }
    // Huge pages stay on while the memory is faulted in: both threads then
    // fault 2 MiB at a time (see BlockedFilter::AdviseHugePages). Whatever
    // the kernel had to fill in 4 KiB pages is collapsed afterwards.
    for (const auto& weak : fresh) restore_huge_pages.push_back(weak);
  }
  // Snapshots: two passes, so an import that depends on another file (the
  // catalog, say) gets a second chance before the file is called corrupt.
  std::vector<std::string> pending = ListSnapshotFiles(dir_);
  std::map<std::string, std::string> failures;
  for (int pass = 0; pass < 2 && !pending.empty(); ++pass) {
    std::vector<std::string> retry;
    for (const std::string& name : pending) {
      const std::string path = Cat(dir_, "/", name);
      auto file = MappedFile::Open(path);
      absl::Status s = file.ok() ? node->ImportSnapshot((*file)->bytes(),
                                                        [&file](size_t n) { (*file)->ReleaseBefore(n); })
                                 : file.status();
      if (absl::IsAborted(s)) {
        // The filter was deleted after this snapshot (its tombstone is newer):
        // the next snapshot removes the file.
        ++stats.deleted_snapshots_skipped;
        spdlog::info("persistence: skipped snapshot {} of a deleted filter", path);
        continue;
      }
      if (s.ok()) {
        ++stats.snapshots_loaded;
        spdlog::info("persistence: loaded snapshot {}", path);
        const std::string_view encoded =
            std::string_view(name).substr(kSnapPrefix.size(), name.size() - kSnapPrefix.size() - kSnapSuffix.size());
        absl::StatusOr<std::string> filter = DecodeFileName(encoded);
        if (!filter.ok()) filter = node::Node::SnapshotFilterName((*file)->bytes());
        if (filter.ok()) MarkCovered(*filter);
      } else {
        failures[name] = std::string(s.message());
        retry.push_back(name);
      }
    }
    pending = std::move(retry);
  }
  for (const std::string& name : pending) {
    MoveAside(Cat(dir_, "/", name), failures[name]);
    ++stats.files_moved_aside;
  }
  // Deltas, in the order written, over the bases just loaded.
  std::map<std::string, uint64_t> delta_bytes;  // per filter name
  for (const auto& [seq, file] : ListDeltaFiles(dir_)) {
    next_delta_seq_ = std::max(next_delta_seq_, seq + 1);
    const std::string path = Cat(dir_, "/", file);
    auto mapped = MappedFile::Open(path);
    absl::Status s = mapped.ok() ? node->ImportDelta((*mapped)->bytes()) : mapped.status();
    if (s.ok()) {
      ++stats.deltas_loaded;
      absl::StatusOr<std::string> filter = node::Node::SnapshotFilterName((*mapped)->bytes());
      if (filter.ok()) delta_bytes[*filter] += (*mapped)->bytes().size();
    } else if (absl::IsAborted(s) || absl::IsNotFound(s) || absl::IsFailedPrecondition(s)) {
      ++stats.stale_deltas_skipped;
      spdlog::info("persistence: skipped delta {}: {}", path, s.message());
    } else {
      MoveAside(path, SV(s.message()));
      ++stats.files_moved_aside;
    }
  }
  // The files hold what loading them marked dirty. What they describe: the
  // next snapshot writes deltas against them (its version is unknown, so it
  // writes at least once).
  node->ClearDirtyMarks();
  for (const node::Node::SnapshotSource& source : node->SnapshotSources()) {
    const std::string base = Cat(dir_, "/", kSnapPrefix, EncodeFileName(source.name), kSnapSuffix);
    struct stat st {};
    if (::stat(base.c_str(), &st) != 0) continue;
    FilterFiles files;
    files.uid = source.version.incarnation;
    for (const auto& sub : source.subs) files.slots.push_back(sub->slot());
    files.base_bytes = static_cast<uint64_t>(st.st_size);
    files.delta_bytes = delta_bytes[source.name];
    std::lock_guard lock(written_mu_);
    written_.files[source.name] = files;
  }

  // The log: create records first (a filter's entry must exist before its
  // adds, and an add record may precede its filter's create record in the
  // log), then the adds.
  const std::vector<uint64_t> segments = ListAddLogSegments(dir_);
  const uint64_t next_id = segments.empty() ? 1 : segments.back() + 1;
  std::map<std::string, LogPosition, std::less<>> deletes;
  ReplayCreates(node, now, segments, &stats, &deletes);
  ReplayAdds(node, now, default_filter, segments, deletes, &stats);
  auto log = AddLog::Open(dir_, next_id, mode_);
  if (!log.ok()) return log.status();
  log_ = std::move(*log);
  prefaulter.reset();
  if (!fresh.empty()) spdlog::info("persistence: faulting in {} MiB of empty filter memory in the background", fresh_bytes >> 20);
  if (!restore_huge_pages.empty()) {
    huge_pages_restorer_ = std::jthread(
        [fresh = std::move(fresh), subs = std::move(restore_huge_pages)](std::stop_token stop) {
          PopulateBackwards(stop, fresh);
          RestoreHugePages(stop, subs);
        });
  }
  return stats;
}

void Persistence::ReplayCreates(node::Node* node, node::Time now, const std::vector<uint64_t>& segments,
                                RecoveryStats* stats, std::map<std::string, LogPosition, std::less<>>* deletes) {
  for (uint64_t id : segments) {
    const std::string path = AddLogSegmentPath(dir_, id);
    uint64_t refused = 0;
    uint64_t index = 0;
    auto scan = ScanAddLogFile(path, [&](const AddRecordView& rec) {
      const LogPosition at{id, index++};
      if (rec.kind == RecordKind::kDelete) {
        // The tombstone is a max-register: replaying it in any order is the
        // same. Its position splits the name's adds into deleted and later.
        if (node->ImportTombstone(rec.filter, rec.deleted_through, now).ok()) ++stats->deletes_replayed;
        (*deletes)[std::string(rec.filter)] = at;
        NoteLoggedDelete(rec.filter, rec.deleted_through);
        return;
      }
      if (rec.kind != RecordKind::kCreate) return;
      const absl::Status s = node->ImportCatalogEntry(rec.entry, now);
      if (s.ok()) {
        ++stats->creates_replayed;
        MarkCovered(rec.filter);
      } else {
        ++refused;
        spdlog::warn("persistence: {}: create record for filter '{}' refused: {}", path, node::PrintableName(rec.filter), SV(s.message()));
      }
    });
    stats->creates_refused += refused;
    // An unreadable or corrupt file is reported and moved aside by ReplayAdds.
    (void)scan;
  }
}

void Persistence::ReplayAdds(node::Node* node, node::Time now, const node::FilterConfig& default_filter,
                             const std::vector<uint64_t>& segments,
                             const std::map<std::string, LogPosition, std::less<>>& deletes, RecoveryStats* stats) {
  const std::map<std::string, uint64_t> tombstones = node->Tombstones();
  for (uint64_t id : segments) {
    const std::string path = AddLogSegmentPath(dir_, id);
    uint64_t failed_adds = 0;
    uint64_t records = 0;
    uint64_t index = 0;
    auto scan = ScanAddLogFile(path, [&](const AddRecordView& rec) {
      const LogPosition at{id, index++};
      if (rec.kind != RecordKind::kAdd) return;
      ++records;
      // An add logged before the name's last delete record went to a filter
      // that is deleted (the delete record is written before the deletion).
      if (auto d = deletes.find(rec.filter); d != deletes.end() && at < d->second) {
        ++stats->deleted_adds_skipped;
        return;
      }
      auto added = node->Add(rec.filter, rec.key);
      if (added.status().code() == absl::StatusCode::kNotFound && tombstones.count(std::string(rec.filter)) > 0) {
        // A late add of a deleted filter (logged just after the delete
        // record): its filter is gone, so is the add.
        ++stats->deleted_adds_skipped;
        return;
      }
      if (added.status().code() == absl::StatusCode::kNotFound) {
        // No snapshot and no create record knows this filter: a log from a
        // version without create records. Re-create it as BF.ADD would.
        node::FilterConfig fc = default_filter;
        fc.name = std::string(rec.filter);
        fc.owner.clear();
        fc.scope = node::Scope::kShared;
        if (node->Reserve(fc, now).ok()) {
          ++stats->default_creates;
          spdlog::warn("persistence: {}: filter '{}' has no create record; re-created with default parameters",
                       path, node::PrintableName(rec.filter));
        }
        added = node->Add(rec.filter, rec.key);
      }
      if (!added.ok()) ++failed_adds;
    });
    if (!scan.ok()) {
      MoveAside(path, SV(scan.status().message()));
      ++stats->files_moved_aside;
      continue;
    }
    ++stats->segments_replayed;
    stats->records_replayed += records;
    if (failed_adds > 0) spdlog::warn("persistence: {} records of {} could not be re-added", failed_adds, path);
    if (scan->torn_tail) {
      ++stats->torn_tails;
      spdlog::warn("persistence: {}: dropped a torn last record after {} good records", path, scan->records);
    }
    if (scan->corrupt) {
      MoveAside(path, Cat(scan->error, "; kept ", scan->records, " records before it"));
      ++stats->files_moved_aside;
    } else {
      spdlog::info("persistence: replayed {} adds from {}", records, path);
    }
  }
}

void Persistence::MarkCovered(std::string_view filter) {
  std::lock_guard lock(covered_mu_);
  covered_.emplace(filter);
}

bool Persistence::NeedsCreateRecord(std::string_view filter) const {
  std::lock_guard lock(covered_mu_);
  return covered_.find(filter) == covered_.end();
}

absl::Status Persistence::LogCreate(const node::Node& node, std::string_view filter, bool wait) {
  if (!log_) return absl::FailedPreconditionError("add log not open");
  absl::StatusOr<std::string> entry = node.ExportCatalogEntry(filter);
  if (!entry.ok()) return entry.status();
  if (absl::Status s = log_->AppendCreate(filter, *entry, wait); !s.ok()) return s;
  create_records_.fetch_add(1);
  MarkCovered(filter);
  return absl::OkStatus();
}

void Persistence::NoteLoggedDelete(std::string_view filter, uint64_t deleted_through) {
  std::lock_guard lock(covered_mu_);
  auto [it, inserted] = logged_deletes_.try_emplace(std::string(filter), deleted_through);
  if (!inserted) it->second = std::max(it->second, deleted_through);
}

absl::Status Persistence::LogDelete(std::string_view filter, uint64_t deleted_through, bool wait) {
  if (!log_) return absl::FailedPreconditionError("add log not open");
  {
    std::lock_guard lock(covered_mu_);
    auto it = logged_deletes_.find(filter);
    if (it != logged_deletes_.end() && it->second >= deleted_through) return absl::OkStatus();
  }
  if (absl::Status s = log_->AppendDelete(filter, deleted_through, wait); !s.ok()) return s;
  delete_records_.fetch_add(1);
  NoteLoggedDelete(filter, deleted_through);
  // A later filter of this name needs its own create record.
  std::lock_guard lock(covered_mu_);
  if (auto it = covered_.find(filter); it != covered_.end()) covered_.erase(it);
  return absl::OkStatus();
}

absl::Status Persistence::WaitDurable() {
  if (!log_) return absl::FailedPreconditionError("add log not open");
  return log_->WaitDurable();
}

absl::Status Persistence::LogAdds(std::string_view filter, std::span<const std::string_view> keys) {
  if (!log_) return absl::FailedPreconditionError("add log not open");
  return log_->Append(filter, keys);
}

void Persistence::NotifyDurable(std::function<void(absl::Status)> done) {
  if (!log_) return done(absl::FailedPreconditionError("add log not open"));
  log_->NotifyDurable(std::move(done));
}

absl::Status Persistence::QueueAdds(std::string_view filter, std::span<const std::string_view> keys) {
  if (!log_) return absl::FailedPreconditionError("add log not open");
  return log_->AppendQueued(filter, keys);
}

absl::StatusOr<SnapshotJob> Persistence::BeginSnapshot(const node::Node& node) {
  if (!log_) return absl::FailedPreconditionError("add log not open");
  SnapshotJob job;
  job.tombstones = EncodeTombstones(node.Tombstones());
  // Read before the rotation: a record appended after this read counts as
  // new at the next snapshot even if this one's segments hold it (the safe
  // side: one more snapshot).
  const uint64_t records = log_->records_appended();
  {
    std::lock_guard lock(written_mu_);
    if (written_.any && records == written_.records_at_rotation && job.tombstones == written_.tombstones) {
      job.sources = node.SnapshotSources();
      bool same = job.sources.size() == written_.files.size();
      for (const auto& source : job.sources) {
        auto it = written_.files.find(source.name);
        same = same && it != written_.files.end() && it->second.version == source.version;
      }
      if (same) {
        job.unchanged = true;
        job.sources.clear();
        return job;
      }
    }
  }
  auto rotated = log_->Rotate();
  if (!rotated.ok()) return rotated.status();
  job.rotated_segment = *rotated;
  // After the rotation: every add logged before it is in these filters. (The
  // tombstones above cannot have changed: they change on this thread only.)
  job.sources = node.SnapshotSources();
  std::lock_guard lock(written_mu_);
  pending_records_at_rotation_ = records;
  return job;
}

absl::StatusOr<std::string> Persistence::FinishSnapshot(const SnapshotJob& job) {
  if (job.unchanged) return Cat("snapshot: nothing changed since the last one in ", dir_);
  uint64_t bytes = 0, skipped = 0, deltas = 0;
  std::set<std::string> keep, live;  // file names of live filters, and their names
  for (const node::Node::SnapshotSource& source : job.sources) {
    keep.insert(Cat(kSnapPrefix, EncodeFileName(source.name), kSnapSuffix));
    live.insert(source.name);
    {
      std::lock_guard lock(written_mu_);
      auto it = written_.files.find(source.name);
      if (it != written_.files.end() && it->second.version == source.version) {
        ++skipped;
        continue;
      }
    }
    bool delta = false;
    absl::StatusOr<uint64_t> written = WriteFilter(source, &delta);
    if (!written.ok()) {
      snapshot_failures_.fetch_add(1);
      return written.status();
    }
    bytes += *written;
    deltas += delta ? 1 : 0;
  }
  // The tombstones before anything is deleted: the segments about to go may
  // hold the only delete records.
  bool tombstones_written;
  {
    std::lock_guard lock(written_mu_);
    tombstones_written = written_.any && written_.tombstones == job.tombstones;
  }
  if (!tombstones_written) {
    if (absl::Status s = crdt::WriteFileAtomically(Cat(dir_, "/", kTombstoneFileName), job.tombstones); !s.ok()) {
      snapshot_failures_.fetch_add(1);
      return absl::InternalError(Cat("snapshot ", dir_, "/", kTombstoneFileName, ": ", s.message()));
    }
    bytes += job.tombstones.size();
  }
  // Files of filters that no longer exist (deleted, or replaced under
  // another file name): their memory is gone already, now their disk space.
  for (const std::string& file : ListSnapshotFiles(dir_)) {
    if (!keep.count(file)) ::unlink(Cat(dir_, "/", file).c_str());
  }
  for (const auto& [seq, file] : ListDeltaFiles(dir_)) {
    if (!keep.count(Cat(kSnapPrefix, DeltaFileFilter(file), kSnapSuffix))) ::unlink(Cat(dir_, "/", file).c_str());
  }
  for (uint64_t id : ListAddLogSegments(dir_)) {
    if (id <= job.rotated_segment) ::unlink(AddLogSegmentPath(dir_, id).c_str());
  }
  {
    std::lock_guard lock(written_mu_);
    for (auto it = written_.files.begin(); it != written_.files.end();) {
      it = live.count(it->first) ? std::next(it) : written_.files.erase(it);
    }
    written_.tombstones = job.tombstones;
    written_.records_at_rotation = pending_records_at_rotation_;
    written_.any = true;
  }
  snapshots_written_.fetch_add(1);
  snapshot_bytes_.fetch_add(bytes);
  snapshot_files_skipped_.fetch_add(skipped);
  snapshot_deltas_.fetch_add(deltas);
  last_snapshot_unix_.store(UnixNow());
  return Cat("snapshot of ", job.sources.size(), " filters (", job.sources.size() - skipped - deltas, " whole, ",
             deltas, " as deltas, ", skipped, " unchanged; ", bytes, " bytes) in ", dir_);
}

absl::StatusOr<uint64_t> Persistence::WriteFilter(const node::Node::SnapshotSource& source, bool* delta) {
  std::vector<uint64_t> slots;
  for (const auto& sub : source.subs) slots.push_back(sub->slot());
  const std::string encoded = EncodeFileName(source.name);
  FilterFiles files;
  uint64_t seq = 0;
  {
    std::lock_guard lock(written_mu_);
    auto it = written_.files.find(source.name);
    if (it != written_.files.end()) files = it->second;
    *delta = it != written_.files.end() && files.uid == source.version.incarnation && files.slots == slots &&
             files.delta_bytes <= files.base_bytes / 4;
    // Until this write succeeds the filter's files are unknown: a failure
    // loses the marks it took, so the next write must be a base.
    written_.files.erase(source.name);
    if (*delta) seq = next_delta_seq_++;
  }
  const std::string path = *delta ? Cat(dir_, "/", DeltaFileName(seq, encoded))
                                  : Cat(dir_, "/", kSnapPrefix, encoded, kSnapSuffix);
  if (!*delta) {
    for (const auto& sub : source.subs) sub->filter->ClearDirty();  // the base holds them
  }
  uint64_t bytes = 0;
  absl::Status s = crdt::WriteFileAtomically(
      path,
      [&](const crdt::SnapshotSink& write) {
        if (absl::Status p = write(source.prefix); !p.ok()) return p;
        return *delta ? crdt::StreamDelta(source.subs, write)
                      : crdt::StreamSnapshot(source.set->params(), source.subs, kSnapshotPieceBytes, write);
      },
      &bytes);
  if (!s.ok()) return absl::InternalError(Cat("snapshot ", path, ": ", s.message()));
  if (*delta) {
    files.delta_bytes += bytes;
  } else {
    // The base is in place: the filter's older deltas are redundant.
    for (const auto& [old_seq, file] : ListDeltaFiles(dir_)) {
      if (DeltaFileFilter(file) == encoded) ::unlink(Cat(dir_, "/", file).c_str());
    }
    files = FilterFiles{{}, source.version.incarnation, slots, bytes, 0};
  }
  files.version = source.version;
  std::lock_guard lock(written_mu_);
  written_.files[source.name] = files;
  return bytes;
}

absl::Status Persistence::Flush() { return log_ ? log_->Flush() : absl::OkStatus(); }

absl::Status Persistence::Close() {
  // Before the daemon shuts its logging down: the restorer logs when it ends.
  if (huge_pages_restorer_.joinable()) {
    huge_pages_restorer_.request_stop();
    huge_pages_restorer_.join();
  }
  return log_ ? log_->Close() : absl::OkStatus();
}

}  // namespace pollen::runtime
