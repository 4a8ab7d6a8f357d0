#include "node/runtime/resp/connection.h"

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "node/runtime/resp/reply_writer.h"

namespace pollen::resp {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
ParserLimits ToParserLimits(const ServerLimits& l) {
  ParserLimits p;
  p.max_args = l.max_args;
  p.max_bulk_bytes = l.max_bulk_bytes;
  p.max_inline_bytes = l.max_inline_bytes;
  return p;
}

// "ip:port" as Redis prints it (IPv6 without brackets).
std::string FormatEndpoint(const tcp::endpoint& e) {
  return e.address().to_string() + ":" + std::to_string(e.port());
}
}  // namespace

Connection::Connection(tcp::socket socket, ServerContext& ctx, std::shared_ptr<ConnectionRegistry> registry,
                       uint64_t id)
    : socket_(std::move(socket)),
      timer_(socket_.get_executor()),
      ctx_(ctx),
      registry_(std::move(registry)),
      parser_(ToParserLimits(ctx.limits)) {
  session_.id = id;
  boost::system::error_code ec;
  const tcp::endpoint peer = socket_.remote_endpoint(ec);
  if (!ec) session_.peer = FormatEndpoint(peer);
  const tcp::endpoint local = socket_.local_endpoint(ec);
  record_ = std::make_shared<ClientRecord>(id, session_.peer, ec ? std::string() : FormatEndpoint(local),
                                           static_cast<int64_t>(socket_.native_handle()),
                                           std::chrono::steady_clock::now());
  session_.record = record_.get();
  socket_.set_option(tcp::no_delay(true), ec);
  socket_.non_blocking(true, ec);  // synchronous writes never block (see MaybeWrite)
  ctx_.counters.connections_current.fetch_add(1, std::memory_order_relaxed);
}

Connection::~Connection() {
  ctx_.clients.Remove(session_.id);  // no-op after Shutdown()
  ctx_.counters.connections_current.fetch_sub(1, std::memory_order_relaxed);
}

void Connection::Start() {
  ctx_.clients.Add(record_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->Close();
  });
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->last_activity_ = std::chrono::steady_clock::now();
    self->ArmTimer();
    self->DoRead();
  });
}

void Connection::Close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->Shutdown(); });
}

void Connection::DoRead() {
  if (reading_ || pending_input_ || closing_ || closed_) return;
  if (in_.size() < in_len_ + kReadChunk) in_.resize(in_len_ + kReadChunk);
  reading_ = true;
  // Asio reads speculatively first: at pipeline depth 1 that read usually
  // fails with EAGAIN. Waiting for readiness instead (async_wait) was measured
  // to cost the same: Boost 1.74 re-arms the descriptor with epoll_ctl for
  // every non-speculative operation (README, "Performance").
  socket_.async_read_some(asio::buffer(in_.data() + in_len_, kReadChunk),
                          [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                            self->OnRead(ec, n);
                          });
}

void Connection::OnRead(const boost::system::error_code& ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (lingering_) {  // Linger() waited for this read; drain from now on
    lingering_ = false;
    if (ec) return Shutdown();
    Linger();
    return;
  }
  if (ec) {  // EOF or reset: nothing more to answer
    Shutdown();
    return;
  }
  in_len_ += n;
  ctx_.counters.bytes_in.fetch_add(n, std::memory_order_relaxed);
  last_activity_ = std::chrono::steady_clock::now();
  record_->touch(last_activity_);
  Process();
  MaybeWrite();
  DoRead();
}

void Connection::CompactInput(size_t consumed) {
  if (consumed == 0) return;
  std::memmove(in_.data(), in_.data() + consumed, in_len_ - consumed);
  in_len_ -= consumed;
  // Give back memory after a large request.
  if (in_.size() > (1u << 20) && in_len_ < (64u << 10)) {
    std::string smaller(in_.data(), in_len_);
    in_.swap(smaller);
  }
}

void Connection::Process() {
  size_t start = 0;
  size_t executed = 0;
  pending_input_ = false;
  while (!closing_) {
    if (out_.size() >= kHighWaterBytes || executed >= ctx_.limits.max_batch_replies) {
      pending_input_ = start < in_len_;  // resume after the write completes
      break;
    }
    const std::string_view buf(in_.data() + start, in_len_ - start);
    const RequestParser::Status st = parser_.Parse(buf);
    if (st == RequestParser::Status::kIncomplete) break;
    if (st == RequestParser::Status::kError) {
      ctx_.counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
      ctx_.counters.error_replies.fetch_add(1, std::memory_order_relaxed);
      AppendError(&out_, parser_.error().message);
      if (parser_.error().fatal) {
        closing_ = true;
        start = in_len_;
      } else {
        start += parser_.error().skip;
      }
      parser_.Reset();
      continue;
    }
    if (!parser_.args().empty()) {
      Dispatch(ctx_, session_, parser_.args(), &out_);
      ++executed;
      if (session_.close_after_reply) closing_ = true;
    }
    start += parser_.consumed();
    parser_.Reset();
  }
  if (closing_) start = in_len_;
  CompactInput(start);
  record_->set_query_buffer(in_len_);
  if (!closing_ && in_len_ > ctx_.limits.max_query_bytes) {
    ctx_.counters.protocol_errors.fetch_add(1, std::memory_order_relaxed);
    AppendError(&out_, "ERR Protocol error: query buffer limit exceeded");
    closing_ = true;
  }
  if (out_.size() + writing_.size() > ctx_.limits.max_output_bytes) {
    ctx_.counters.output_limit_disconnects.fetch_add(1, std::memory_order_relaxed);
    Shutdown();
  }
}

void Connection::MaybeWrite() {
  while (!closed_ && !writing_active_) {
    if (out_.empty()) {
      if (closing_) Linger();
      return;
    }
    // Most replies fit in the socket buffer: write them now, without a trip
    // through the reactor; queue only what the kernel did not take.
    boost::system::error_code ec;
    const size_t n = socket_.write_some(asio::buffer(out_), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
      Shutdown();
      return;
    }
    if (n > 0) {
      ctx_.counters.bytes_out.fetch_add(n, std::memory_order_relaxed);
      last_activity_ = std::chrono::steady_clock::now();
    }
    if (n < out_.size()) {
      writing_.assign(out_, n, std::string::npos);
      out_.clear();
      writing_active_ = true;
      asio::async_write(socket_, asio::buffer(writing_),
                        [self = shared_from_this()](const boost::system::error_code& e, size_t m) {
                          self->OnWrite(e, m);
                        });
      return;
    }
    out_.clear();
    if (out_.capacity() > (1u << 20)) std::string().swap(out_);
    if (pending_input_) Process();  // paused input: execute the next batch
  }
}

void Connection::OnWrite(const boost::system::error_code& ec, size_t n) {
  writing_active_ = false;
  if (closed_) return;
  if (ec) {
    Shutdown();
    return;
  }
  ctx_.counters.bytes_out.fetch_add(n, std::memory_order_relaxed);
  last_activity_ = std::chrono::steady_clock::now();
  writing_.clear();
  if (writing_.capacity() > (1u << 20)) std::string().swap(writing_);
  if (pending_input_) Process();
  MaybeWrite();
  DoRead();
}

void Connection::ArmTimer() {
  if (closed_ || timer_armed_ || ctx_.limits.idle_timeout.count() <= 0) return;
  timer_armed_ = true;
  timer_.expires_at(last_activity_ + ctx_.limits.idle_timeout);
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) { self->OnTimer(ec); });
}

void Connection::OnTimer(const boost::system::error_code& ec) {
  timer_armed_ = false;
  if (closed_ || ec) return;
  if (std::chrono::steady_clock::now() >= last_activity_ + ctx_.limits.idle_timeout) {
    ctx_.counters.idle_disconnects.fetch_add(1, std::memory_order_relaxed);
    Shutdown();
    return;
  }
  ArmTimer();
}

void Connection::Linger() {
  if (closed_ || lingering_) return;
  lingering_ = true;
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec || reading_) {  // a read in flight finishes in OnRead, which sees closing_
    if (ec) Shutdown();
    return;
  }
  timer_.cancel();
  timer_armed_ = false;
  timer_.expires_after(std::chrono::seconds(2));
  timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
    if (!e) self->Shutdown();
  });
  if (in_.size() < kReadChunk) in_.resize(kReadChunk);
  auto drain = std::make_shared<std::function<void(const boost::system::error_code&, size_t)>>();
  *drain = [self = shared_from_this(), drain](const boost::system::error_code& e, size_t n) {
    if (self->closed_) {
      *drain = nullptr;  // break the cycle
      return;
    }
    if (e || n >= self->linger_budget_) {
      self->Shutdown();
      *drain = nullptr;
      return;
    }
    self->linger_budget_ -= n;
    self->socket_.async_read_some(asio::buffer(self->in_.data(), kReadChunk), *drain);
  };
  socket_.async_read_some(asio::buffer(in_.data(), kReadChunk), *drain);
}

void Connection::Shutdown() {
  if (closed_) return;
  closed_ = true;
  {
    // Leave the registry first, so client_count() never counts a connection
    // its client has already seen closed.
    std::lock_guard<std::mutex> lock(registry_->mu);
    registry_->open.erase(session_.id);
  }
  ctx_.clients.Remove(session_.id);
  boost::system::error_code ec;
  timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

}  // namespace pollen::resp
