// The RESP command set of pollend: Dispatch() executes one parsed request for
// one client session and appends its RESP2 reply. No socket I/O; it calls the
// node (and, through ServerContext hooks, the driver thread and the add log).
//
// Commands (names case-insensitive; error strings follow Redis/RedisBloom):
//   BF.RESERVE key error_rate capacity [EXPANSION e] [NONSCALING]
//   BF.ADD key item / BF.MADD key item... / BF.INSERT key [CAPACITY c]
//     [ERROR e] [EXPANSION e] [NOCREATE] [NONSCALING] ITEMS item...
//   BF.EXISTS key item / BF.MEXISTS key item... / BF.CARD key
//   BF.INFO key [CAPACITY|SIZE|FILTERS|ITEMS|EXPANSION]
//   PING [msg], ECHO msg, INFO [section...], AUTH [user] password,
//   HELLO [protover [AUTH user pass] [SETNAME name]], COMMAND [COUNT|INFO|DOCS|LIST],
//   CLIENT ID|GETNAME|SETNAME|SETINFO|INFO|LIST|KILL|HELP, SELECT db, QUIT, CONFIG GET (empty)
//   POLLEN.STATUS, POLLEN.MEMBERS, POLLEN.FILTERS, POLLEN.ROTATE filter,
//   POLLEN.WHOHAS digests|* key, POLLEN.KEYRING INSTALL b64|USE id|REMOVE id|LIST,
//   POLLEN.SNAPSHOT
// How Pollen differs from RedisBloom is written in node/runtime/resp/README.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "node/runtime/resp/server_context.h"

namespace pollen::resp {

// Per-connection state the commands read and change.
struct Session {
  uint64_t id = 0;
  std::string name;        // CLIENT SETNAME
  std::string peer;        // "ip:port", for CLIENT INFO
  bool authenticated = false;
  bool close_after_reply = false;  // set by QUIT and CLIENT KILL of itself
  // This connection's entry in ServerContext::clients (null when the session
  // is not registered, e.g. in unit tests); Dispatch records the last command
  // and CLIENT SETNAME the name there. Owned by the connection.
  ClientRecord* record = nullptr;
};

// Executes args (args[0] is the command; must be non-empty) and appends
// exactly one reply to *out. Counts commands and error replies in
// context.counters.
void Dispatch(ServerContext& context, Session& session, std::span<const std::string_view> args,
              std::string* out);

}  // namespace pollen::resp
