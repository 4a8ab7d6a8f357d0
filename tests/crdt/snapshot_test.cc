#include "crdt/snapshot.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sodium.h>

#include <gtest/gtest.h>

#include "tests/crdt/test_util.h"

namespace pollen::crdt {
namespace {

const ClusterSecret kSecret = testing::SecretFromSeed(3);

std::unique_ptr<GenerationSet> SmallSet(uint64_t epoch) {
  FilterParams p;
  p.name = "snap";
  p.filter_id = FilterIdForName(p.name);
  p.shape = {1, 3};  // one block: a ~230-byte snapshot, so every byte can be tested
  p.generations = 2;
  p.key_id = KeyIdForSecret(kSecret);
  auto set = GenerationSet::Create(p, kSecret, epoch);
  EXPECT_TRUE(set.ok()) << set.status();
  return *std::move(set);
}

bool SameState(const GenerationSet& a, const GenerationSet& b) {
  if (!(a.params() == b.params()) || a.slots() != b.slots()) return false;
  for (uint64_t slot : a.slots()) {
    if (!a.Sub(slot)->filter->SameContents(*b.Sub(slot)->filter)) return false;
  }
  return true;
}

TEST(Snapshot, RoundTrips) {
  auto set = SmallSet(0);
  set->Add("before");
  ASSERT_TRUE(*set->Advance(1));
  set->Add("after");
  const std::string bytes = EncodeSnapshot(*set);
  absl::StatusOr<std::unique_ptr<GenerationSet>> back = DecodeSnapshot(bytes, kSecret, &set->params());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameState(*set, **back));
  EXPECT_TRUE((*back)->MightContain("before"));
  EXPECT_TRUE((*back)->MightContain("after"));
}

// A caller's prefix (a node snapshot's framing) comes first and is not part of
// the snapshot or its checksum: the bytes after it are the plain encoding.
TEST(Snapshot, EncodesAfterACallersPrefix) {
  auto set = SmallSet(0);
  set->Add("k");
  const std::string plain = EncodeSnapshot(*set);
  EXPECT_EQ(EncodeSnapshot(*set, "PREFIX"), "PREFIX" + plain);
  EXPECT_EQ(EncodeSnapshot(*set, std::string()), plain);
  std::vector<uint64_t> words(set->Sub(set->slots().front())->filter->word_count());
  for (size_t i = 0; i < words.size(); ++i) words[i] = set->Sub(set->slots().front())->filter->LoadWord(i);
  const std::pair<uint64_t, std::span<const uint64_t>> sub{set->slots().front(), words};
  const std::string from_words = EncodeSnapshotWords(set->params(), std::span(&sub, 1));
  EXPECT_EQ(EncodeSnapshotWords(set->params(), std::span(&sub, 1), "P"), "P" + from_words);
}

// Binary-safe names of every size class, across the u16 name length's 0xFFFF
// escape (a name of 0xFFFF bytes or more takes its length from the header).
TEST(Snapshot, RoundTripsBinaryNamesUpToTheLimit) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{0xFFFE}, size_t{0xFFFF}, kMaxFilterNameBytes}) {
    std::string name(len, '\xff');
    if (len > 2) name[1] = '\0', name[2] = ' ';
    absl::StatusOr<FilterParams> p = MakeParams(name, 100, 0.01, 2, kSecret);
    ASSERT_TRUE(p.ok()) << len;
    auto set = *GenerationSet::Create(*p, kSecret, 0);
    set->Add("k");
    const std::string bytes = EncodeSnapshot(*set);
    auto back = DecodeSnapshot(bytes, kSecret, &set->params());
    ASSERT_TRUE(back.ok()) << len << ": " << back.status();
    EXPECT_EQ((*back)->params().name, name);
    EXPECT_TRUE((*back)->MightContain("k"));
    // One byte cut from the name's end (and the checksum redone): a name of
    // 0xFFFF bytes would become one too short for the escape, refused; a
    // longer one becomes a well-formed snapshot of another name (identities
    // are not names), which a caller expecting this filter refuses.
    if (len >= 0xFFFF) {
      std::string cut = bytes.substr(0, bytes.size() - 4);
      cut.erase(8 + 4 + 4 + 2 + len - 1, 1);
      uint32_t header_len = 0;
      std::memcpy(&header_len, cut.data() + 12, 4);
      header_len -= 1;
      std::memcpy(cut.data() + 12, &header_len, 4);
      if (len == 0xFFFF) EXPECT_FALSE(DecodeSnapshot(SealSnapshot(cut), kSecret, nullptr).ok()) << len;
      EXPECT_FALSE(DecodeSnapshot(SealSnapshot(cut), kSecret, &set->params()).ok()) << len;
    }
  }
}

TEST(Snapshot, RoundTripsLargerFilters) {
  absl::StatusOr<FilterParams> p = MakeParams("big", 100'000, 0.001, 3, kSecret);
  ASSERT_TRUE(p.ok());
  auto set = *GenerationSet::Create(*p, kSecret, 5);
  for (int i = 0; i < 50'000; ++i) set->Add(std::to_string(i));
  auto back = DecodeSnapshot(EncodeSnapshot(*set), kSecret, nullptr);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameState(*set, **back));
}

std::vector<std::shared_ptr<const SubFilter>> LiveSubs(const GenerationSet& set) {
  std::vector<std::shared_ptr<const SubFilter>> subs;
  for (uint64_t slot : set.slots()) subs.push_back(set.Sub(slot));
  return subs;
}

// The streamed form is the encoding, byte for byte, in pieces of at most the
// size asked for (never under 4 KiB); a sink's error stops it and comes back.
TEST(Snapshot, StreamsTheSameBytesInBoundedPieces) {
  absl::StatusOr<FilterParams> p = MakeParams("streamed", 200'000, 0.01, 2, kSecret);
  ASSERT_TRUE(p.ok());
  auto set = *GenerationSet::Create(*p, kSecret, 1);
  for (int i = 0; i < 20'000; ++i) set->Add("a" + std::to_string(i));
  ASSERT_TRUE(*set->Advance(2));
  for (int i = 0; i < 20'000; ++i) set->Add("b" + std::to_string(i));
  const std::string whole = EncodeSnapshot(*set);
  for (size_t piece : {size_t{0}, size_t{4096}, size_t{10'000}, size_t{1} << 20}) {
    std::string streamed;
    size_t pieces = 0, largest = 0;
    const absl::Status s = StreamSnapshot(set->params(), LiveSubs(*set), piece, [&](std::string_view b) {
      streamed.append(b);
      largest = std::max(largest, b.size());
      ++pieces;
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(streamed, whole) << piece;
    EXPECT_LE(largest, std::max<size_t>(piece, 4096)) << piece;
    EXPECT_GT(pieces, whole.size() / std::max<size_t>(piece, 4096)) << piece;
  }
  int calls = 0;
  const absl::Status stopped = StreamSnapshot(set->params(), LiveSubs(*set), 4096, [&](std::string_view) {
    return ++calls == 3 ? absl::InternalError("disk full") : absl::OkStatus();
  });
  EXPECT_EQ(stopped, absl::InternalError("disk full"));
  EXPECT_EQ(calls, 3);
}

// Streamed while another thread adds: the result decodes, holds every key
// added before the stream began, and is a state between the one before and
// the one after (a lower bound that the add log completes).
TEST(Snapshot, StreamedDuringAddsHoldsEverythingAddedBefore) {
  absl::StatusOr<FilterParams> p = MakeParams("live", 400'000, 0.01, 1, kSecret);
  ASSERT_TRUE(p.ok());
  auto set = *GenerationSet::Create(*p, kSecret, 0);
  for (int i = 0; i < 50'000; ++i) set->Add("before" + std::to_string(i));
  std::atomic<bool> stop{false};
  std::thread adder([&] {
    for (int i = 0; i < 1'000'000 && !stop.load(); ++i) set->Add("during" + std::to_string(i));
  });
  std::string streamed;
  const absl::Status s = StreamSnapshot(set->params(), LiveSubs(*set), 4096, [&](std::string_view b) {
    streamed.append(b);
    return absl::OkStatus();
  });
  stop = true;
  adder.join();
  ASSERT_TRUE(s.ok()) << s;
  auto back = DecodeSnapshot(streamed, kSecret, &set->params());
  ASSERT_TRUE(back.ok()) << back.status();
  for (int i = 0; i < 50'000; ++i) ASSERT_TRUE((*back)->MightContain("before" + std::to_string(i))) << i;
  const BlockedFilter& now = *set->Sub(set->slots().front())->filter;
  const BlockedFilter& then = *(*back)->Sub((*back)->slots().front())->filter;
  for (uint64_t w = 0; w < now.word_count(); ++w) {
    ASSERT_EQ(then.LoadWord(w) & ~now.LoadWord(w), 0u) << "a bit no add set, word " << w;
  }
}

TEST(Snapshot, NeverContainsTheSecretOrAKey) {
  auto set = SmallSet(1);
  set->Add("x");
  const std::string bytes = EncodeSnapshot(*set);
  auto contains = [&](const uint8_t* p, size_t n) {
    return bytes.find(std::string(reinterpret_cast<const char*>(p), n)) != std::string::npos;
  };
  EXPECT_FALSE(contains(kSecret.bytes.data(), 16));
  EXPECT_FALSE(contains(kSecret.bytes.data() + 16, 16));
  for (uint64_t e : set->epochs()) EXPECT_FALSE(contains(set->Sub(SlotOf(e, 0))->key.bytes.data(), 16));
}

TEST(Snapshot, RejectsEverySingleByteCorruption) {
  auto set = SmallSet(1);
  set->Add("a");
  set->Add("b");
  const std::string good = EncodeSnapshot(*set);
  ASSERT_LT(good.size(), 400u);
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ flip);
      EXPECT_FALSE(DecodeSnapshot(bad, kSecret, nullptr).ok()) << "byte " << i << " flip " << int(flip);
    }
  }
}

TEST(Snapshot, RejectsEveryTruncationAndExtension) {
  const std::string good = EncodeSnapshot(*SmallSet(0));
  for (size_t len = 0; len < good.size(); ++len) {
    EXPECT_FALSE(DecodeSnapshot(good.substr(0, len), kSecret, nullptr).ok()) << len;
  }
  EXPECT_FALSE(DecodeSnapshot(good + '\0', kSecret, nullptr).ok());
}

// Files written before version 3 end in a BLAKE2b-256 instead of a CRC-32C:
// they still load, to the same state, and are still checked.
TEST(Snapshot, Version2FilesStillLoadAndAreStillChecked) {
  auto set = SmallSet(1);
  for (int i = 0; i < 50; ++i) set->Add("key" + std::to_string(i));
  const std::string v3 = EncodeSnapshot(*set);
  std::string body = v3.substr(0, v3.size() - 4);
  body[8] = 2;
  const std::string v2 = SealSnapshot(body);
  ASSERT_EQ(v2.size(), v3.size() - 4 + 32);
  auto back = DecodeSnapshot(v2, kSecret, &set->params());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameState(*set, **back));
  for (size_t i : {size_t{20}, v2.size() / 2, v2.size() - 1}) {
    std::string bad = v2;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    EXPECT_EQ(DecodeSnapshot(bad, kSecret, nullptr).status().code(), absl::StatusCode::kDataLoss) << i;
  }
  // A version 3 body under a BLAKE2b trailer (or the reverse) is corrupt.
  std::string v2_body_crc = body + v3.substr(v3.size() - 4);
  EXPECT_EQ(DecodeSnapshot(v2_body_crc, kSecret, nullptr).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Snapshot, RejectsWrongSecretVersionAndParameters) {
  auto set = SmallSet(0);
  const std::string good = EncodeSnapshot(*set);
  auto wrong_secret = DecodeSnapshot(good, testing::SecretFromSeed(4), nullptr);
  EXPECT_EQ(wrong_secret.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong_secret.status().message().find("secret"), std::string::npos);

  FilterParams other = set->params();
  other.shape.k = 4;
  EXPECT_EQ(DecodeSnapshot(good, kSecret, &other).status().code(), absl::StatusCode::kFailedPrecondition);

  // A future version with a valid checksum is refused by version, not as corrupt.
  std::string future = good.substr(0, good.size() - 4);
  future[8] = kSnapshotVersion + 1;
  auto status = DecodeSnapshot(SealSnapshot(future), kSecret, nullptr).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("version"), std::string::npos);
}

class SnapshotFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pollen-snap-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SnapshotFileTest, WritesAtomicallyAndReadsBack) {
  auto set = SmallSet(3);
  set->Add("k");
  const std::string path = dir_ + "/snap.pln";
  ASSERT_TRUE(WriteSnapshotFile(*set, path).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto back = ReadSnapshotFile(path, kSecret, &set->params());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameState(*set, **back));
  // Overwrite: the new contents replace the old whole.
  set->Add("k2");
  ASSERT_TRUE(WriteSnapshotFile(*set, path).ok());
  EXPECT_TRUE((*ReadSnapshotFile(path, kSecret, nullptr))->MightContain("k2"));
}

TEST_F(SnapshotFileTest, ReportsMissingAndCorruptFiles) {
  EXPECT_EQ(ReadSnapshotFile(dir_ + "/none", kSecret, nullptr).status().code(), absl::StatusCode::kNotFound);
  const std::string path = dir_ + "/bad.pln";
  std::ofstream(path) << "garbage that is not a snapshot at all, but long enough to have a checksum";
  auto bad = ReadSnapshotFile(path, kSecret, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find(path), std::string::npos);
  EXPECT_FALSE(WriteSnapshotFile(*SmallSet(0), dir_ + "/no/such/dir/x").ok());
}

}  // namespace
}  // namespace pollen::crdt
