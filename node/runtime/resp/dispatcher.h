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
//   POLLEN.WHOHAS digests|* key, POLLEN.QEXISTS key replicas item..., WAIT numreplicas timeout,
//   POLLEN.KEYRING INSTALL b64|USE id|REMOVE id|LIST,
//   POLLEN.SNAPSHOT
// How Pollen differs from RedisBloom is written in node/runtime/resp/README.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "node/core/node.h"
#include "node/runtime/resp/reply_writer.h"
#include "node/runtime/resp/bloom_dump.h"
#include "node/runtime/resp/server_context.h"
#include "node/runtime/resp/watch.h"

namespace pollen::resp {

// A MULTI ... EXEC block being queued (Redis' rules; see commands_txn.cc).
struct Transaction {
  static constexpr size_t kMaxQueuedCommands = 100'000;
  static constexpr size_t kMaxQueuedBytes = 64u << 20;
  bool active = false;  // between MULTI and EXEC / DISCARD
  bool dirty = false;   // a command failed to queue: EXEC answers EXECABORT
  std::vector<std::vector<std::string>> queued;
  size_t queued_bytes = 0;
};

struct Session;

// A reply that comes later (WAIT, POLLEN.QEXISTS, a routed add its owners
// decide): see Session::defer.
using ReplyWriter = std::function<void(Session& session, std::string* out)>;
using DeferredReply = std::function<void(ReplyWriter)>;

// The keys this connection added since its last WAIT that every live peer
// acknowledged: what its next WAIT covers (node/core/peer_checks.h). Kept
// as one buffer of (u32 length, bytes) records per filter: recording an add
// is a copy, not an allocation per key.
struct WaitRecord {
  // Every connection records its adds (a WAIT covers those before it), so
  // the record is kept small: at most kMaxKeys keys and kMaxBytes.
  static constexpr size_t kMaxKeys = 131072;
  static constexpr size_t kMaxBytes = size_t{8} << 20;
  struct FilterKeys {
    // Which filter of that name took them (node::FilterVersion::incarnation,
    // read at the filter's first add in this record): a filter deleted and
    // made again under the same name is another one, and the keys went
    // with the first.
    uint64_t incarnation = 0;
    std::string records;
  };
  std::map<std::string, FilterKeys, std::less<>> keys;
  size_t count = 0, bytes = 0;
  bool overflowed = false;  // over kMaxKeys or kMaxBytes: the next WAIT answers 0
  // `incarnation_of` is called at a filter's first add only (the add path
  // stays a copy). An incarnation of 0 (the filter is gone) records nothing.
  void Add(std::string_view filter, std::span<const std::string_view> items,
           absl::FunctionRef<uint64_t()> incarnation_of);
  // The keys of each filter, as batches for node::Node::BeginWait (each
  // with its incarnation, which BeginWait checks again on the driver).
  // `current_of(name)` is the filter's incarnation now (0: gone). A deleted
  // filter's keys are left out (they went with it, nobody holds them). A
  // filter made again under the name since its first add here sets `*stale`
  // and its keys are left out too: which keys went to which filter is not
  // recorded (that would cost the add path a lookup per add), and pushing
  // them would put the old filter's keys in its successor. WAIT then answers
  // 0, as after an overflow: it cannot vouch for them.
  std::vector<node::KeyBatch> Batches(const std::function<uint64_t(std::string_view)>& current_of,
                                      bool* stale) const;
};

// Per-connection state the commands read and change.
struct Session {
  uint64_t id = 0;
  std::string name;        // CLIENT SETNAME
  std::string peer;        // "ip:port", for CLIENT INFO
  Proto proto = Proto::kResp2;  // HELLO 2|3
  bool authenticated = false;
  Transaction txn;
  WatchSet watched;  // WATCHed filters
  // BF.LOADCHUNK loads in progress, by filter name (bounded; bloom_dump.h).
  std::map<std::string, std::unique_ptr<PendingRestore>, std::less<>> restores;
  // The ExecGate stripe this session's batch holds (its RESP thread), or -1
  // when the caller holds no shared side (unit tests, fuzzers).
  int gate_stripe = -1;
  bool close_after_reply = false;  // set by QUIT and CLIENT KILL of itself
  WaitRecord wait_record;
  // Set by the connection for a request at the top level; empty inside
  // EXEC, in unit tests and in fuzzers. A command that calls it appends no
  // reply now and gets a DeferredReply: the connection executes nothing more
  // for this client until that is called (once, from any thread) with a
  // writer of the reply, which then runs on the connection's thread (on a
  // scratch session, its output discarded, if the client has gone).
  std::function<DeferredReply()> defer;
  bool deferred = false;  // set by defer(); cleared when the reply is written
  // Set after defer() by a command whose reply a half-closed client still
  // reads (a routed add: it is an add, and Redis answers an add before it
  // sees EOF). Otherwise (WAIT, QEXISTS: blocking reads, as Redis' blocked
  // clients) a client that stops sending while it waits is closed.
  bool deferred_answers_half_closed = false;
  // This connection's entry in ServerContext::clients (null when the session
  // is not registered, e.g. in unit tests); Dispatch records the last command
  // and CLIENT SETNAME the name there. Owned by the connection.
  ClientRecord* record = nullptr;
  // What the last Dispatch ran, for CommandStats: the command's slot (its
  // index in the command table), or -1 when it is not counted (an unknown
  // command, one MULTI queued); and how it ended (a deferred command's
  // outcome is its reply's).
  int stats_slot = -1;
  CommandStats::Outcome stats_outcome = CommandStats::Outcome::kOk;
  // The CommandStats shard this session counts its commands in (its RESP
  // thread's loop index), or -1 when nothing is counted (unit tests, fuzzers).
  int stats_shard = -1;
};

// Executes args (args[0] is the command; must be non-empty) and appends
// exactly one reply to *out, or none if the command deferred it
// (Session::defer). Counts commands and error replies in context.counters and
// sets session.stats_slot / stats_outcome (the caller times the command).
void Dispatch(ServerContext& context, Session& session, std::span<const std::string_view> args,
              std::string* out);

// Counts what the last Dispatch ran (session.stats_slot, stats_outcome) as
// taking `nanos`, in context.command_stats on session.stats_shard; nothing
// when either is -1. Rejected calls count as errors, not in the durations.
void CountCommand(ServerContext& context, const Session& session, uint64_t nanos);

// The name (lower case) of the command in CommandStats slot `slot`, or ""
// when no command has that slot.
std::string_view CommandSlotName(size_t slot);

}  // namespace pollen::resp
