// Persistence in-process with a real node::Node: snapshot + log round trip,
// log rotation around a snapshot, recovery from a torn log tail and from a
// corrupt snapshot (moved aside, the rest still loads), and filters created at
// run time that only the log knows about.
#include "node/runtime/persistence.h"
#include "tests/runtime/persistence_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "crdt/generations.h"
#include "node/runtime/add_log.h"
#include "node/runtime/tombstone_file.h"
#include "tests/runtime/dir_util.h"

namespace pollen::runtime {
namespace {

using ::pollen::testing::AddAndLog;
using ::pollen::testing::Has;

std::string FreshDir(const std::string& name) { return ::pollen::testing::FreshDir("pollen_persist_", name); }

using ::pollen::testing::ListDir;

// One config filter; `generations` 0 keeps the default.
std::unique_ptr<node::Node> MakeNode(const std::string& filter = "crawl:seen", uint64_t capacity = 10000,
                                     uint32_t generations = 0) {
  node::NodeConfig c;
  c.name = "p1";
  c.advertise = "127.0.0.1:1";
  c.secret.bytes.fill(7);
  node::FilterConfig f;
  f.name = filter;
  f.capacity = capacity;
  if (generations != 0) f.generations = generations;
  c.filters.push_back(f);
  auto n = node::Node::Create(c);
  EXPECT_TRUE(n.ok()) << n.status();
  return std::move(*n);
}

TEST(PersistenceTest, SnapshotPlusLogRoundTrip) {
  const std::string dir = FreshDir("roundtrip");
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    AddAndLog(*node, **p, "crawl:seen", {"a", "b"});
    auto job = (*p)->BeginSnapshot(*node);
    ASSERT_TRUE(job.ok());
    ASSERT_TRUE((*p)->FinishSnapshot(*job).ok());
    AddAndLog(*node, **p, "crawl:seen", {"c"});  // only in the log
    ASSERT_TRUE((*p)->Close().ok());
  }
  const auto files = ListDir(dir);
  EXPECT_NE(std::find(files.begin(), files.end(), "snap-crawl%3Aseen.pln"), files.end());
  // The segment closed by the snapshot is gone; the one after it holds "c".
  EXPECT_EQ(ListAddLogSegments(dir), (std::vector<uint64_t>{2}));

  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->snapshots_loaded, 1u);
  EXPECT_EQ(stats->records_replayed, 1u);
  EXPECT_TRUE(Has(*node, "crawl:seen", "a"));
  EXPECT_TRUE(Has(*node, "crawl:seen", "b"));
  EXPECT_TRUE(Has(*node, "crawl:seen", "c"));
  EXPECT_FALSE(Has(*node, "crawl:seen", "never"));
}

// A snapshot rewrites only the filters that changed since their files were
// written, and when nothing changed (no filter, no log record, no tombstone)
// it writes nothing at all: no rotation, no file touched.
TEST(PersistenceTest, SnapshotsWriteOnlyWhatChanged) {
  const std::string dir = FreshDir("unchanged");
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kAlways);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
  node::FilterConfig other;
  other.name = "other";
  other.capacity = 50'000;
  ASSERT_TRUE(node->Reserve(other, node::Time(1)).ok());
  AddAndLog(*node, **p, "crawl:seen", {"a"});
  AddAndLog(*node, **p, "other", {"x"});
  auto snapshot = [&] {
    auto job = (*p)->BeginSnapshot(*node);
    EXPECT_TRUE(job.ok()) << job.status();
    auto done = (*p)->FinishSnapshot(*job);
    EXPECT_TRUE(done.ok()) << done.status();
    return job->unchanged;
  };
  auto mtime = [&](const std::string& file) {
    struct stat st {};
    EXPECT_EQ(::stat((dir + "/" + file).c_str(), &st), 0) << file;
    return std::pair(st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  };
  EXPECT_FALSE(snapshot());
  const uint64_t first_bytes = (*p)->snapshot_bytes_written();
  EXPECT_GT(first_bytes, 50'000u / 8);
  const auto segments = ListAddLogSegments(dir);
  const auto other_written = mtime("snap-other.pln");

  EXPECT_TRUE(snapshot());  // idle: nothing written, the log not rotated
  EXPECT_EQ((*p)->snapshot_bytes_written(), first_bytes);
  EXPECT_EQ(ListAddLogSegments(dir), segments);

  ::usleep(20'000);  // a later mtime for a rewritten file
  AddAndLog(*node, **p, "crawl:seen", {"b"});
  EXPECT_FALSE(snapshot());
  EXPECT_EQ((*p)->snapshot_files_skipped(), 1u);  // "other" kept its file
  EXPECT_EQ(mtime("snap-other.pln"), other_written);
  EXPECT_LT((*p)->snapshot_bytes_written() - first_bytes, first_bytes);
  EXPECT_NE(ListAddLogSegments(dir), segments);

  // A key already present sets no bit: still nothing to write but the log record.
  AddAndLog(*node, **p, "crawl:seen", {"b"});
  EXPECT_FALSE(snapshot());  // the record alone makes a snapshot (it rotates the log)
  EXPECT_EQ((*p)->snapshot_files_skipped(), 3u);
  EXPECT_TRUE(snapshot());
  ASSERT_TRUE((*p)->Close().ok());
  p->reset();  // releases the directory's lock

  auto again = MakeNode();
  auto q = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE((*q)->Recover(again.get(), node::Time(0), node::FilterConfig{}).ok());
  EXPECT_TRUE(Has(*again, "crawl:seen", "a"));
  EXPECT_TRUE(Has(*again, "crawl:seen", "b"));
  EXPECT_TRUE(Has(*again, "other", "x"));
}

std::vector<std::string> DeltaFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& f : ListDir(dir)) {
    if (f.rfind("delta-", 0) == 0 && f.find(".corrupt") == std::string::npos) out.push_back(f);
  }
  return out;
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Incremental snapshots: after a base, a changed filter gets a delta of its
// changed blocks (a few KiB, not the filter); a restart loads base + deltas
// (no log left) and writes deltas against them; deltas past a quarter of the
// base, or a rotation, make a new base and the deltas go; a corrupt delta is
// moved aside and the rest still loads.
TEST(PersistenceTest, IncrementalSnapshotsRecoverBasePlusDeltas) {
  const std::string dir = FreshDir("incremental");
  const std::string base = dir + "/snap-crawl%3Aseen.pln";
  auto snapshot = [](Persistence& p, node::Node& n) {
    auto job = p.BeginSnapshot(n);
    ASSERT_TRUE(job.ok()) << job.status();
    auto done = p.FinishSnapshot(*job);
    ASSERT_TRUE(done.ok()) << done.status();
  };
  std::vector<std::string> keys;
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    AddAndLog(*node, **p, "crawl:seen", {"k0"});
    keys.push_back("k0");
    snapshot(**p, *node);  // the base
    const uint64_t base_bytes = FileSize(base);
    ASSERT_GT(base_bytes, 10'000u);
    for (int round = 1; round <= 3; ++round) {
      const uint64_t before = (*p)->snapshot_bytes_written();
      const std::string k = "k" + std::to_string(round);
      AddAndLog(*node, **p, "crawl:seen", {k});
      keys.push_back(k);
      snapshot(**p, *node);
      EXPECT_LT((*p)->snapshot_bytes_written() - before, 1'000u) << "a delta, not the filter";
      EXPECT_EQ(FileSize(base), base_bytes);
    }
    EXPECT_EQ((*p)->snapshot_deltas_written(), 3u);
    EXPECT_EQ(DeltaFiles(dir).size(), 3u);
    p->reset();  // a crash: nothing more is written
  }
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok());
    auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->snapshots_loaded, 1u);
    EXPECT_EQ(stats->deltas_loaded, 3u);
    EXPECT_EQ(stats->records_replayed, 0u);  // the snapshots dropped the segments
    for (const auto& k : keys) EXPECT_TRUE(Has(*node, "crawl:seen", k)) << k;
    // After the restart: a delta against the files on disk, not a new base.
    AddAndLog(*node, **p, "crawl:seen", {"k4"});
    keys.push_back("k4");
    const uint64_t base_written = FileSize(base);
    snapshot(**p, *node);
    EXPECT_EQ((*p)->snapshot_deltas_written(), 1u);
    EXPECT_EQ(DeltaFiles(dir).size(), 4u);
    EXPECT_EQ(FileSize(base), base_written);
    // Many more keys: the deltas outgrow a quarter of the base, a new base
    // is written and every delta goes.
    for (int round = 0; round < 4 && !DeltaFiles(dir).empty(); ++round) {
      std::vector<std::string> many;
      for (int i = 0; i < 2'000; ++i) many.push_back("m" + std::to_string(round) + "." + std::to_string(i));
      AddAndLog(*node, **p, "crawl:seen", many);
      snapshot(**p, *node);
      keys.insert(keys.end(), many.begin(), many.end());
    }
    EXPECT_TRUE(DeltaFiles(dir).empty());
    // A rotation opens a generation: a new base.
    ASSERT_TRUE(node->Rotate("crawl:seen", node::Time(1'000'000)).ok());
    AddAndLog(*node, **p, "crawl:seen", {"after-rotation"});
    keys.push_back("after-rotation");
    snapshot(**p, *node);
    EXPECT_TRUE(DeltaFiles(dir).empty());
    AddAndLog(*node, **p, "crawl:seen", {"k5"});
    AddAndLog(*node, **p, "crawl:seen", {"k6"});
    keys.push_back("k5");
    keys.push_back("k6");
    snapshot(**p, *node);
    ASSERT_EQ(DeltaFiles(dir).size(), 1u);
    // A corrupt delta (k7's) is moved aside on recovery; the rest loads.
    AddAndLog(*node, **p, "crawl:seen", {"k7"});
    snapshot(**p, *node);
    ASSERT_EQ(DeltaFiles(dir).size(), 2u);
    p->reset();
  }
  const std::string last = dir + "/" + DeltaFiles(dir).back();
  {
    std::fstream f(last, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(FileSize(last) / 2));
    f.put('\x5a');
  }
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->deltas_loaded, 1u);
  EXPECT_EQ(stats->files_moved_aside, 1u);
  for (const auto& k : keys) ASSERT_TRUE(Has(*node, "crawl:seen", k)) << k;
}

TEST(PersistenceTest, SecondOpenOfTheSameDirectoryIsRefused) {
  const std::string dir = FreshDir("lock");
  auto a = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(a.ok());
  auto b = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(std::string(b.status().message()).find("data-dir"), std::string::npos);
}

TEST(PersistenceTest, TornTailDroppedCorruptSnapshotMovedAside) {
  const std::string dir = FreshDir("corrupt");
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    AddAndLog(*node, **p, "crawl:seen", {"snapshotted"});
    auto job = (*p)->BeginSnapshot(*node);
    ASSERT_TRUE(job.ok());
    ASSERT_TRUE((*p)->FinishSnapshot(*job).ok());
    AddAndLog(*node, **p, "crawl:seen", {"logged-1", "logged-2"});
    ASSERT_TRUE((*p)->Close().ok());
  }
  // Corrupt the snapshot; cut the last log record short.
  {
    std::fstream s(dir + "/snap-crawl%3Aseen.pln", std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(100);
    s.put('\x42');
  }
  const std::string seg = AddLogSegmentPath(dir, 2);
  struct stat st;
  ASSERT_EQ(::stat(seg.c_str(), &st), 0);
  ASSERT_EQ(::truncate(seg.c_str(), st.st_size - 3), 0);

  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->snapshots_loaded, 0u);
  EXPECT_EQ(stats->files_moved_aside, 1u);
  EXPECT_EQ(stats->torn_tails, 1u);
  EXPECT_EQ(stats->records_replayed, 1u);
  EXPECT_TRUE(Has(*node, "crawl:seen", "logged-1"));
  bool moved = false;
  for (const auto& f : ListDir(dir)) moved |= f.rfind("snap-crawl%3Aseen.pln.corrupt-", 0) == 0;
  EXPECT_TRUE(moved);
}

uint64_t SetBits(const node::Node& n, const std::string& filter) {
  uint64_t bits = 0;
  for (const node::FilterInfo& f : n.Filters()) {
    if (f.config.name != filter) continue;
    for (const node::GenerationInfo& g : f.generations) bits += g.set_bits;
  }
  return bits;
}

// A node's life in a fresh `dir`: recover (nothing), add `keys` to `filter`
// (logged), snapshot, then add `after` (logged only), close. Returns the
// filter's set bits at the snapshot.
uint64_t SnapshotLife(node::Node& node, const std::string& dir, const std::string& filter,
                      const std::vector<std::string>& keys, const std::vector<std::string>& after) {
  auto p = Persistence::Open(dir, AppendFsync::kAlways);
  EXPECT_TRUE(p.ok());
  EXPECT_TRUE((*p)->Recover(&node, node::Time(0), node::FilterConfig{}).ok());
  AddAndLog(node, **p, filter, keys);
  const uint64_t bits = SetBits(node, filter);
  auto job = (*p)->BeginSnapshot(node);
  EXPECT_TRUE(job.ok());
  EXPECT_TRUE((*p)->FinishSnapshot(*job).ok());
  if (!after.empty()) AddAndLog(node, **p, filter, after);
  EXPECT_TRUE((*p)->Close().ok());
  return bits;
}

// A config filter's snapshot loads into its empty memory in one pass that
// checks the checksum as it goes (crdt::OrSnapshotIntoEmpty). Damage deep in
// the words, found only at the end, must leave nothing of the file behind:
// the filter holds exactly what the log replays, as on a node that never had
// the snapshot. And an intact file loads all of its bits that way.
// Recovery's one-pass load tells its caller how far it has read, so that the
// mapped file's pages can leave the resident set as it goes
// (MappedFile::ReleaseBefore): offsets only grow, end inside the value, and
// cover every word, whose bits all arrive.
TEST(PersistenceTest, OnePassLoadReportsHowFarItHasRead) {
  auto source = MakeNode("crawl:seen", 1000000);
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(source->Add("crawl:seen", "k" + std::to_string(i)).ok());
  const std::map<std::string, std::string> values = source->ExportSnapshots();
  ASSERT_EQ(values.count("crawl:seen"), 1u);
  const std::string& value = values.at("crawl:seen");
  auto target = MakeNode("crawl:seen", 1000000);
  std::vector<size_t> reported;
  ASSERT_TRUE(target->ImportSnapshot(value, [&](size_t n) { reported.push_back(n); }).ok());
  ASSERT_GE(reported.size(), 2u);  // 10^6 keys at 1%: ~1.2 MB of words, read in pieces of 512 KiB
  for (size_t i = 1; i < reported.size(); ++i) EXPECT_GT(reported[i], reported[i - 1]) << i;
  EXPECT_LE(reported.back(), value.size());
  EXPECT_GE(reported.back() + 4096, value.size());  // after the last word: the checksum trailer
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(Has(*target, "crawl:seen", "k" + std::to_string(i))) << i;
  EXPECT_EQ(SetBits(*target, "crawl:seen"), SetBits(*source, "crawl:seen"));
}

TEST(PersistenceTest, CorruptSnapshotFoundAfterItsWordsLeavesTheFilterEmpty) {
  const std::string dir = FreshDir("corrupt_words");
  std::vector<std::string> snapshotted;
  for (int i = 0; i < 300; ++i) snapshotted.push_back("s" + std::to_string(i));
  const uint64_t bits_snapshotted = SnapshotLife(*MakeNode(), dir, "crawl:seen", snapshotted, {"logged"});
  const std::string snap = dir + "/snap-crawl%3Aseen.pln";
  std::string intact;
  {
    std::ifstream in(snap, std::ios::binary);
    intact.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(intact.size(), 4096u);
  {  // the intact file: every snapshotted key back, through the one-pass load
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kNone);
    ASSERT_TRUE(p.ok());
    auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->snapshots_loaded, 1u);
    for (const std::string& key : snapshotted) ASSERT_TRUE(Has(*node, "crawl:seen", key)) << key;
    EXPECT_GE(SetBits(*node, "crawl:seen"), bits_snapshotted);
    ASSERT_TRUE((*p)->Close().ok());
  }
  // 64 bytes of ones in the words' second half: ORed in before the checksum
  // at the end fails.
  {
    std::fstream s(snap, std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(static_cast<std::streamoff>(intact.size() - 4 - 1024));
    s.write(std::string(64, '\xff').data(), 64);
  }
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->snapshots_loaded, 0u);
  EXPECT_EQ(stats->files_moved_aside, 1u);
  auto fresh = MakeNode();
  ASSERT_TRUE(fresh->Add("crawl:seen", "logged").ok());
  EXPECT_TRUE(Has(*node, "crawl:seen", "logged"));
  EXPECT_EQ(SetBits(*node, "crawl:seen"), SetBits(*fresh, "crawl:seen"));
}

// A filter of 64 MiB and more recovers with its memory faulted in by a
// helper thread (in 4 KiB pages) and its huge pages rebuilt by another after
// (persistence.cc, Prefaulter and RestoreHugePages): the same bits come
// back, and Close stops the rebuilding wherever it is.
TEST(PersistenceTest, BigFilterRecoversAlongsideItsPrefaultAndHugePageThreads) {
  const std::string dir = FreshDir("big");
  auto make = [] { return MakeNode("big", 60'000'000, 1); };  // ~72 MB at 1%
  std::vector<std::string> keys;
  for (int i = 0; i < 2000; ++i) keys.push_back("k" + std::to_string(i));
  const uint64_t bits = SnapshotLife(*make(), dir, "big", keys, {});
  for (int round = 0; round < 2; ++round) {
    auto node = make();
    auto p = Persistence::Open(dir, AppendFsync::kNone);
    ASSERT_TRUE(p.ok());
    auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->snapshots_loaded, 1u);
    EXPECT_EQ(SetBits(*node, "big"), bits);
    for (const std::string& key : keys) ASSERT_TRUE(Has(*node, "big", key)) << key;
    // Adds while the huge pages are rebuilt land and stay.
    ASSERT_TRUE(node->Add("big", "during-" + std::to_string(round)).ok());
    EXPECT_TRUE(Has(*node, "big", "during-" + std::to_string(round)));
    ASSERT_TRUE((*p)->Close().ok());
  }
}

TEST(PersistenceTest, LogOnlyFilterIsRecreatedOnReplay) {
  const std::string dir = FreshDir("runtime_filter");
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    node::FilterConfig f;
    f.name = "made:at-runtime";
    ASSERT_TRUE(node->Reserve(f, node::Time(0)).ok());
    AddAndLog(*node, **p, "made:at-runtime", {"x"});
    ASSERT_TRUE((*p)->Close().ok());
  }
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
  EXPECT_TRUE(Has(*node, "made:at-runtime", "x"));
}

// Binary-safe names (empty, with spaces and control bytes, 64 KiB) survive a
// snapshot, the add log after it, and recovery.
TEST(PersistenceTest, BinaryNamesRoundTrip) {
  const std::string dir = FreshDir("binary_names");
  const std::vector<std::string> names = {"", std::string("sp ace\0\r\n\xff", 10),
                                          std::string(crdt::kMaxFilterNameBytes, '\x80')};
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    for (const std::string& name : names) {
      node::FilterConfig f;
      f.name = name;
      f.capacity = 1000;
      ASSERT_TRUE(node->Reserve(f, node::Time(0)).ok());
      AddAndLog(*node, **p, name, {"in-snapshot"});
    }
    auto job = (*p)->BeginSnapshot(*node);
    ASSERT_TRUE(job.ok());
    ASSERT_TRUE((*p)->FinishSnapshot(*job).ok());
    for (const std::string& name : names) AddAndLog(*node, **p, name, {"in-log"});
    ASSERT_TRUE((*p)->Close().ok());
  }
  for (const std::string& file : ListDir(dir)) EXPECT_LE(file.size(), 255u) << file;
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->snapshots_loaded, names.size() + 1);  // and crawl:seen
  EXPECT_EQ(stats->files_moved_aside, 0u);
  for (const std::string& name : names) {
    EXPECT_TRUE(Has(*node, name, "in-snapshot")) << name.size();
    EXPECT_TRUE(Has(*node, name, "in-log")) << name.size();
    EXPECT_EQ(node->Info(name)->config.capacity, 1000u);
  }
}

// DEL as the RESP path does it: the delete record first, then the deletion.
void DeleteAndLog(node::Node& n, Persistence& p, const std::string& filter, node::Time now) {
  auto info = n.Info(filter, node::InfoParts::kEpochsOnly);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(p.LogDelete(filter, info->stamp, true).ok());
  auto gone = n.Delete(filter, now);
  ASSERT_TRUE(gone.ok() && *gone);
}

// A deleted filter stays deleted across a restart, whether its tombstone is
// in the log or (after a snapshot) in the tombstone file; the adds it had do
// not leak into the filter created after it under the same name; its
// snapshot file goes at the next snapshot.
TEST(PersistenceTest, DeletedFilterStaysDeletedAndItsAddsStayWithIt) {
  for (const bool snapshot_after_delete : {false, true}) {
    SCOPED_TRACE(snapshot_after_delete);
    const std::string dir = FreshDir(snapshot_after_delete ? "delete_snap" : "delete_log");
    node::FilterConfig f;
    f.name = "to:delete";
    f.capacity = 1000;
    {
      auto node = MakeNode();
      auto p = Persistence::Open(dir, AppendFsync::kAlways);
      ASSERT_TRUE(p.ok());
      ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
      ASSERT_TRUE(node->Reserve(f, node::Time(100)).ok());
      ASSERT_TRUE((*p)->LogCreate(*node, f.name, true).ok());
      AddAndLog(*node, **p, f.name, {"old-snap"});
      auto job = (*p)->BeginSnapshot(*node);  // the old filter is in a snapshot file...
      ASSERT_TRUE(job.ok());
      ASSERT_TRUE((*p)->FinishSnapshot(*job).ok());
      AddAndLog(*node, **p, f.name, {"old-log"});  // ...and in the log
      DeleteAndLog(*node, **p, f.name, node::Time(200));
      AddAndLog(*node, **p, "crawl:seen", {"other"});
      // "recreated" is created after the delete; "gone" stays deleted.
      ASSERT_TRUE(node->Reserve(f, node::Time(50)).ok());  // a clock behind the stamp: still above it
      EXPECT_GT(node->Info(f.name)->stamp, 100u);
      ASSERT_TRUE((*p)->LogCreate(*node, f.name, true).ok());
      AddAndLog(*node, **p, f.name, {"new"});
      node::FilterConfig g = f;
      g.name = "gone";
      ASSERT_TRUE(node->Reserve(g, node::Time(300)).ok());
      ASSERT_TRUE((*p)->LogCreate(*node, g.name, true).ok());
      AddAndLog(*node, **p, g.name, {"g"});
      DeleteAndLog(*node, **p, g.name, node::Time(400));
      if (snapshot_after_delete) {
        auto job2 = (*p)->BeginSnapshot(*node);
        ASSERT_TRUE(job2.ok());
        ASSERT_TRUE((*p)->FinishSnapshot(*job2).ok());
        const auto files = ListDir(dir);
        EXPECT_EQ(std::find(files.begin(), files.end(), "snap-gone.pln"), files.end());
        EXPECT_NE(std::find(files.begin(), files.end(), "tombstones.pln"), files.end());
      }
      ASSERT_TRUE((*p)->Close().ok());
    }
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kNone);
    ASSERT_TRUE(p.ok());
    auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->files_moved_aside, 0u);
    EXPECT_EQ(stats->default_creates, 0u);  // no deleted filter re-created by its adds
    EXPECT_FALSE(node->Info("gone").ok());
    ASSERT_TRUE(node->Info(f.name).ok());
    EXPECT_GT(node->Info(f.name)->stamp, 100u);
    EXPECT_TRUE(Has(*node, f.name, "new"));
    EXPECT_FALSE(Has(*node, f.name, "old-snap"));
    EXPECT_FALSE(Has(*node, f.name, "old-log"));
    EXPECT_TRUE(Has(*node, "crawl:seen", "other"));
    const auto tombs = node->Tombstones();
    EXPECT_EQ(tombs.count("gone"), 1u);
    EXPECT_EQ(tombs.count(f.name), 1u);
  }
}

TEST(TombstoneFileTest, RoundTripAndCorruptionIsDetected) {
  std::map<std::string, uint64_t> t = {{"", 0}, {"a", 5}, {std::string("\0\xff", 2), ~uint64_t{0}}};
  const std::string bytes = EncodeTombstones(t);
  auto back = DecodeTombstones(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, t);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x20;
    EXPECT_FALSE(DecodeTombstones(bad).ok()) << i;
  }
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeTombstones(bytes.substr(0, n)).ok()) << n;
}

TEST(FileNameTest, EncodeDecode) {
  for (const std::string& name : std::vector<std::string>{"crawl:seen", "a/b", "..", "%", "plain-name_1.x", std::string("\x01\xff", 2)}) {
    const std::string enc = EncodeFileName(name);
    EXPECT_EQ(enc.find('/'), std::string::npos);
    auto dec = DecodeFileName(enc);
    ASSERT_TRUE(dec.ok());
    EXPECT_EQ(*dec, name);
  }
  EXPECT_FALSE(DecodeFileName("%4").ok());
  EXPECT_FALSE(DecodeFileName("%zz").ok());
  // Long names get a fixed-size hashed file name (file names are limited to
  // 255 bytes), distinct per name; recovery reads the name from the snapshot.
  const std::string long_a(70, '\xff'), long_b(kMaxEncodedNameBytes + 1, 'b');
  for (const std::string& name : {long_a, long_b}) {
    const std::string enc = EncodeFileName(name);
    EXPECT_EQ(enc.size(), 33u);
    EXPECT_EQ(enc[0], '~');
    EXPECT_FALSE(DecodeFileName(enc).ok());
  }
  EXPECT_NE(EncodeFileName(long_a), EncodeFileName(long_b));
  EXPECT_EQ(EncodeFileName(""), "");
}

}  // namespace
}  // namespace pollen::runtime
