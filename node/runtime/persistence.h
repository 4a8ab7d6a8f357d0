// Persistence: snapshots plus the add log under one data directory.
//
// Layout of <dir>:
//   snap-<filter>.pln          one crdt snapshot per filter (name
//                              percent-encoded), replaced atomically: its base
//   delta-<seq>-<filter>.pln   the blocks that changed since the base or the
//                              previous delta (crdt/snapshot_delta.h); seq is
//                              20 digits, increasing across restarts
//   adds-<id>.log              add-log segments (add_log.h), replayed in order
//   tombstones.pln             deleted filter names (tombstone_file.h), replaced
//                              atomically at every snapshot
//   *.corrupt-<unix time>      files that failed to load, moved aside
//
// Recovery (driver thread, before Node::Start): load the tombstones (so no
// file of a deleted filter brings it back), import every snapshot, then every
// delta in order (one of a deleted filter or of other parameters is stale:
// skipped, and removed by the next snapshot), then drop the dirty marks the
// loading set (the files hold those bits), then replay the segments in two passes: first every create record (a filter's
// catalog entry, applied under the catalog rule by Node::ImportCatalogEntry,
// so a filter keeps its parameters, stamp and creator), then every add
// (re-adding is idempotent). A file that fails is renamed aside and logged,
// and the node continues from what is intact (anti-entropy repairs the rest);
// a torn last record is dropped. Then a new segment opens. An add for a filter
// that neither a snapshot nor a create record knows (a log written before
// create records existed) re-creates it with the default parameters, as
// before, with a warning.
//
// Create records (LogCreate): the driver logs one whenever a filter appears
// or its entry is replaced (Node events kFilterCreated / kFilterDiscarded),
// and the add path logs one before the first add record of a filter that has
// none yet (NeedsCreateRecord), so in the log every add record of a filter
// follows a create record for it, or a snapshot holds the filter. A reply to
// BF.RESERVE waits for WaitDurable, so under appendfsync always a reserve is
// on disk before it is acknowledged.
//
// Snapshot: BeginSnapshot (driver thread) rotates the log and takes, per
// filter, its catalog entry, its live sub-filters (shared pointers, no copy)
// and its version: no scan, so the node's thread never waits on the filter's
// size or on disk. FinishSnapshot (the snapshot thread) then streams each
// file from the live sub-filters in 1 MiB pieces to a temporary file, fsyncs
// and renames it, writes the tombstones, and deletes the segments older than
// the rotation and snapshot files of filters that no longer exist. Memory
// beyond the filters: one piece per file being written.
//
// Why a file read from the live filter while adds go on is safe: a key whose
// add returned before the rotation was applied to the filter before it was
// logged, so its bits are set before the words are read; a filter only grows
// (bitwise OR), so words read later hold every bit set earlier, plus perhaps
// some of later adds. The file is thus at least the state at the rotation,
// and every add after it is in a kept segment; replaying one twice changes
// nothing. A generation that rotates out meanwhile stays alive (the shared
// pointer) until its file is written.
//
// A filter whose version (Node::FilterVersion: incarnation, epoch and a count
// of changes that set bits) equals the one its file was last written at is
// not rewritten; when no filter changed, no record was logged and the
// tombstones are the same, a snapshot writes nothing and keeps the segment
// (an idle node does no disk writes).
//
// Incremental: a filter that changed gets a delta file, the blocks marked
// dirty since its last write (crdt::StreamDelta: the marks are taken, then
// the blocks read, so the argument above holds block by block), as long as
// its incarnation and sub-filters are those of its base and its deltas
// together stay under a quarter of the base; otherwise (a rotation, a new
// layer, a replaced incarnation, deltas grown large, or a failed write, whose
// taken marks are lost) a new base is written (its marks taken first) and,
// once it is renamed in place, the filter's deltas are deleted. Deltas are
// ORed in on recovery in any order, so a crash between the two steps only
// leaves older deltas over a newer base: harmless.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "node/core/node.h"
#include "node/runtime/add_log.h"
#include "node/runtime/config.h"

namespace pollen::runtime {

struct RecoveryStats {
  uint64_t snapshots_loaded = 0;
  uint64_t deltas_loaded = 0;
  uint64_t stale_deltas_skipped = 0;  // of a deleted filter, or one with other parameters
  uint64_t segments_replayed = 0;
  uint64_t records_replayed = 0;
  uint64_t files_moved_aside = 0;
  uint64_t torn_tails = 0;
  uint64_t creates_replayed = 0;  // create records applied
  uint64_t creates_refused = 0;   // create records the node refused (other secret, catalog full, ...)
  uint64_t default_creates = 0;   // filters re-created with default parameters (no create record)
  uint64_t tombstones_loaded = 0;  // from the tombstone file
  uint64_t deletes_replayed = 0;   // delete records applied
  uint64_t deleted_snapshots_skipped = 0;  // snapshot files of filters deleted since
  uint64_t deleted_adds_skipped = 0;       // add records of deleted filters
};

// Where a record sits in the add log: (segment id, index in the segment).
struct LogPosition {
  uint64_t segment = 0;
  uint64_t index = 0;
  friend auto operator<=>(const LogPosition&, const LogPosition&) = default;
};

// What a snapshot needs after the driver-thread part.
struct SnapshotJob {
  std::vector<node::Node::SnapshotSource> sources;  // by filter name
  std::string tombstones;                          // the tombstone file (tombstone_file.h)
  uint64_t rotated_segment = 0;                    // delete segments <= this after writing
  bool unchanged = false;  // nothing to write since the last snapshot (no rotation either)
};

class Persistence {
 public:
  // Creates `dir` if needed and locks it (dir/LOCK, flock): a second daemon on
  // the same directory is refused.
  static absl::StatusOr<std::unique_ptr<Persistence>> Open(const std::string& dir, AppendFsync mode);
  ~Persistence();

  // Loads state into `node` (driver thread, before Start) and opens the log.
  absl::StatusOr<RecoveryStats> Recover(node::Node* node, node::Time now,
                                        const node::FilterConfig& default_filter);

  // Thread-safe: log adds the node has applied (see AddLog::Append).
  absl::Status LogAdds(std::string_view filter, std::span<const std::string_view> keys);
  // As LogAdds, queued only (AddLog::AppendQueued): WaitDurable makes them durable.
  absl::Status QueueAdds(std::string_view filter, std::span<const std::string_view> keys);
  // AddLog::NotifyDurable (FailedPrecondition at once when the log is not open).
  void NotifyDurable(std::function<void(absl::Status)> done);
  AppendFsync appendfsync() const { return mode_; }

  // Driver thread: logs a create record for `filter`'s current catalog entry
  // (queued; `wait` as in AddLog::AppendCreate) and remembers that it did.
  // NotFound if the node does not know the filter.
  absl::Status LogCreate(const node::Node& node, std::string_view filter, bool wait);
  // Driver thread: logs a delete record (a tombstone) unless one at least as
  // high was logged already; `wait` as in AddLog::AppendCreate. DEL logs it
  // before the node applies the deletion (write-ahead, add_log_format.h); the
  // driver logs the tombstones peers bring (kFilterDeleted events) after.
  absl::Status LogDelete(std::string_view filter, uint64_t deleted_through, bool wait);
  // Thread-safe: true while no create record has been logged for `filter` in
  // this process and no loaded snapshot or replayed record covers it.
  bool NeedsCreateRecord(std::string_view filter) const;
  // Thread-safe: see AddLog::WaitDurable.
  absl::Status WaitDurable();

  // Driver thread: rotate the log and export the node's state.
  absl::StatusOr<SnapshotJob> BeginSnapshot(const node::Node& node);
  // Any thread (one at a time): write the files, drop old segments. Returns a
  // one-line description.
  absl::StatusOr<std::string> FinishSnapshot(const SnapshotJob& job);

  absl::Status Flush();
  absl::Status Close();

  const std::string& dir() const { return dir_; }
  uint64_t snapshots_written() const { return snapshots_written_.load(); }
  uint64_t snapshot_failures() const { return snapshot_failures_.load(); }
  uint64_t last_snapshot_unix() const { return last_snapshot_unix_.load(); }
  uint64_t log_records() const { return log_ ? log_->records_appended() : 0; }
  uint64_t log_fsyncs() const { return log_ ? log_->fsyncs() : 0; }
  uint64_t create_records() const { return create_records_.load(); }
  uint64_t delete_records() const { return delete_records_.load(); }
  // Bytes the snapshots wrote (files and tombstones), and files skipped as unchanged.
  uint64_t snapshot_bytes_written() const { return snapshot_bytes_.load(); }
  uint64_t snapshot_files_skipped() const { return snapshot_files_skipped_.load(); }
  uint64_t snapshot_deltas_written() const { return snapshot_deltas_.load(); }

 private:
  Persistence(std::string dir, AppendFsync mode) : dir_(std::move(dir)), mode_(mode) {}
  void MoveAside(const std::string& path, std::string_view why);
  void MarkCovered(std::string_view filter);
  // Replay passes over every segment (Recover).
  // ReplayCreates also applies delete records and reports where the last one
  // of each name is; ReplayAdds skips the adds before it.
  void ReplayCreates(node::Node* node, node::Time now, const std::vector<uint64_t>& segments, RecoveryStats* stats,
                     std::map<std::string, LogPosition, std::less<>>* deletes);
  void ReplayAdds(node::Node* node, node::Time now, const node::FilterConfig& default_filter,
                  const std::vector<uint64_t>& segments,
                  const std::map<std::string, LogPosition, std::less<>>& deletes, RecoveryStats* stats);
  void NoteLoggedDelete(std::string_view filter, uint64_t deleted_through);

  const std::string dir_;
  const AppendFsync mode_;
  std::unique_ptr<AddLog> log_;
  int lock_fd_ = -1;
  std::atomic<uint64_t> snapshots_written_{0};
  std::atomic<uint64_t> snapshot_failures_{0};
  std::atomic<uint64_t> last_snapshot_unix_{0};
  std::atomic<uint64_t> files_moved_aside_{0};
  std::atomic<uint64_t> create_records_{0};
  std::atomic<uint64_t> delete_records_{0};
  mutable std::mutex covered_mu_;
  std::set<std::string, std::less<>> covered_;  // filters with a create record or snapshot
  std::map<std::string, uint64_t, std::less<>> logged_deletes_;  // highest delete record per name (covered_mu_)
  std::atomic<uint64_t> snapshot_bytes_{0};
  std::atomic<uint64_t> snapshot_files_skipped_{0};
  std::atomic<uint64_t> snapshot_deltas_{0};
  // What one filter's files hold: a base snapshot (of incarnation `uid` with
  // sub-filters `slots`) and the deltas written after it.
  struct FilterFiles {
    node::FilterVersion version;  // at the last write; a default one forces a write
    uint64_t uid = 0;
    std::vector<uint64_t> slots;
    uint64_t base_bytes = 0;
    uint64_t delta_bytes = 0;
  };
  // Writes `source`'s base snapshot or, when its files allow, a delta.
  absl::StatusOr<uint64_t> WriteFilter(const node::Node::SnapshotSource& source, bool* delta);
  // What the snapshot files hold: per filter (by name), the tombstones last
  // written, and the log's record count at the rotation of the last snapshot
  // that finished (BeginSnapshot and FinishSnapshot).
  struct Written {
    std::map<std::string, FilterFiles> files;
    std::string tombstones;
    uint64_t records_at_rotation = 0;
    bool any = false;  // a snapshot finished in this process
  };
  mutable std::mutex written_mu_;
  Written written_;
  uint64_t pending_records_at_rotation_ = 0;  // the running snapshot's (written_mu_)
  uint64_t next_delta_seq_ = 1;               // delta file numbers (written_mu_)
  // After a recovery: faults in the big filters that had no base file (a
  // new or wiped data dir, about to catch up from peers), then rebuilds the
  // huge pages of every big filter filled in 4 KiB pages, in the background
  // (persistence.cc, Prefaulter). Last, so it
  // stops and joins before anything else here goes.
  std::jthread huge_pages_restorer_;
};

// "crawl:seen" -> "crawl%3Aseen" (keeps [A-Za-z0-9._-]); and back. A name
// whose encoding would pass kMaxEncodedNameBytes (file names are limited to
// 255 bytes; filter names are binary-safe up to 64 KiB) becomes "~" and 32 hex
// digits of its BLAKE2b-128 hash instead, which DecodeFileName cannot reverse:
// recovery reads such a filter's name from the snapshot itself.
inline constexpr size_t kMaxEncodedNameBytes = 200;
std::string EncodeFileName(std::string_view name);
absl::StatusOr<std::string> DecodeFileName(std::string_view encoded);

}  // namespace pollen::runtime
