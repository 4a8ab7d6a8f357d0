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
    ctx.default_filter.capacity = 1000;
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
    "PFCOUNT", "NO-EVICT", "on", "[a-", "f*", "\\", "inf", "0x10", "-0"};

void RunOne(World& w, pollen::resp::Session& session, std::span<const std::string_view> args) {
  std::string out;
  pollen::resp::Dispatch(w.ctx, session, args, &out);
  pollen::resp::Reply reply;
  size_t consumed = 0;
  if (!pollen::resp::ParseReply(out, &reply, &consumed).ok() || consumed != out.size()) std::abort();
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
  while (!buf.empty()) {
    const auto st = parser.Parse(buf);
    if (st != pollen::resp::RequestParser::Status::kComplete) break;
    if (!parser.args().empty()) RunOne(w, session, parser.args());
    buf.remove_prefix(parser.consumed());
    parser.Reset();
  }
  return 0;
}
