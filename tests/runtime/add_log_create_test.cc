// Create records in the add log: round trip mixed with add records, every
// truncation and every flipped byte, create records that pass the checksum
// but break the format (refused as corruption), and the writer's AppendCreate
// and WaitDurable under each appendfsync mode.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/runtime/dir_util.h"
#include "node/runtime/add_log.h"
#include "node/runtime/add_log_format.h"
#include "node/runtime/add_log_reader.h"
#include "node/runtime/crc32c.h"

namespace pollen::runtime {
namespace {

using ::pollen::testing::ReadFile;

// (kind, filter, key or entry)
using Rec = std::tuple<RecordKind, std::string, std::string>;
using Recs = std::vector<Rec>;

Recs Scan(std::string_view bytes, ScanResult* result) {
  Recs out;
  *result = ScanAddLogBytes(bytes, [&](const AddRecordView& r) {
    out.emplace_back(r.kind, r.filter, r.kind == RecordKind::kAdd ? r.key : r.entry);
    // The field of the other kind is always empty.
    EXPECT_TRUE(r.kind == RecordKind::kAdd ? r.entry.empty() : r.key.empty());
  });
  return out;
}

std::string Encode(const Recs& recs, std::vector<size_t>* ends = nullptr) {
  std::string s(kAddLogMagic);
  if (ends != nullptr) ends->push_back(s.size());
  for (const auto& [kind, filter, body] : recs) {
    if (kind == RecordKind::kAdd) {
      AppendAddRecord(filter, body, &s);
    } else {
      AppendCreateRecord(filter, body, &s);
    }
    if (ends != nullptr) ends->push_back(s.size());
  }
  return s;
}

// A record with a correct header and checksum around any payload.
std::string RawRecord(const std::string& payload) {
  std::string rec(8, '\0');
  const uint32_t len = static_cast<uint32_t>(payload.size()), crc = Crc32c(payload);
  for (int i = 0; i < 4; ++i) {
    rec[i] = static_cast<char>(len >> (8 * i));
    rec[4 + i] = static_cast<char>(crc >> (8 * i));
  }
  return rec + payload;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = ::pollen::testing::FreshDir("pollen_add_log_create_", name);
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

const Recs kMixed = {
    {RecordKind::kAdd, "early", "added before its create record"},
    {RecordKind::kCreate, "crawl:seen", std::string("\x0a\x05entry\x10\x01", 9)},
    {RecordKind::kAdd, "crawl:seen", "https://example.com/"},
    {RecordKind::kCreate, std::string(255, 'n'), std::string(kMaxLoggedEntryBytes, '\xee')},
    {RecordKind::kAdd, "f", ""},
    {RecordKind::kCreate, "f", "x"},
    // Binary-safe names: empty, binary, and longer than the short forms hold.
    {RecordKind::kAdd, "", "key of the empty name"},
    {RecordKind::kCreate, "", "entry"},
    {RecordKind::kAdd, std::string("sp ace\0\xff\r\n", 11), "k"},
    {RecordKind::kAdd, std::string(256, 'L'), "k256"},
    {RecordKind::kCreate, std::string(kMaxLoggedFilterBytes, 'M'), "entry-max"},
    {RecordKind::kAdd, std::string(kMaxLoggedFilterBytes, 'M'), std::string(1000, 'k')},
};

TEST(AddLogCreateTest, RoundTripMixedWithAdds) {
  ScanResult r;
  EXPECT_EQ(Scan(Encode(kMixed), &r), kMixed);
  EXPECT_EQ(r.records, kMixed.size());
  EXPECT_FALSE(r.corrupt);
  EXPECT_FALSE(r.torn_tail);
}

TEST(AddLogCreateTest, EveryTruncationKeepsTheWholeRecordsBefore) {
  const Recs in = {{RecordKind::kCreate, "a", "entry-a"}, {RecordKind::kAdd, "a", "k"},
                   {RecordKind::kCreate, "bb", "entry-bb"}};
  std::vector<size_t> ends;
  const std::string full = Encode(in, &ends);
  for (size_t len = 0; len < full.size(); ++len) {
    ScanResult r;
    const Recs got = Scan(std::string_view(full).substr(0, len), &r);
    size_t whole = 0;
    while (whole + 1 < ends.size() && ends[whole + 1] <= len) ++whole;
    EXPECT_EQ(got, Recs(in.begin(), in.begin() + static_cast<long>(whole))) << len;
    EXPECT_FALSE(r.corrupt) << len;
  }
}

TEST(AddLogCreateTest, EveryFlippedByteIsCaughtOrHarmless) {
  const Recs in = {{RecordKind::kCreate, "a", "entry-a"}, {RecordKind::kAdd, "a", "k"},
                   {RecordKind::kCreate, "bb", "entry-bb"}};
  const std::string full = Encode(in);
  for (size_t i = 0; i < full.size(); ++i) {
    for (char mask : {'\x01', '\x5a', '\xff'}) {
      std::string bad = full;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      ScanResult r;
      const Recs got = Scan(bad, &r);
      ASSERT_LT(got.size(), in.size()) << i;
      for (size_t j = 0; j < got.size(); ++j) EXPECT_EQ(got[j], in[j]) << i;
      EXPECT_TRUE(r.corrupt || r.torn_tail) << i;
    }
  }
}

TEST(AddLogCreateTest, MalformedCreateRecordsWithAGoodChecksumAreCorruption) {
  const std::string good = Encode({{RecordKind::kAdd, "f", "kept"}});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"marker only", std::string("\0", 1)},
      {"kind only", std::string("\0\x01", 2)},
      {"unknown kind", std::string("\0\x07\x01" "fentry", 9)},
      {"long name past the end", std::string("\0\x02\x09\x00\x00\x00" "fkey", 10)},
      {"long name over the limit", std::string("\0\x03\x01\x00\x01\x00", 6) + std::string(70000, 'n') + "entry"},
      {"long create without entry", std::string("\0\x03\x01\x00\x00\x00" "f", 7)},
      {"empty filter name", std::string("\0\x01\x00" "entry", 8)},
      {"filter name past the end", std::string("\0\x01\x09" "fentry", 9)},
      {"empty entry", std::string("\0\x01\x01" "f", 4)},
      {"entry too long", std::string("\0\x01\x01" "f", 4) + std::string(kMaxLoggedEntryBytes + 1, 'e')},
  };
  for (const auto& [what, payload] : cases) {
    ScanResult r;
    const Recs got = Scan(good + RawRecord(payload) + RawRecord(std::string("\x01" "fafter", 7)), &r);
    EXPECT_TRUE(r.corrupt) << what;
    EXPECT_FALSE(r.error.empty()) << what;
    EXPECT_EQ(r.valid_bytes, good.size()) << what;
    EXPECT_EQ(got, (Recs{{RecordKind::kAdd, "f", "kept"}})) << what;
  }
}

TEST(AddLogCreateTest, WriterAppendCreateAndWaitDurable) {
  for (AppendFsync mode : {AppendFsync::kNone, AppendFsync::kEverySec, AppendFsync::kAlways}) {
    const std::string dir = FreshDir(std::string(AppendFsyncName(mode)));
    auto log = AddLog::Open(dir, 1, mode);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->AppendCreate("f", "entry-1", false).ok());
    std::vector<std::string_view> keys = {"k1"};
    ASSERT_TRUE((*log)->Append("f", keys).ok());
    ASSERT_TRUE((*log)->AppendCreate("g", "entry-2", false).ok());
    ASSERT_TRUE((*log)->WaitDurable().ok());
    const Recs want = {{RecordKind::kCreate, "f", "entry-1"}, {RecordKind::kAdd, "f", "k1"},
                       {RecordKind::kCreate, "g", "entry-2"}};
    if (mode == AppendFsync::kAlways) {
      // WaitDurable returned: every record queued before it is in the file.
      ScanResult r;
      EXPECT_EQ(Scan(ReadFile(AddLogSegmentPath(dir, 1)), &r), want);
      ASSERT_TRUE((*log)->AppendCreate("h", "entry-3", true).ok());
      EXPECT_EQ(Scan(ReadFile(AddLogSegmentPath(dir, 1)), &r).size(), 4u);
    }
    EXPECT_EQ((*log)->records_appended(), mode == AppendFsync::kAlways ? 4u : 3u);
    ASSERT_TRUE((*log)->Close().ok());
    ScanResult r;
    const Recs got = Scan(ReadFile(AddLogSegmentPath(dir, 1)), &r);
    ASSERT_GE(got.size(), 3u);
    EXPECT_EQ(Recs(got.begin(), got.begin() + 3), want);
    EXPECT_FALSE(r.corrupt || r.torn_tail);
    EXPECT_FALSE((*log)->WaitDurable().ok() && mode == AppendFsync::kAlways);  // closed
  }
}

TEST(AddLogCreateTest, AppendCreateRefusesBadSizes) {
  const std::string dir = FreshDir("sizes");
  auto log = AddLog::Open(dir, 1, AppendFsync::kNone);
  ASSERT_TRUE(log.ok());
  EXPECT_FALSE((*log)->AppendCreate(std::string(kMaxLoggedFilterBytes + 1, 'f'), "entry", false).ok());
  EXPECT_FALSE((*log)->AppendCreate("f", "", false).ok());
  EXPECT_FALSE((*log)->AppendCreate("f", std::string(kMaxLoggedEntryBytes + 1, 'e'), false).ok());
  EXPECT_TRUE((*log)->AppendCreate("f", std::string(kMaxLoggedEntryBytes, 'e'), false).ok());
  EXPECT_EQ((*log)->records_appended(), 1u);
}

}  // namespace
}  // namespace pollen::runtime
