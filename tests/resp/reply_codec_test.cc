// ReplyWriter + ReplyReader: round trips, framing safety, limits.
#include <random>

#include "gtest/gtest.h"
#include "node/runtime/resp/reply_reader.h"
#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {
namespace {

Reply RandomReply(std::mt19937_64& rng, int depth) {
  Reply r;
  switch (rng() % (depth < 3 ? 6 : 5)) {
    case 0: r.type = Reply::Type::kSimple; r.str = "OK" + std::to_string(rng() % 100); break;
    case 1: r.type = Reply::Type::kError; r.str = "ERR thing " + std::to_string(rng() % 100); break;
    case 2: r.type = Reply::Type::kInteger; r.integer = static_cast<int64_t>(rng()) >> (rng() % 64); break;
    case 3:
      r.type = Reply::Type::kBulk;
      r.str.resize(rng() % 40);
      for (char& c : r.str) c = static_cast<char>(rng());
      break;
    case 4: r.type = Reply::Type::kNull; break;
    default:
      r.type = Reply::Type::kArray;
      for (int i = 0, n = rng() % 5; i < n; ++i) r.elements.push_back(RandomReply(rng, depth + 1));
  }
  return r;
}

void Encode(const Reply& r, std::string* out) {
  switch (r.type) {
    case Reply::Type::kSimple: AppendSimple(out, r.str); break;
    case Reply::Type::kError: AppendError(out, r.str); break;
    case Reply::Type::kInteger: AppendInteger(out, r.integer); break;
    case Reply::Type::kBulk: AppendBulk(out, r.str); break;
    case Reply::Type::kNull: AppendNullBulk(out); break;
    case Reply::Type::kArray:
      AppendArrayHeader(out, r.elements.size());
      for (const auto& e : r.elements) Encode(e, out);
      break;
    case Reply::Type::kMap:
    case Reply::Type::kSet:
    case Reply::Type::kPush:
    case Reply::Type::kDouble:
    case Reply::Type::kBool:
    case Reply::Type::kVerbatim:
    case Reply::Type::kBigNumber:
      ADD_FAILURE() << "RandomReply makes RESP2 types only";
      break;
  }
}

bool Same(const Reply& a, const Reply& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer || a.elements.size() != b.elements.size()) {
    return false;
  }
  for (size_t i = 0; i < a.elements.size(); ++i) {
    if (!Same(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

TEST(ReplyCodec, RandomRepliesRoundTripAndAreIncompleteAtEveryPrefix) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500; ++i) {
    const Reply r = RandomReply(rng, 0);
    std::string wire;
    Encode(r, &wire);
    Reply back;
    size_t consumed = 0;
    ASSERT_TRUE(ParseReply(wire + "+next\r\n", &back, &consumed).ok());
    ASSERT_EQ(consumed, wire.size());
    EXPECT_TRUE(Same(r, back)) << r.DebugString() << " vs " << back.DebugString();
    for (size_t cut = 0; cut < wire.size(); ++cut) {
      ASSERT_TRUE(ParseReply(std::string_view(wire).substr(0, cut), &back, &consumed).ok());
      EXPECT_EQ(consumed, 0u);
    }
  }
}

TEST(ReplyCodec, ErrorsAndSimpleStringsCannotBreakFraming) {
  std::string out;
  AppendError(&out, "bad\r\nthing");
  EXPECT_EQ(out, "-ERR bad  thing\r\n");
  out.clear();
  AppendError(&out, "WRONGPASS nope");
  EXPECT_EQ(out, "-WRONGPASS nope\r\n");
  out.clear();
  AppendSimple(&out, "a\nb");
  EXPECT_EQ(out, "+a b\r\n");
}

TEST(ReplyCodec, MalformedAndOversizedRepliesAreRejected) {
  Reply r;
  size_t consumed = 0;
  EXPECT_FALSE(ParseReply("?x\r\n", &r, &consumed).ok());
  EXPECT_FALSE(ParseReply(":12a\r\n", &r, &consumed).ok());
  EXPECT_FALSE(ParseReply("$3\r\nabcd\r\n", &r, &consumed).ok());
  ReplyLimits limits;
  limits.max_elements = 3;
  limits.max_depth = 2;
  limits.max_bulk_bytes = 4;
  EXPECT_FALSE(ParseReply("*4\r\n", &r, &consumed, limits).ok());
  EXPECT_FALSE(ParseReply("$5\r\n", &r, &consumed, limits).ok());
  EXPECT_FALSE(ParseReply("*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", &r, &consumed, limits).ok());
  EXPECT_TRUE(ParseReply("*1\r\n*1\r\n:1\r\n", &r, &consumed, limits).ok());
  EXPECT_GT(consumed, 0u);
}

}  // namespace
}  // namespace pollen::resp
