// HttpServer: a small HTTP/1.1 server (Boost.Beast) for the status page (/),
// /metrics, /healthz and /readyz. GET and HEAD only; requests are limited to 8 KiB and 10 s; at most
// kMaxConnections at once. The handler runs on the server's io_context thread
// and may block (the metrics handler waits for the driver).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "absl/status/status.h"

namespace pollen::runtime {

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  static constexpr size_t kMaxConnections = 64;
  using Handler = std::function<HttpResponse(const std::string& path)>;

  HttpServer(boost::asio::io_context& io, Handler handler);
  ~HttpServer();
  absl::Status Listen(const boost::asio::ip::tcp::endpoint& endpoint);
  void Stop();
  uint16_t port() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace pollen::runtime
