// RecycleBuffer: which scratch buffers keep their allocation between uses.
#include "node/core/recycle_buffer.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace pollen::node {
namespace {

constexpr size_t kBigEntries = (size_t{1} << 20) / sizeof(uint64_t);  // 1 MiB: over kSmallBytes, under kMaxKeptBytes

TEST(RecycleBuffer, AWellUsedBigBufferKeepsItsAllocation) {
  std::vector<uint64_t> buffer(kBigEntries, 7);
  const uint64_t* data = buffer.data();
  const size_t capacity = buffer.capacity();
  RecycleBuffer(buffer);
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.capacity(), capacity);
  buffer.resize(kBigEntries / 2);  // a later use of the same size reallocates nothing
  EXPECT_EQ(buffer.data(), data);
}

TEST(RecycleBuffer, ABigBufferUsedUnderAQuarterIsFreed) {
  std::vector<uint64_t> buffer;
  buffer.reserve(kBigEntries);
  buffer.resize(kBigEntries / 4 - 1);
  RecycleBuffer(buffer);
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.capacity(), 0u);
  // A quarter exactly is still kept.
  buffer.reserve(kBigEntries);
  buffer.resize(kBigEntries / 4);
  RecycleBuffer(buffer);
  EXPECT_GE(buffer.capacity(), kBigEntries);
}

TEST(RecycleBuffer, ABufferOverTheCapIsFreedEvenFull) {
  std::vector<uint64_t> buffer(kMaxKeptBytes / sizeof(uint64_t) + 1, 7);
  RecycleBuffer(buffer);
  EXPECT_EQ(buffer.capacity(), 0u);
}

TEST(RecycleBuffer, ASmallBufferIsKeptEvenUnused) {
  std::vector<uint64_t> buffer;
  buffer.reserve(1024);  // 8 KiB
  RecycleBuffer(buffer);
  EXPECT_GE(buffer.capacity(), 1024u);
}

}  // namespace
}  // namespace pollen::node
