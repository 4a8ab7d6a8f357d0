// RespServer: a TCP server speaking RESP2 (the Redis protocol) in front of a
// pollen::node::Node. See dispatcher.h for the commands.
//
// Promises:
//   - connections are spread over the pool's event loops round-robin (the
//     listening socket is on the first) and never change loops, so a
//     connection's handlers never run concurrently and need no lock;
//   - pipelining: every complete command in the input is executed in order and
//     the replies are written in batches;
//   - bounded memory per client (ServerLimits): a client whose unparsed input
//     or unread output exceeds its limit is disconnected; more than
//     max_clients connections are refused with "-ERR max number of clients
//     reached"; a silent client is closed after idle_timeout;
//   - malformed input gets a RESP error; the connection survives when the
//     framing allows it, else it is closed after the error is sent. Nothing a
//     client sends can crash the server.
//
// Lifecycle: construct, Start() (binds and listens; the pool accepts once it
// runs), ... Stop() (stops accepting and closes every connection, on the
// loops' threads; idempotent; callable from any thread), then IoPool::Stop()
// lets the loops finish. The pool and the context must outlive the server;
// the destructor calls Stop().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "absl/status/status.h"
#include "node/runtime/resp/io_pool.h"
#include "node/runtime/resp/server_context.h"

namespace pollen::resp {

class RespServer {
 public:
  // `endpoint` is where to listen (port 0: pick one; see port()).
  RespServer(IoPool& pool, const boost::asio::ip::tcp::endpoint& endpoint, ServerContext& context);
  ~RespServer();
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;

  // Opens, binds (SO_REUSEADDR) and listens, then starts accepting on the
  // pool's first loop.
  // An error (e.g. address in use) leaves the server stopped.
  absl::Status Start();
  void Stop();

  uint16_t port() const;        // the bound port, valid after Start()
  size_t client_count() const;  // open connections

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace pollen::resp
