#include "node/runtime/resp/resp_server.h"

#include <atomic>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/strand.hpp>

#include "absl/strings/str_cat.h"
#include "node/runtime/resp/connection.h"

namespace pollen::resp {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct RespServer::Impl : std::enable_shared_from_this<RespServer::Impl> {
  Impl(std::vector<asio::io_context*> contexts, bool one_thread, const tcp::endpoint& ep, ServerContext& ctx)
      : ios(std::move(contexts)),
        one_thread_per_context(one_thread),
        endpoint(ep),
        ctx(ctx),
        acceptor(asio::make_strand(*ios.at(0))),
        backoff(acceptor.get_executor()),
        registry(std::make_shared<ConnectionRegistry>()) {}

  // Accepts the next connection straight onto the next io_context (round
  // robin), on a strand of its own unless that context has a single thread
  // (which serializes the connection's handlers already).
  void DoAccept() {
    asio::io_context& io = *ios[next_io];
    next_io = (next_io + 1) % ios.size();
    const asio::any_io_executor ex =
        one_thread_per_context ? asio::any_io_executor(io.get_executor()) : asio::any_io_executor(asio::make_strand(io));
    acceptor.async_accept(ex, [self = shared_from_this()](const boost::system::error_code& ec, tcp::socket socket) {
      self->OnAccept(ec, std::move(socket));
    });
  }

  void OnAccept(const boost::system::error_code& ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (!ec) {
      Admit(std::move(socket));
      DoAccept();
      return;
    }
    // Errors such as EMFILE are usually transient: retry after a pause rather
    // than spinning on them.
    backoff.expires_after(std::chrono::milliseconds(100));
    backoff.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
      if (!e && self->acceptor.is_open()) self->DoAccept();
    });
  }

  void Admit(tcp::socket socket) {
    std::shared_ptr<Connection> conn;
    {
      std::lock_guard<std::mutex> lock(registry->mu);
      if (registry->stopped) return;
      if (registry->open.size() >= ctx.limits.max_clients) {
        ctx.counters.connections_rejected.fetch_add(1, std::memory_order_relaxed);
        static constexpr std::string_view kFull = "-ERR max number of clients reached\r\n";
        boost::system::error_code e;
        socket.non_blocking(true, e);
        socket.write_some(asio::buffer(kFull.data(), kFull.size()), e);
        socket.shutdown(tcp::socket::shutdown_send, e);
        socket.close(e);
        return;
      }
      const uint64_t id = ctx.clients.NextId();
      conn = std::make_shared<Connection>(std::move(socket), ctx, registry, id);
      registry->open.emplace(id, conn);
    }
    ctx.counters.connections_accepted.fetch_add(1, std::memory_order_relaxed);
    conn->Start();
  }

  const std::vector<asio::io_context*> ios;  // non-empty
  const bool one_thread_per_context;          // true: no strands needed
  size_t next_io = 0;                        // on the acceptor's strand
  tcp::endpoint endpoint;
  ServerContext& ctx;
  tcp::acceptor acceptor;
  asio::steady_timer backoff;  // on the acceptor's strand
  std::shared_ptr<ConnectionRegistry> registry;
  std::atomic<uint16_t> port{0};
  std::atomic<bool> started{false};
};

RespServer::RespServer(asio::io_context& io, const tcp::endpoint& endpoint, ServerContext& context)
    : RespServer(std::vector<asio::io_context*>{&io}, endpoint, context) {}

RespServer::RespServer(std::vector<asio::io_context*> ios, const tcp::endpoint& endpoint, ServerContext& context)
    : impl_(std::make_shared<Impl>(std::move(ios), false, endpoint, context)) {}  // Impl: ios.at(0)

RespServer::RespServer(IoPool& pool, const tcp::endpoint& endpoint, ServerContext& context)
    : impl_(std::make_shared<Impl>(pool.contexts(), true, endpoint, context)) {}

RespServer::~RespServer() { Stop(); }

absl::Status RespServer::Start() {
  if (impl_->ctx.node == nullptr) return absl::FailedPreconditionError("RESP server needs a node");
  if (impl_->started.exchange(true)) return absl::FailedPreconditionError("RESP server already started");
  boost::system::error_code ec;
  tcp::acceptor& a = impl_->acceptor;
  const std::string where = absl::StrCat(impl_->endpoint.address().to_string(), ":", impl_->endpoint.port());
  a.open(impl_->endpoint.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec && impl_->endpoint.address().is_v6()) a.set_option(asio::ip::v6_only(true), ec);
  if (!ec) a.bind(impl_->endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    a.close(ignored);
    return absl::UnavailableError(absl::StrCat("RESP listen on ", where, ": ", ec.message()));
  }
  impl_->port = a.local_endpoint(ec).port();
  asio::post(a.get_executor(), [impl = impl_] { impl->DoAccept(); });
  return absl::OkStatus();
}

void RespServer::Stop() {
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(impl_->registry->mu);
    if (impl_->registry->stopped) return;
    impl_->registry->stopped = true;
    for (auto& [id, weak] : impl_->registry->open) {
      if (auto c = weak.lock()) conns.push_back(std::move(c));
    }
  }
  asio::post(impl_->acceptor.get_executor(), [impl = impl_] {
    boost::system::error_code ec;
    impl->acceptor.close(ec);
    impl->backoff.cancel();
  });
  for (auto& c : conns) c->Close();
}

uint16_t RespServer::port() const { return impl_->port.load(); }

size_t RespServer::client_count() const {
  std::lock_guard<std::mutex> lock(impl_->registry->mu);
  return impl_->registry->open.size();
}

}  // namespace pollen::resp
