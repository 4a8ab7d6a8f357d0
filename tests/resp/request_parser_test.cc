// RequestParser: incremental reassembly, inline quoting, malformed input and limits.
#include "node/runtime/resp/request_parser.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pollen::resp {
namespace {

using Command = std::vector<std::string>;

std::string Multibulk(const Command& args) {
  std::string s = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) s += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return s;
}

// Feeds `chunks` the way a connection does: append, parse every complete
// request, drop consumed bytes. Returns the commands; *errors gets messages.
std::vector<Command> Feed(RequestParser& p, const std::vector<std::string>& chunks, std::vector<ParseError>* errors,
                          bool stop_on_fatal = true) {
  std::vector<Command> out;
  std::string buf;
  for (const auto& c : chunks) {
    buf += c;
    while (true) {
      const auto st = p.Parse(buf);
      if (st == RequestParser::Status::kIncomplete) break;
      if (st == RequestParser::Status::kError) {
        errors->push_back(p.error());
        if (p.error().fatal) {
          if (stop_on_fatal) return out;
          buf.clear();
        } else {
          buf.erase(0, p.error().skip);
        }
        p.Reset();
        continue;
      }
      if (!p.args().empty()) out.emplace_back(p.args().begin(), p.args().end());
      buf.erase(0, p.consumed());
      p.Reset();
    }
  }
  return out;
}

std::vector<std::string> SplitRandomly(const std::string& s, std::mt19937_64& rng) {
  std::vector<std::string> chunks;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = 1 + rng() % (rng() % 4 == 0 ? 3 : 64);
    chunks.push_back(s.substr(i, n));
    i += n;
  }
  return chunks;
}

TEST(RequestParser, ParsesMultibulkAndInline) {
  RequestParser p;
  std::vector<ParseError> errors;
  auto cmds = Feed(p, {"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\nECHO   hello  world\r\nPING\n"}, &errors);
  ASSERT_TRUE(errors.empty());
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_EQ(cmds[0], (Command{"PING", "hi"}));
  EXPECT_EQ(cmds[1], (Command{"ECHO", "hello", "world"}));
  EXPECT_EQ(cmds[2], (Command{"PING"}));
}

TEST(RequestParser, InlineQuotingFollowsRedisRules) {
  RequestParser p;
  std::vector<ParseError> errors;
  auto cmds = Feed(p, {"SET \"a b\" 'c\\'d' \"\\x41\\n\\\\\" \"\"\r\n"}, &errors);
  ASSERT_TRUE(errors.empty());
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0], (Command{"SET", "a b", "c'd", "A\n\\", ""}));
}

TEST(RequestParser, UnbalancedQuotesAreRecoverable) {
  RequestParser p;
  std::vector<ParseError> errors;
  auto cmds = Feed(p, {"ECHO \"abc\r\nECHO \"a\"b\r\nPING\r\n"}, &errors);
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) {
    EXPECT_FALSE(e.fatal);
    EXPECT_EQ(e.message, "ERR Protocol error: unbalanced quotes in request");
  }
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0], (Command{"PING"}));
}

TEST(RequestParser, EmptyRequestsCompleteWithoutArgs) {
  RequestParser p;
  for (std::string s : {"*0\r\n", "*-1\r\n", "\r\n", "   \n"}) {
    ASSERT_EQ(p.Parse(s), RequestParser::Status::kComplete) << s;
    EXPECT_TRUE(p.args().empty());
    EXPECT_EQ(p.consumed(), s.size());
    p.Reset();
  }
}

TEST(RequestParser, RandomCommandsSplitAnywhereReassemble) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    std::vector<Command> sent;
    std::string wire;
    const int n = 1 + rng() % 20;
    for (int i = 0; i < n; ++i) {
      Command c;
      const int argc = 1 + rng() % 6;
      const bool as_inline = rng() % 4 == 0;
      for (int j = 0; j < argc; ++j) {
        std::string a(rng() % (rng() % 8 == 0 ? 3000 : 12), '\0');
        for (char& ch : a) ch = as_inline ? static_cast<char>('a' + rng() % 26) : static_cast<char>(rng());
        if (as_inline && a.empty()) a = "x";
        c.push_back(a);
      }
      if (as_inline) {
        std::string line;
        for (const auto& a : c) line += a + " ";
        wire += line + "\r\n";
      } else {
        wire += Multibulk(c);
      }
      sent.push_back(c);
    }
    RequestParser p;
    std::vector<ParseError> errors;
    const auto got = Feed(p, SplitRandomly(wire, rng), &errors);
    ASSERT_TRUE(errors.empty()) << errors[0].message;
    ASSERT_EQ(got, sent) << "round " << round;
  }
}

TEST(RequestParser, MalformedMultibulkIsFatal) {
  struct Case {
    std::string input, message;
  };
  const std::vector<Case> cases = {
      {"*abc\r\n", "ERR Protocol error: invalid multibulk length"},
      {"*1\r\n:5\r\n", "ERR Protocol error: expected '$', got ':'"},
      {"*1\r\n$-3\r\n", "ERR Protocol error: invalid bulk length"},
      {"*1\r\n$x\r\n", "ERR Protocol error: invalid bulk length"},
      {"*1\r\n$3\r\nabcd\r\n", "ERR Protocol error: expected CRLF after bulk data"},
      {"*" + std::string(100, '1'), "ERR Protocol error: too big mbulk count string"},
      {"*1\r\n$" + std::string(100, '1'), "ERR Protocol error: invalid bulk length"},
      {"*99999999999999999999\r\n", "ERR Protocol error: invalid multibulk length"},
  };
  for (const auto& c : cases) {
    RequestParser p;
    ASSERT_EQ(p.Parse(c.input), RequestParser::Status::kError) << c.input;
    EXPECT_TRUE(p.error().fatal);
    EXPECT_EQ(p.error().message, c.message);
  }
}

TEST(RequestParser, LimitsAreEnforcedExactly) {
  ParserLimits limits;
  limits.max_args = 4;
  limits.max_bulk_bytes = 10;
  limits.max_inline_bytes = 20;
  {
    RequestParser p(limits);
    EXPECT_EQ(p.Parse(Multibulk({"a", "b", "c", "d"})), RequestParser::Status::kComplete);
    p.Reset();
    EXPECT_EQ(p.Parse(Multibulk({"a", "b", "c", "d", "e"})), RequestParser::Status::kError);
    EXPECT_EQ(p.error().message, "ERR Protocol error: invalid multibulk length");
  }
  {
    RequestParser p(limits);
    EXPECT_EQ(p.Parse(Multibulk({std::string(10, 'x')})), RequestParser::Status::kComplete);
    p.Reset();
    // Rejected from the header alone, before the data arrives.
    EXPECT_EQ(p.Parse("*1\r\n$11\r\n"), RequestParser::Status::kError);
    EXPECT_EQ(p.error().message, "ERR Protocol error: invalid bulk length");
  }
  {
    RequestParser p(limits);
    EXPECT_EQ(p.Parse(std::string(19, 'a') + "\n"), RequestParser::Status::kComplete);
    p.Reset();
    EXPECT_EQ(p.Parse(std::string(20, 'a')), RequestParser::Status::kIncomplete);
    EXPECT_EQ(p.Parse(std::string(21, 'a')), RequestParser::Status::kError);
    EXPECT_EQ(p.error().message, "ERR Protocol error: too big inline request");
    EXPECT_TRUE(p.error().fatal);
  }
  {
    RequestParser p(limits);
    EXPECT_EQ(p.Parse("a b c d e\r\n"), RequestParser::Status::kError);
    EXPECT_FALSE(p.error().fatal);
    EXPECT_EQ(p.error().skip, 11u);
  }
}

TEST(RequestParser, IncompleteAtEveryPrefix) {
  const std::string wire = Multibulk({"BF.ADD", "f", "some key"});
  for (size_t i = 0; i < wire.size(); ++i) {
    RequestParser p;
    EXPECT_EQ(p.Parse(std::string_view(wire).substr(0, i)), RequestParser::Status::kIncomplete) << i;
    // Resuming on the full buffer completes.
    ASSERT_EQ(p.Parse(wire), RequestParser::Status::kComplete);
    EXPECT_EQ(p.consumed(), wire.size());
    EXPECT_EQ(Command(p.args().begin(), p.args().end()), (Command{"BF.ADD", "f", "some key"}));
  }
}

TEST(RequestParser, RandomGarbageNeverCrashesAndAlwaysTerminates) {
  std::mt19937_64 rng(7);
  ParserLimits limits;
  limits.max_args = 16;
  limits.max_bulk_bytes = 64;
  limits.max_inline_bytes = 64;
  for (int round = 0; round < 2000; ++round) {
    std::string wire(rng() % 200, '\0');
    const char alphabet[] = "*$\r\n0123456789-ab \"'\\x";
    for (char& c : wire) c = rng() % 3 ? alphabet[rng() % (sizeof(alphabet) - 1)] : static_cast<char>(rng());
    RequestParser p(limits);
    std::vector<ParseError> errors;
    const auto cmds = Feed(p, SplitRandomly(wire, rng), &errors, /*stop_on_fatal=*/false);
    for (const auto& c : cmds) {
      EXPECT_LE(c.size(), limits.max_args);
      for (const auto& a : c) EXPECT_LE(a.size(), std::max(limits.max_bulk_bytes, limits.max_inline_bytes));
    }
    for (const auto& e : errors) EXPECT_EQ(e.message.rfind("ERR Protocol error: ", 0), 0u) << e.message;
  }
}

}  // namespace
}  // namespace pollen::resp
