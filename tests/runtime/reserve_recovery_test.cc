// Filters created at run time survive a crash through the add log's create
// records, in-process with real node::Node objects: a reserved filter comes
// back with its exact catalog entry (parameters, stamp, creator, epoch), even
// when an add record precedes the create record; a create record under another
// secret is refused and counted; a log without create records (older
// versions) still re-creates the filter with default parameters.
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "node/runtime/add_log.h"
#include "node/runtime/persistence.h"
#include "tests/runtime/persistence_util.h"

namespace pollen::runtime {
namespace {

using ::pollen::testing::AddAndLog;
using ::pollen::testing::Has;

std::string FreshDir(const std::string& name) { return ::pollen::testing::FreshDir("pollen_reserve_recovery_", name); }

std::unique_ptr<node::Node> MakeNode(uint8_t secret_byte = 7) {
  node::NodeConfig c;
  c.name = "p1";
  c.advertise = "127.0.0.1:1";
  c.secret.bytes.fill(secret_byte);
  auto n = node::Node::Create(c);
  EXPECT_TRUE(n.ok()) << n.status();
  return std::move(*n);
}

node::FilterConfig Custom(const std::string& name) {
  node::FilterConfig f;
  f.name = name;
  f.capacity = 5000;
  f.fpr = 0.001;
  f.generations = 3;
  f.rotate_fill = 0.75;
  return f;
}

std::vector<std::string> Keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back("key-" + std::to_string(i));
  return keys;
}

TEST(ReserveRecoveryTest, ReservedFilterComesBackWithItsExactEntry) {
  const std::string dir = FreshDir("exact");
  std::string entry_before;
  const auto keys = Keys(200);
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    ASSERT_TRUE(node->Reserve(Custom("custom"), node::Time(123'456'789)).ok());
    // An add logged before the create record (a client racing the driver).
    EXPECT_TRUE((*p)->NeedsCreateRecord("custom"));
    AddAndLog(*node, **p, "custom", {keys[0]});
    ASSERT_TRUE((*p)->LogCreate(*node, "custom", true).ok());
    EXPECT_FALSE((*p)->NeedsCreateRecord("custom"));
    EXPECT_EQ((*p)->create_records(), 1u);
    AddAndLog(*node, **p, "custom", std::vector<std::string>(keys.begin() + 1, keys.end()));
    auto e = node->ExportCatalogEntry("custom");
    ASSERT_TRUE(e.ok());
    entry_before = *e;
    // No snapshot: recovery below has only the (fsynced) log.
  }
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kAlways);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(5), node::FilterConfig{});
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->creates_replayed, 1u);
  EXPECT_EQ(stats->creates_refused, 0u);
  EXPECT_EQ(stats->default_creates, 0u);
  EXPECT_EQ(stats->records_replayed, keys.size());
  auto info = node->Info("custom");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->config.capacity, 5000u);
  EXPECT_DOUBLE_EQ(info->config.fpr, 0.001);
  EXPECT_EQ(info->config.generations, 3u);
  EXPECT_DOUBLE_EQ(info->config.rotate_fill, 0.75);
  auto entry_after = node->ExportCatalogEntry("custom");
  ASSERT_TRUE(entry_after.ok());
  EXPECT_EQ(*entry_after, entry_before);  // same stamp and creator: no catalog conflict with peers
  for (const auto& k : keys) EXPECT_TRUE(Has(*node, "custom", k)) << k;
  EXPECT_FALSE((*p)->NeedsCreateRecord("custom"));
}

TEST(ReserveRecoveryTest, CreateRecordsSurviveASnapshotCycle) {
  const std::string dir = FreshDir("snapshot");
  {
    auto node = MakeNode();
    auto p = Persistence::Open(dir, AppendFsync::kNone);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    ASSERT_TRUE(node->Reserve(Custom("before"), node::Time(1)).ok());
    ASSERT_TRUE((*p)->LogCreate(*node, "before", false).ok());
    AddAndLog(*node, **p, "before", {"a"});
    auto job = (*p)->BeginSnapshot(*node);
    ASSERT_TRUE(job.ok());
    ASSERT_TRUE((*p)->FinishSnapshot(*job).ok());  // drops the segment holding "before"'s record
    ASSERT_TRUE(node->Reserve(Custom("after"), node::Time(2)).ok());
    ASSERT_TRUE((*p)->LogCreate(*node, "after", false).ok());
    AddAndLog(*node, **p, "after", {"b"});
    ASSERT_TRUE((*p)->Flush().ok());
  }
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->snapshots_loaded, 1u);
  EXPECT_EQ(stats->creates_replayed, 1u);
  for (const char* name : {"before", "after"}) {
    auto info = node->Info(name);
    ASSERT_TRUE(info.ok()) << name;
    EXPECT_EQ(info->config.capacity, 5000u) << name;
    EXPECT_EQ(info->config.generations, 3u) << name;
    EXPECT_FALSE((*p)->NeedsCreateRecord(name)) << name;
  }
  EXPECT_TRUE(Has(*node, "before", "a"));
  EXPECT_TRUE(Has(*node, "after", "b"));
}

TEST(ReserveRecoveryTest, CreateRecordUnderAnotherSecretIsRefusedAndCounted) {
  const std::string dir = FreshDir("secret");
  {
    auto node = MakeNode(7);
    auto p = Persistence::Open(dir, AppendFsync::kAlways);
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE((*p)->Recover(node.get(), node::Time(0), node::FilterConfig{}).ok());
    ASSERT_TRUE(node->Reserve(Custom("custom"), node::Time(1)).ok());
    ASSERT_TRUE((*p)->LogCreate(*node, "custom", true).ok());
  }
  auto node = MakeNode(8);  // the operator changed the cluster secret
  auto p = Persistence::Open(dir, AppendFsync::kAlways);
  ASSERT_TRUE(p.ok());
  auto stats = (*p)->Recover(node.get(), node::Time(0), node::FilterConfig{});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->creates_refused, 1u);
  EXPECT_EQ(stats->creates_replayed, 0u);
  EXPECT_FALSE(node->Info("custom").ok());
  EXPECT_EQ(stats->files_moved_aside, 0u);  // a valid record, not corruption
}

TEST(ReserveRecoveryTest, GarbageEntryBytesAreRefusedByTheNode) {
  auto node = MakeNode();
  for (const std::string& bytes : {std::string(), std::string("\xff\xff\xff"), std::string(100, '\x0a'),
                                   std::string(70'000, 'x')}) {
    EXPECT_FALSE(node->ImportCatalogEntry(bytes, node::Time(0)).ok());
  }
  EXPECT_TRUE(node->Filters().empty());
  // A real entry cut short: refused, or (a prefix that ends on a field
  // boundary still parses) a valid filter of that name; never anything else.
  // In the log, the record checksum is what catches truncation.
  ASSERT_TRUE(node->Reserve(Custom("real"), node::Time(1)).ok());
  const std::string entry = *node->ExportCatalogEntry("real");
  size_t refused = 0;
  for (size_t len = 0; len < entry.size(); ++len) {
    auto other = MakeNode();
    const absl::Status s = other->ImportCatalogEntry(std::string_view(entry).substr(0, len), node::Time(0));
    const std::vector<node::FilterInfo> filters = other->Filters();
    if (s.ok()) {
      ASSERT_EQ(filters.size(), 1u) << len;
      EXPECT_EQ(filters[0].config.name, "real") << len;
    } else {
      EXPECT_TRUE(filters.empty()) << len;
      ++refused;
    }
  }
  EXPECT_GT(refused, entry.size() / 2);
  auto other = MakeNode();
  ASSERT_TRUE(other->ImportCatalogEntry(entry, node::Time(0)).ok());
  EXPECT_EQ(*other->ExportCatalogEntry("real"), entry);
  // Importing the same entry again changes nothing.
  ASSERT_TRUE(other->ImportCatalogEntry(entry, node::Time(0)).ok());
  EXPECT_EQ(other->Filters().size(), 1u);
}

TEST(ReserveRecoveryTest, LogWithoutCreateRecordsStillRecreatesWithDefaults) {
  const std::string dir = FreshDir("legacy");
  {
    // What an older pollend wrote: adds only.
    ::mkdir(dir.c_str(), 0700);
    auto log = AddLog::Open(dir, 1, AppendFsync::kAlways);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<std::string_view> keys = {"x", "y"};
    ASSERT_TRUE((*log)->Append("legacy", keys).ok());
    ASSERT_TRUE((*log)->Close().ok());
  }
  auto node = MakeNode();
  auto p = Persistence::Open(dir, AppendFsync::kNone);
  ASSERT_TRUE(p.ok());
  node::FilterConfig defaults;
  defaults.capacity = 777;
  auto stats = (*p)->Recover(node.get(), node::Time(0), defaults);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->default_creates, 1u);
  auto info = node->Info("legacy");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->config.capacity, 777u);
  EXPECT_TRUE(Has(*node, "legacy", "x"));
  EXPECT_TRUE(Has(*node, "legacy", "y"));
}

}  // namespace
}  // namespace pollen::runtime
