#include "protocol/stream_framer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pollen::protocol {
namespace {

std::vector<std::string> SampleFrames() {
  std::vector<std::string> frames;
  for (size_t n : {1, 2, 3, 4, 5, 41, 300, 1200}) {
    std::string f(n, '\0');
    for (size_t i = 0; i < n; ++i) f[i] = static_cast<char>(n + i * 3);
    frames.push_back(f);
  }
  return frames;
}

std::string Concat(const std::vector<std::string>& frames) {
  std::string s;
  for (const auto& f : frames) s += FrameForStream(f);
  return s;
}

TEST(StreamFramerTest, PrefixIsLittleEndianLength) {
  const std::string f = FrameForStream(std::string(0x0102, 'x'));
  ASSERT_EQ(f.size(), 0x0102u + 4);
  EXPECT_EQ(f.substr(0, 4), std::string("\x02\x01\x00\x00", 4));
}

TEST(StreamFramerTest, SplitAtEveryByteBoundaryReassembles) {
  const auto frames = SampleFrames();
  const std::string stream = Concat(frames);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    StreamDeframer d(2000);
    std::vector<std::string> got;
    ASSERT_TRUE(d.Feed(std::string_view(stream).substr(0, cut), &got).ok());
    ASSERT_TRUE(d.Feed(std::string_view(stream).substr(cut), &got).ok());
    ASSERT_EQ(got, frames) << "cut at " << cut;
    EXPECT_EQ(d.buffered_bytes(), 0u);
  }
}

TEST(StreamFramerTest, ByteAtATimeAndThreeWaySplits) {
  const auto frames = SampleFrames();
  const std::string stream = Concat(frames);
  StreamDeframer one(2000);
  std::vector<std::string> got;
  for (char c : stream) {
    ASSERT_TRUE(one.Feed(std::string_view(&c, 1), &got).ok());
    EXPECT_LE(one.buffered_bytes(), 1200u + kStreamLengthPrefixBytes);
  }
  EXPECT_EQ(got, frames);
  for (size_t a = 0; a < 60; ++a) {
    for (size_t b = a; b < stream.size(); b += 97) {
      StreamDeframer d(2000);
      std::vector<std::string> out;
      const std::string_view s(stream);
      ASSERT_TRUE(d.Feed(s.substr(0, a), &out).ok());
      ASSERT_TRUE(d.Feed(s.substr(a, b - a), &out).ok());
      ASSERT_TRUE(d.Feed(s.substr(b), &out).ok());
      ASSERT_EQ(out, frames);
    }
  }
}

TEST(StreamFramerTest, OversizeAndZeroLengthAreStickyErrors) {
  StreamDeframer d(100);
  std::vector<std::string> got;
  std::string stream = FrameForStream(std::string(100, 'a'));  // exactly the max: fine
  stream += std::string("\x65\x00\x00\x00", 4);                 // 101 > max
  stream += FrameForStream("later");
  const absl::Status s = d.Feed(stream, &got);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("ERR stream frame length 101", 0), 0u) << s;
  ASSERT_EQ(got.size(), 1u);  // the frame before the bad prefix
  EXPECT_TRUE(d.failed());
  EXPECT_FALSE(d.Feed(FrameForStream("x"), &got).ok());
  EXPECT_EQ(got.size(), 1u);
  EXPECT_EQ(d.buffered_bytes(), 0u);

  StreamDeframer z(100);
  EXPECT_FALSE(z.Feed(std::string(4, '\0'), &got).ok());
  StreamDeframer huge;
  EXPECT_FALSE(huge.Feed(std::string("\xff\xff\xff\xff", 4), &got).ok());
  // A split prefix is judged once complete.
  StreamDeframer split(100);
  EXPECT_TRUE(split.Feed(std::string("\x00\x10", 2), &got).ok());
  EXPECT_FALSE(split.Feed(std::string("\x00\x00", 2), &got).ok());
}

TEST(StreamFramerTest, BuffersOnlyWhatArrived) {
  StreamDeframer d(kMaxFrameBytes);
  std::vector<std::string> got;
  const std::string frame = FrameForStream(std::string(kMaxFrameBytes, 'z'));
  ASSERT_TRUE(d.Feed(std::string_view(frame).substr(0, 10), &got).ok());
  EXPECT_EQ(d.buffered_bytes(), 10u);
  ASSERT_TRUE(d.Feed(std::string_view(frame).substr(10), &got).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].size(), kMaxFrameBytes);
  EXPECT_EQ(d.buffered_bytes(), 0u);
}

}  // namespace
}  // namespace pollen::protocol
