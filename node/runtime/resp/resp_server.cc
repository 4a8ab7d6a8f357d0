#include "node/runtime/resp/resp_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cassert>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "node/runtime/resp/acceptor.h"
#include "node/runtime/resp/connection.h"
#include "node/runtime/resp/fast_clock.h"
#include "node/runtime/resp/unique_fd.h"

namespace pollen::resp {

namespace {
// On loop `loop`'s thread: the connection counted in registry->open starts
// there, unless the server stopped in the meantime.
void StartConnection(const std::shared_ptr<ConnectionRegistry>& reg, size_t loop, UniqueFd& fd, uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(reg->mu);
    if (reg->stopped) {
      --reg->open;
      return;  // fd closes
    }
  }
  EventLoop* l = reg->loops[loop];
  auto* conn = static_cast<Connection*>(l->Adopt(std::make_unique<Connection>(fd.release(), id, loop, reg)));
  conn->Start();
}

void Refuse(int fd) {
  static constexpr std::string_view kFull = "-ERR max number of clients reached\r\n";
  [[maybe_unused]] const ssize_t n = ::send(fd, kFull.data(), kFull.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(fd, SHUT_WR);
  ::close(fd);
}
}  // namespace

struct RespServer::Impl : std::enable_shared_from_this<RespServer::Impl> {
  Impl(std::vector<EventLoop*> loops, const boost::asio::ip::tcp::endpoint& ep, ServerContext& c)
      : endpoint(ep), ctx(c), registry(std::make_shared<ConnectionRegistry>(std::move(loops), c)) {}

  // On the first loop's thread.
  void Admit(int fd) {
    {
      std::lock_guard<std::mutex> lock(registry->mu);
      if (registry->stopped) {
        ::close(fd);
        return;
      }
      if (registry->open >= ctx.limits.max_clients) {
        ctx.counters.connections_rejected.fetch_add(1, std::memory_order_relaxed);
        Refuse(fd);
        return;
      }
      ++registry->open;
    }
    ctx.counters.connections_accepted.fetch_add(1, std::memory_order_relaxed);
    const uint64_t id = ctx.clients.NextId();
    const size_t loop = next_loop;
    next_loop = (next_loop + 1) % registry->loops.size();
    if (loop == 0) {
      UniqueFd owned(fd);
      StartConnection(registry, 0, owned, id);
    } else {
      // Dropped unrun (the loop destroyed first): the descriptor closes and
      // the count is only of a server being torn down.
      registry->loops[loop]->Post([reg = registry, loop, owned = std::make_shared<UniqueFd>(fd), id] {
        StartConnection(reg, loop, *owned, id);
      });
    }
  }

  const boost::asio::ip::tcp::endpoint endpoint;
  ServerContext& ctx;
  const std::shared_ptr<ConnectionRegistry> registry;
  Acceptor* acceptor = nullptr;  // first loop's thread
  size_t next_loop = 0;          // first loop's thread
  std::atomic<uint16_t> port{0};
  std::atomic<bool> started{false};
};

RespServer::RespServer(IoPool& pool, const boost::asio::ip::tcp::endpoint& endpoint, ServerContext& context)
    : impl_(std::make_shared<Impl>(pool.loops(), endpoint, context)) {}

RespServer::~RespServer() { Stop(); }

// A CommandStats shard per event loop (Start checks it too, for a pool
// built some other way).
static_assert(IoPool::kMaxThreads <= CommandStats::kShards);

absl::Status RespServer::Start() {
  if (impl_->ctx.node == nullptr) return absl::FailedPreconditionError("RESP server needs a node");
  if (impl_->started.exchange(true)) return absl::FailedPreconditionError("RESP server already started");
  if (impl_->registry->loops.size() > CommandStats::kShards) {  // a CommandStats shard per loop
    std::lock_guard<std::mutex> lock(impl_->registry->mu);
    impl_->registry->stopped = true;
    return absl::InvalidArgumentError(absl::StrCat("RESP server: at most ", CommandStats::kShards, " threads"));
  }
  CalibrateFastClock();  // here, not in the first command's time
  const auto& ep = impl_->endpoint;
  const std::string where = absl::StrCat(ep.address().to_string(), ":", ep.port());
  absl::StatusOr<int> fd = Acceptor::Listen(ep.data(), static_cast<socklen_t>(ep.size()), where);
  if (!fd.ok()) {
    std::lock_guard<std::mutex> lock(impl_->registry->mu);
    impl_->registry->stopped = true;
    return fd.status();
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(*fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    impl_->port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                                 : reinterpret_cast<sockaddr_in&>(ss).sin_port);
    impl_->ctx.tcp_port.store(impl_->port.load());
  }
  EventLoop* first = impl_->registry->loops[0];
  first->Post([impl = impl_, first, lfd = std::make_shared<UniqueFd>(*fd)] {
    {
      std::lock_guard<std::mutex> lock(impl->registry->mu);
      if (impl->registry->stopped) return;  // lfd closes
    }
    auto* a = static_cast<Acceptor*>(first->Adopt(
        std::make_unique<Acceptor>(lfd->release(), first, [raw = impl.get()](int c) { raw->Admit(c); })));
    impl->acceptor = a;
    if (!a->Start().ok()) {
      a->Close();
      impl->acceptor = nullptr;
    }
  });
  return absl::OkStatus();
}

void RespServer::Stop() {
  const std::shared_ptr<ConnectionRegistry>& reg = impl_->registry;
  {
    std::lock_guard<std::mutex> lock(reg->mu);
    if (reg->stopped) return;
    reg->stopped = true;
  }
  reg->loops[0]->Post([impl = impl_] {
    if (impl->acceptor != nullptr) impl->acceptor->Close();
    impl->acceptor = nullptr;
  });
  for (size_t i = 0; i < reg->loops.size(); ++i) reg->loops[i]->Post([reg, i] { reg->CloseAll(i); });
}

uint16_t RespServer::port() const { return impl_->port.load(); }

size_t RespServer::client_count() const {
  std::lock_guard<std::mutex> lock(impl_->registry->mu);
  return impl_->registry->open;
}

}  // namespace pollen::resp
