// Connection: one RESP client whose handlers never run concurrently (a strand,
// or an io_context run by one thread). Internal to RespServer.
//
// Reads into a bounded buffer, executes every complete request in it (in
// order) and queues the replies; writes them in batches while it keeps
// reading. It stops executing (and reading) while max_batch_replies replies or
// kHighWaterBytes are waiting, so a client that does not read stalls its own
// input rather than growing the server's memory; it is disconnected when its
// unparsed input exceeds max_query_bytes, its queued output exceeds
// max_output_bytes, or nothing is read or written for idle_timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "node/runtime/resp/client_table.h"
#include "node/runtime/resp/dispatcher.h"
#include "node/runtime/resp/request_parser.h"
#include "node/runtime/resp/server_context.h"

namespace pollen::resp {

class Connection;

// The server's set of open connections (shared with the connections so they
// can remove themselves after the server is gone).
// Ids come from ServerContext::clients.NextId(); every open connection is
// also in ServerContext::clients (for CLIENT LIST / KILL).
struct ConnectionRegistry {
  std::mutex mu;
  std::map<uint64_t, std::weak_ptr<Connection>> open;
  bool stopped = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  static constexpr size_t kReadChunk = 16u << 10;
  static constexpr size_t kHighWaterBytes = 256u << 10;

  // `socket`'s executor must serialize handlers: a strand, or an io_context
  // run by exactly one thread.
  Connection(boost::asio::ip::tcp::socket socket, ServerContext& ctx,
             std::shared_ptr<ConnectionRegistry> registry, uint64_t id);
  ~Connection();

  void Start();  // any thread
  void Close();  // any thread; idempotent

 private:
  void DoRead();
  void OnRead(const boost::system::error_code& ec, size_t n);
  void Process();
  void MaybeWrite();
  void OnWrite(const boost::system::error_code& ec, size_t n);
  void ArmTimer();
  void OnTimer(const boost::system::error_code& ec);
  void Shutdown();
  // After the last reply of a closing connection: half-close, then read and
  // drop what the client still sends (bounded) so closing does not reset the
  // connection before the client has read that reply.
  void Linger();
  void CompactInput(size_t consumed);

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;
  ServerContext& ctx_;
  std::shared_ptr<ConnectionRegistry> registry_;
  RequestParser parser_;
  Session session_;
  std::shared_ptr<ClientRecord> record_;  // in ctx_.clients from Start() to Shutdown()
  std::string in_;       // in_[0, in_len_) is received, unconsumed input
  size_t in_len_ = 0;
  std::string out_;      // replies not yet handed to the socket
  std::string writing_;  // replies being written
  bool reading_ = false;
  bool writing_active_ = false;
  bool pending_input_ = false;  // complete requests left unexecuted (paused)
  bool closing_ = false;        // close once out_ and writing_ are sent
  bool closed_ = false;
  bool timer_armed_ = false;
  bool lingering_ = false;
  size_t linger_budget_ = 1u << 20;
  std::chrono::steady_clock::time_point last_activity_;
};

}  // namespace pollen::resp
