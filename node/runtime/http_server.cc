#include "node/runtime/http_server.h"
#include "node/runtime/sv.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace pollen::runtime {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& io, Handler h) : io(io), acceptor(io), handler(std::move(h)) {}
  asio::io_context& io;
  tcp::acceptor acceptor;
  Handler handler;
  std::atomic<size_t> connections{0};
  bool stopped = false;

  struct Session : std::enable_shared_from_this<Session> {
    Session(std::shared_ptr<Impl> s, tcp::socket sock) : server(std::move(s)), stream(std::move(sock)) {}
    ~Session() { server->connections.fetch_sub(1); }
    std::shared_ptr<Impl> server;
    beast::tcp_stream stream;
    beast::flat_buffer buffer{8192};
    std::unique_ptr<http::request_parser<http::empty_body>> parser;
    http::response<http::string_body> response;

    void Read() {
      parser = std::make_unique<http::request_parser<http::empty_body>>();
      parser->header_limit(8192);
      stream.expires_after(std::chrono::seconds(10));
      http::async_read(stream, buffer, *parser, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec || self->server->stopped) return;
        self->Respond();
      });
    }
    void Respond() {
      const auto& req = parser->get();
      response = {};
      response.version(req.version());
      response.keep_alive(req.keep_alive());
      if (req.method() != http::verb::get && req.method() != http::verb::head) {
        response.result(http::status::method_not_allowed);
        response.set(http::field::content_type, "text/plain");
        response.body() = "method not allowed\n";
      } else {
        std::string target(req.target());
        if (auto q = target.find('?'); q != std::string::npos) target.resize(q);
        HttpResponse r = server->handler(target);
        response.result(r.status);
        response.set(http::field::content_type, r.content_type);
        if (req.method() == http::verb::get) response.body() = std::move(r.body);
      }
      response.set(http::field::server, "pollend");
      response.prepare_payload();
      http::async_write(stream, response, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec || self->server->stopped) return;
        if (!self->response.keep_alive()) {
          beast::error_code e;
          self->stream.socket().shutdown(tcp::socket::shutdown_send, e);
          return;
        }
        self->Read();
      });
    }
  };

  void Accept() {
    acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket sock) {
      if (self->stopped) return;
      if (!ec) {
        if (self->connections.load() >= kMaxConnections) {
          beast::error_code e;
          sock.close(e);
        } else {
          self->connections.fetch_add(1);
          std::make_shared<Session>(self, std::move(sock))->Read();
        }
      }
      self->Accept();
    });
  }
};

HttpServer::HttpServer(asio::io_context& io, Handler handler) : impl_(std::make_shared<Impl>(io, std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Listen(const tcp::endpoint& endpoint) {
  beast::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError("option 'http-bind': cannot listen on " + endpoint.address().to_string() + ":" +
                                  std::to_string(endpoint.port()) + ": " + ec.message());
  }
  impl_->Accept();
  return absl::OkStatus();
}

void HttpServer::Stop() {
  asio::post(impl_->io, [impl = impl_] {
    impl->stopped = true;
    beast::error_code ec;
    impl->acceptor.close(ec);
  });
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

}  // namespace pollen::runtime
