// The add log: round trip through the writer, every truncation (a torn tail is
// dropped, the records before it kept), corruption (stops the scan, keeps the
// prefix), rotation and the fsync modes.
#include "node/runtime/add_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/runtime/dir_util.h"
#include "node/runtime/add_log_format.h"
#include "node/runtime/add_log_reader.h"
#include "node/runtime/crc32c.h"

namespace pollen::runtime {
namespace {

using ::pollen::testing::ReadFile;

using Records = std::vector<std::pair<std::string, std::string>>;

Records Collect(std::string_view bytes, ScanResult* result) {
  Records out;
  *result = ScanAddLogBytes(bytes, [&](const AddRecordView& r) { out.emplace_back(r.filter, r.key); });
  return out;
}

std::string Segment(const Records& records) {
  std::string s(kAddLogMagic);
  for (const auto& [f, k] : records) AppendAddRecord(f, k, &s);
  return s;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::pollen::testing::FreshDir("pollen_add_log_", name);
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xE3069283u);
}

TEST(AddLogFormatTest, RoundTrip) {
  const Records in = {{"crawl:seen", "https://example.com/"}, {"f", ""}, {"f", std::string(1000, 'x')},
                      {std::string(255, 'n'), std::string("\0\r\n", 3)}};
  ScanResult r;
  EXPECT_EQ(Collect(Segment(in), &r), in);
  EXPECT_EQ(r.records, in.size());
  EXPECT_FALSE(r.torn_tail);
  EXPECT_FALSE(r.corrupt);
}

TEST(AddLogFormatTest, EveryTruncationKeepsTheWholeRecordsBefore) {
  const Records in = {{"a", "one"}, {"bb", "two"}, {"ccc", "three"}};
  const std::string full = Segment(in);
  std::vector<size_t> ends = {kAddLogMagic.size()};
  {
    std::string s(kAddLogMagic);
    for (const auto& [f, k] : in) {
      AppendAddRecord(f, k, &s);
      ends.push_back(s.size());
    }
  }
  for (size_t len = 0; len < full.size(); ++len) {
    ScanResult r;
    const Records got = Collect(std::string_view(full).substr(0, len), &r);
    size_t whole = 0;
    while (whole + 1 < ends.size() && ends[whole + 1] <= len) ++whole;
    EXPECT_EQ(got, Records(in.begin(), in.begin() + static_cast<long>(whole))) << len;
    EXPECT_FALSE(r.corrupt) << len;
    const bool at_boundary = len == 0 || std::find(ends.begin(), ends.end(), len) != ends.end();
    EXPECT_EQ(r.torn_tail, !at_boundary) << len;
  }
}

TEST(AddLogFormatTest, EveryFlippedByteIsCaughtOrHarmless) {
  const Records in = {{"a", "one"}, {"bb", "two"}, {"ccc", "three"}};
  const std::string full = Segment(in);
  for (size_t i = 0; i < full.size(); ++i) {
    std::string bad = full;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    ScanResult r;
    const Records got = Collect(bad, &r);
    // Never a record that was not written; a prefix of the real ones.
    ASSERT_LE(got.size(), in.size()) << i;
    for (size_t j = 0; j < got.size(); ++j) EXPECT_EQ(got[j], in[j]) << i;
    EXPECT_TRUE(r.corrupt || r.torn_tail) << i;
    EXPECT_LT(got.size(), in.size()) << i;
  }
}

TEST(AddLogFormatTest, BadMagicAndAbsurdLengths) {
  ScanResult r;
  EXPECT_TRUE(Collect("NOTALOG!", &r).empty());
  EXPECT_TRUE(r.corrupt);
  std::string huge(kAddLogMagic);
  huge += std::string("\xff\xff\xff\x7f\0\0\0\0", 8);
  EXPECT_TRUE(Collect(huge, &r).empty());
  EXPECT_TRUE(r.corrupt);
  std::string zero(kAddLogMagic);
  zero += std::string(16, '\0');  // a zero-filled tail (lost data blocks)
  EXPECT_TRUE(Collect(zero, &r).empty());
  EXPECT_TRUE(r.corrupt);
  // Empty filter name with a valid checksum.
  std::string payload("\0key", 4);
  std::string rec(8, '\0');
  const uint32_t len = 4, crc = Crc32c(payload);
  for (int i = 0; i < 4; ++i) {
    rec[i] = static_cast<char>(len >> (8 * i));
    rec[4 + i] = static_cast<char>(crc >> (8 * i));
  }
  EXPECT_TRUE(Collect(std::string(kAddLogMagic) + rec + payload, &r).empty());
  EXPECT_TRUE(r.corrupt);
}

TEST(AddLogTest, WriterRoundTripInEveryMode) {
  for (AppendFsync mode : {AppendFsync::kNone, AppendFsync::kEverySec, AppendFsync::kAlways}) {
    const std::string dir = FreshDir(std::string(AppendFsyncName(mode)));
    auto log = AddLog::Open(dir, 1, mode);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<std::string_view> keys = {"k1", "k2", "k3"};
    ASSERT_TRUE((*log)->Append("f", keys).ok());
    if (mode == AppendFsync::kAlways) {
      // Durable before Append returned: the bytes are in the file now.
      ScanResult r;
      EXPECT_EQ(Collect(ReadFile(AddLogSegmentPath(dir, 1)), &r).size(), 3u);
      EXPECT_GE((*log)->fsyncs(), 1u);
    }
    ASSERT_TRUE((*log)->Close().ok());
    ScanResult r;
    const Records got = Collect(ReadFile(AddLogSegmentPath(dir, 1)), &r);
    EXPECT_EQ(got, (Records{{"f", "k1"}, {"f", "k2"}, {"f", "k3"}}));
    EXPECT_FALSE(r.corrupt || r.torn_tail);
  }
}

TEST(AddLogTest, NotifyDurableAnswersOnceTheRecordsAreFsyncedInOrder) {
  // Declared before the log: a notice that Close runs (an early ASSERT
  // return) still finds them.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> order;
  std::vector<size_t> records_on_disk;
  const std::string dir = FreshDir("notify");
  auto log = AddLog::Open(dir, 1, AppendFsync::kAlways);
  ASSERT_TRUE(log.ok()) << log.status();
  constexpr int kNotices = 20;
  for (int i = 0; i < kNotices; ++i) {
    const std::string key = "k" + std::to_string(i);
    const std::vector<std::string_view> keys = {key};
    ASSERT_TRUE((*log)->AppendQueued("f", keys).ok());
    (*log)->NotifyDurable([&, i, path = AddLogSegmentPath(dir, 1)](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      ScanResult r;
      const size_t on_disk = Collect(ReadFile(path), &r).size();  // fsynced, so written
      std::lock_guard lock(mu);
      order.push_back(i);
      records_on_disk.push_back(on_disk);
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return order.size() == kNotices; }));
    for (int i = 0; i < kNotices; ++i) {
      EXPECT_EQ(order[i], i);
      EXPECT_GE(records_on_disk[i], static_cast<size_t>(i + 1));  // its own record and those before
    }
  }
  EXPECT_GE((*log)->fsyncs(), 1u);
  // Nothing to wait for: answered at once, on this thread.
  bool at_once = false;
  (*log)->NotifyDurable([&](absl::Status s) { at_once = s.ok(); });
  EXPECT_TRUE(at_once);
  ASSERT_TRUE((*log)->Close().ok());
  absl::Status after_close;
  (*log)->NotifyDurable([&](absl::Status s) { after_close = s; });
  EXPECT_TRUE(absl::IsFailedPrecondition(after_close)) << after_close;
}

TEST(AddLogTest, CloseRunsTheNoticesStillQueuedOnce) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> runs{0}, ok{0};
    auto log = AddLog::Open(FreshDir("notify-close-" + std::to_string(round)), 1, AppendFsync::kAlways);
    ASSERT_TRUE(log.ok());
    const std::vector<std::string_view> keys = {"k"};
    ASSERT_TRUE((*log)->AppendQueued("f", keys).ok());
    (*log)->NotifyDurable([&](absl::Status s) {
      ++runs;
      ok += s.ok();
    });
    ASSERT_TRUE((*log)->Close().ok());  // fsyncs what is left, then runs what is due
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(ok.load(), 1);
  }
}

TEST(AddLogTest, NotifyDurableIsImmediateWithoutAppendfsyncAlways) {
  for (AppendFsync mode : {AppendFsync::kNone, AppendFsync::kEverySec}) {
    auto log = AddLog::Open(FreshDir(std::string("notify-") + std::string(AppendFsyncName(mode))), 1, mode);
    ASSERT_TRUE(log.ok());
    const std::vector<std::string_view> keys = {"k"};
    ASSERT_TRUE((*log)->AppendQueued("f", keys).ok());
    bool at_once = false;
    (*log)->NotifyDurable([&](absl::Status s) { at_once = s.ok(); });
    EXPECT_TRUE(at_once);
  }
}

TEST(AddLogTest, RotateSplitsSegments) {
  const std::string dir = FreshDir("rotate");
  auto log = AddLog::Open(dir, 7, AppendFsync::kNone);
  ASSERT_TRUE(log.ok());
  std::vector<std::string_view> a = {"before"}, b = {"after"};
  ASSERT_TRUE((*log)->Append("f", a).ok());
  auto closed = (*log)->Rotate();
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(*closed, 7u);
  EXPECT_EQ((*log)->current_segment(), 8u);
  ASSERT_TRUE((*log)->Append("f", b).ok());
  ASSERT_TRUE((*log)->Close().ok());
  EXPECT_EQ(ListAddLogSegments(dir), (std::vector<uint64_t>{7, 8}));
  ScanResult r;
  EXPECT_EQ(Collect(ReadFile(AddLogSegmentPath(dir, 7)), &r), (Records{{"f", "before"}}));
  EXPECT_EQ(Collect(ReadFile(AddLogSegmentPath(dir, 8)), &r), (Records{{"f", "after"}}));
}

TEST(AddLogTest, ConcurrentAppendersLoseNothing) {
  const std::string dir = FreshDir("concurrent");
  auto log = AddLog::Open(dir, 1, AppendFsync::kAlways);
  ASSERT_TRUE(log.ok());
  constexpr int kThreads = 4, kPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string key = std::to_string(t) + ":" + std::to_string(i);
        std::vector<std::string_view> keys = {key};
        ASSERT_TRUE((*log)->Append("f", keys).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE((*log)->Close().ok());
  ScanResult r;
  const Records got = Collect(ReadFile(AddLogSegmentPath(dir, 1)), &r);
  ASSERT_EQ(got.size(), static_cast<size_t>(kThreads * kPerThread));
  std::set<std::string> seen;
  for (const auto& [f, k] : got) seen.insert(k);
  EXPECT_EQ(seen.size(), got.size());
}

TEST(AddLogTest, RefusesOversizedInput) {
  const std::string dir = FreshDir("oversize");
  auto log = AddLog::Open(dir, 1, AppendFsync::kNone);
  ASSERT_TRUE(log.ok());
  std::vector<std::string_view> keys = {"k"};
  EXPECT_FALSE((*log)->Append(std::string(kMaxLoggedFilterBytes + 1, 'f'), keys).ok());
  const std::string big(kMaxLoggedKeyBytes + 1, 'x');
  std::vector<std::string_view> big_keys = {big};
  EXPECT_FALSE((*log)->Append("f", big_keys).ok());
  EXPECT_FALSE(AddLog::Open(dir, 1, AppendFsync::kNone).ok());  // segment 1 exists already
}

TEST(AddLogTest, FileScanMatchesByteScan) {
  const std::string dir = FreshDir("filescan");
  Records in;
  for (int i = 0; i < 3000; ++i) in.emplace_back("filter", std::string(static_cast<size_t>(i % 700), 'a' + i % 26));
  const std::string bytes = Segment(in) + "\x10\x00";  // plus a torn tail
  const std::string path = dir + "/seg.log";
  std::ofstream(path, std::ios::binary) << bytes;
  Records got;
  auto r = ScanAddLogFile(path, [&](const AddRecordView& rec) { got.emplace_back(rec.filter, rec.key); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(got, in);
  EXPECT_TRUE(r->torn_tail);
  EXPECT_FALSE(r->corrupt);
  EXPECT_FALSE(ScanAddLogFile(dir + "/missing.log", [](const AddRecordView&) {}).ok());
}

}  // namespace
}  // namespace pollen::runtime
