// RespServer: a TCP server speaking RESP2 (the Redis protocol) in front of a
// pollen::node::Node. See dispatcher.h for the commands.
//
// Promises:
//   - a connection's handlers never run concurrently: one strand per
//     connection when any number of threads may run each io_context; none
//     needed over an IoPool (one thread per context). Given several
//     io_contexts, connections are spread over them round-robin (the acceptor
//     runs on the first); over an IoPool a connection never changes threads;
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
// Lifecycle: construct, Start() (binds and listens), ... Stop() (closes the
// acceptor and every connection; idempotent; callable from any thread). The
// destructor calls Stop(); the io_context must outlive the server and should
// be run until the connections finish closing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "absl/status/status.h"
#include "node/runtime/resp/io_pool.h"
#include "node/runtime/resp/server_context.h"

namespace pollen::resp {

class RespServer {
 public:
  // `endpoint` is where to listen (port 0: pick one; see port()). `context`
  // must outlive the server.
  RespServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint,
             ServerContext& context);
  // `ios` non-empty; every context must outlive the server.
  RespServer(std::vector<boost::asio::io_context*> ios, const boost::asio::ip::tcp::endpoint& endpoint,
             ServerContext& context);
  // Over an IoPool's contexts: one thread each, so connections need no
  // strand. The pool must outlive the server.
  RespServer(IoPool& pool, const boost::asio::ip::tcp::endpoint& endpoint, ServerContext& context);
  ~RespServer();
  RespServer(const RespServer&) = delete;
  RespServer& operator=(const RespServer&) = delete;

  // Opens, binds (SO_REUSEADDR) and listens, then starts accepting.
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
