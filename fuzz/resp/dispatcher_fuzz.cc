// Fuzzes the command dispatcher against a real Node: requests come either
// from the RESP parser (raw bytes) or, in structured mode, from tokens picked
// by the input bytes so most requests reach a real command. The fuzzing thread
// is also the node's driver, so run_on_driver calls fn inline. Checks that
// every request gets exactly one well-formed reply. Each input gets a fresh
// node and session, so a crash replays from the input alone.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "node/core/node.h"
#include "node/runtime/resp/command_run.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/reply_reader.h"
#include "node/runtime/resp/request_parser.h"

namespace {

using pollen::resp::ServerContext;

struct World {
  std::unique_ptr<pollen::node::Node> node;
  ServerContext ctx;
  int64_t now = 0;

  World(const World&) = delete;  // run_on_driver captures `this`
  World() {
    pollen::node::NodeConfig config;
    config.name = "fuzz";
    config.advertise = "127.0.0.1:1";
    auto n = pollen::node::Node::Create(std::move(config));
    if (!n.ok()) std::abort();
    node = *std::move(n);
    node->Start(pollen::node::Time(0));
    ctx.node = node.get();
    ctx.run_on_driver = [this](std::function<absl::Status(pollen::node::Time)> fn) {
      now += 1000;
      return fn(pollen::node::Time(now));
    };
    pollen::resp::BloomSettings small;
    small.initial_size = 1000;  // filters made by BF.ADD
    ctx.bloom.Reset(small);
    ctx.limits.max_filters = 16;
    ctx.limits.max_filter_bytes = 4u << 20;
  }
};

constexpr const char* kTokens[] = {
    "BF.ADD", "BF.MADD", "BF.EXISTS", "BF.MEXISTS", "BF.RESERVE", "BF.INSERT", "BF.INFO", "BF.CARD", "PING", "ECHO",
    "INFO", "AUTH", "HELLO", "COMMAND", "CLIENT", "SELECT", "QUIT", "CONFIG", "POLLEN.STATUS", "POLLEN.MEMBERS",
    "POLLEN.FILTERS", "POLLEN.ROTATE", "POLLEN.WHOHAS", "POLLEN.KEYRING", "POLLEN.SNAPSHOT", "f", "g", "*", "f,g",
    "0.01", "0", "1", "-1", "1e9", "nan", "100", "2", "3", "CAPACITY", "ERROR", "EXPANSION", "NOCREATE",
    "NONSCALING", "ITEMS", "SIZE", "FILTERS", "COUNT", "DOCS", "LIST", "INSTALL", "USE", "REMOVE", "SETNAME",
    "GETNAME", "ID", "default", "pw", "x", "", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "18446744073709551615",
    "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "RESET", "EXISTS", "DEL", "UNLINK", "WAIT", "TYPE", "DBSIZE", "KEYS", "SCAN", "MATCH",
    "OBJECT", "ENCODING", "MEMORY", "USAGE", "TIME", "ROLE", "LASTSAVE", "MODULE", "GETKEYS", "GET", "LRANGE",
    "PFCOUNT", "NO-EVICT", "on", "[a-", "f*", "\\", "inf", "0x10", "-0", "SET", "bf-error-rate", "bf-initial-size",
    "bf-expansion-factor", "resp3-replies", "redis-8", "redisbloom-2.4", "3", "0.5", "COPY", "RENAME", "RENAMENX",
    "REPLACE", "DB", "BF.SCANDUMP", "BF.LOADCHUNK"};

void RunOne(World& w, pollen::resp::Session& session, std::span<const std::string_view> args) {
  std::string out;
  pollen::resp::Dispatch(w.ctx, session, args, &out);
  pollen::resp::Reply reply;
  size_t consumed = 0;
  if (!pollen::resp::ParseReply(out, &reply, &consumed).ok() || consumed != out.size()) std::abort();
}

// A pipelined run (command_run.h) of the requests in `buf` that continue
// `first`'s: executed with DispatchRun, which must append exactly one
// well-formed reply per request (or, handing them back, nothing). Returns
// the bytes the run's later requests took.
size_t RunPipelined(World& w, pollen::resp::Session& session, pollen::resp::RequestParser& parser,
                    pollen::resp::RunKind kind, std::span<const std::string_view> first, std::string_view buf) {
  std::vector<std::string_view> items = {first[2]};
  size_t taken = 0;
  while (items.size() < pollen::resp::kMaxRunRequests) {
    if (parser.Parse(buf.substr(taken)) != pollen::resp::RequestParser::Status::kComplete ||
        !parser.args_in_buffer() || !pollen::resp::ContinuesRun(first, parser.args())) {
      break;
    }
    items.push_back(parser.args()[2]);
    taken += parser.consumed();
    parser.Reset();
  }
  parser.Reset();
  std::string out;
  const auto run = pollen::resp::DispatchRun(w.ctx, session, kind, first[1], items, &out);
  if (!run.has_value()) {
    if (!out.empty()) std::abort();
    for (std::string_view item : items) {
      const std::string_view args[] = {first[0], first[1], item};
      RunOne(w, session, args);
    }
    return taken;
  }
  if (run->requests != items.size()) std::abort();
  std::string_view rest = out;
  for (size_t i = 0; i < items.size(); ++i) {
    pollen::resp::Reply reply;
    size_t consumed = 0;
    if (!pollen::resp::ParseReply(rest, &reply, &consumed).ok() || consumed == 0) std::abort();
    rest.remove_prefix(consumed);
  }
  if (!rest.empty()) std::abort();
  return taken;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  World w;
  pollen::resp::Session session;
  w.ctx.password = (data[0] & 2) ? "pw" : "";
  if (data[0] & 1) {
    std::vector<std::string> words;
    for (size_t i = 1; i < size; ++i) {
      const uint8_t b = data[i];
      if (b == 0xff || words.size() >= 16) {
        if (!words.empty()) {
          std::vector<std::string_view> args(words.begin(), words.end());
          RunOne(w, session, args);
        }
        words.clear();
      } else {
        words.emplace_back(kTokens[b % (sizeof(kTokens) / sizeof(kTokens[0]))]);
      }
    }
    if (!words.empty()) {
      std::vector<std::string_view> args(words.begin(), words.end());
      RunOne(w, session, args);
    }
    return 0;
  }
  pollen::resp::ParserLimits limits;
  limits.max_args = 64;
  limits.max_bulk_bytes = 1024;
  limits.max_inline_bytes = 1024;
  pollen::resp::RequestParser parser(limits);
  std::string_view buf(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool runs = (data[0] & 4) != 0;  // consecutive BF.ADD / BF.EXISTS as pipelined runs
  while (!buf.empty()) {
    const auto st = parser.Parse(buf);
    if (st != pollen::resp::RequestParser::Status::kComplete) break;
    const size_t consumed = parser.consumed();
    const auto kind = runs && parser.args_in_buffer() ? pollen::resp::RunKindOf(w.ctx, session, parser.args())
                                                       : pollen::resp::RunKind::kNone;
    if (kind != pollen::resp::RunKind::kNone) {
      const std::vector<std::string_view> first(parser.args().begin(), parser.args().end());
      parser.Reset();
      buf.remove_prefix(consumed);
      buf.remove_prefix(RunPipelined(w, session, parser, kind, first, buf));
      continue;
    }
    if (!parser.args().empty()) RunOne(w, session, parser.args());
    buf.remove_prefix(consumed);
    parser.Reset();
  }
  return 0;
}
