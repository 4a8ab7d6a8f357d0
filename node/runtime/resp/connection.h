// Connection: one RESP client on an EventLoop (internal to RespServer). All
// of its members run on its loop's thread; other threads reach it only
// through ConnectionRegistry::CloseLater.
//
// Per readiness event it reads once (at most kReadChunk bytes; the loop is
// level-triggered, so what is left is reported again), executes every
// complete request in its buffer in order, and writes the replies straight
// away with send(). It asks for EPOLLOUT only while the kernel has not taken
// every reply. It stops executing (and reading) while max_batch_replies
// replies or kHighWaterBytes are waiting, so a client that does not read
// stalls its own input rather than growing the server's memory; it is
// disconnected when its unparsed input exceeds max_query_bytes, its queued
// output exceeds max_output_bytes, or nothing is read or written for
// idle_timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "node/runtime/resp/client_table.h"
#include "node/runtime/resp/command_run.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/event_loop.h"
#include "node/runtime/resp/request_parser.h"
#include "node/runtime/resp/server_context.h"

namespace pollen::resp {

class Connection;

// The server's open connections, shared with them so they can leave after
// the server object is gone. Ids come from ServerContext::clients.NextId();
// every open connection is also in ServerContext::clients (CLIENT LIST/KILL).
struct ConnectionRegistry {
  ConnectionRegistry(std::vector<EventLoop*> l, ServerContext& c) : loops(std::move(l)), ctx(c), by_loop(loops.size()) {}

  // Any thread: closes connection `id` of loop `loop` on that loop's thread
  // (no-op if it has closed already).
  static void CloseLater(const std::shared_ptr<ConnectionRegistry>& self, size_t loop, uint64_t id);
  // Loop `loop`'s thread: closes every connection of that loop.
  void CloseAll(size_t loop);

  const std::vector<EventLoop*> loops;  // non-empty; they outlive the registry's users
  ServerContext& ctx;
  std::mutex mu;
  size_t open = 0;       // guarded by mu: admitted and not yet closed
  bool stopped = false;  // guarded by mu: admit nothing more
  // by_loop[i] is touched only on loops[i]'s thread.
  std::vector<std::map<uint64_t, Connection*>> by_loop;
};

// Connections on a loop hear their deferred replies through the registry
// (DeferReply): a reply for a connection that has closed is dropped.
class Connection final : public IoHandler {
 public:
  static constexpr size_t kReadChunk = 16u << 10;
  static constexpr size_t kHighWaterBytes = 256u << 10;
  static constexpr size_t kLingerBytes = 1u << 20;
  static constexpr std::chrono::seconds kLingerTime{2};

  // Takes `fd` (a connected, accepted TCP socket). Call on loop `loop`'s
  // thread; the connection must already count in registry->open.
  Connection(int fd, uint64_t id, size_t loop, std::shared_ptr<ConnectionRegistry> registry);
  ~Connection() override;

  // Registers with the loop and the client table; closes itself on failure.
  void Start();
  // Closes now (no reply is flushed); idempotent.
  void Shutdown();

  void OnEvents(uint32_t events) override;
  void OnTick(Clock::time_point now) override;
  // The reply of the deferred request `seq` (Session::defer): writes it and
  // goes on with the client's next requests. Loop thread. False (nothing
  // written) for a stale `seq`: the connection closed, or the backstop
  // (ServerLimits::deferred_backstop) answered it already.
  bool OnDeferredReply(uint64_t seq, const ReplyWriter& write);

 private:
  // A WAIT or QEXISTS outstanding when the client stopped sending: stops
  // waiting and closes once the replies before it are sent (as Redis frees a
  // blocked client at EOF). The caller flushes.
  void EndWaitingAtEof();
  // Gives up on the outstanding deferred reply (EndWaitingAtEof, the
  // backstop): a late answer is dropped; the command counts as failed.
  void StopAwaitingReply();
  void ReadAndProcess();
  void Process();
  // Pipelined runs (command_run.h): after a run's first request `first`
  // (at in_[first_at]), takes the requests at in_[*next...] that continue it
  // into run_items_ (which starts with first's item), at most `limit` items
  // in all; *next ends after the last request taken. Leaves the parser reset.
  void CollectRun(RunKind kind, std::span<const std::string_view> first, size_t first_at, size_t limit,
                  size_t* next);
  void Flush();
  void UpdateInterest();
  // After the last reply of a closing connection: half-close, then read and
  // drop what the client still sends (bounded in bytes and time) so closing
  // does not reset the connection before the client has read that reply.
  void StartLinger();
  void DrainLinger();
  void CompactInput(size_t consumed);
  void Leave();  // out of the registry and the client table

  const int fd_;
  const size_t loop_index_;
  EventLoop* const loop_;
  std::shared_ptr<ConnectionRegistry> registry_;
  ServerContext& ctx_;
  RequestParser parser_;
  Session session_;
  std::shared_ptr<ClientRecord> record_;  // in ctx_.clients from Start() to Shutdown()
  std::string in_;   // in_[0, in_len_) is received, unconsumed input
  size_t in_len_ = 0;
  std::vector<std::string_view> run_items_;  // CollectRun's items, views into in_
  std::string out_;  // out_[out_pos_, size) is not yet taken by the kernel
  size_t out_pos_ = 0;
  uint32_t interest_ = 0;       // events registered with the loop
  bool pending_input_ = false;  // complete requests left unexecuted (paused)
  bool awaiting_reply_ = false; // a deferred reply is outstanding: execute and read nothing
  bool peer_shut_write_ = false; // EPOLLRDHUP seen while awaiting: stop watching for it
  uint64_t defer_seq_ = 0;      // numbers deferred requests
  uint64_t deferred_started_ = 0;  // FastNanos() when the deferred request began
  Clock::time_point deferred_since_;  // the loop's clock then (the backstop, OnTick)
  bool closing_ = false;        // close once out_ is sent
  bool closed_ = false;
  bool left_ = false;
  bool lingering_ = false;
  size_t linger_budget_ = kLingerBytes;
  Clock::time_point linger_deadline_;
  Clock::time_point last_activity_;
};

}  // namespace pollen::resp
